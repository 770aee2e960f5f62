// Registry<Entry>: a thread-safe map from names to entries, the one mechanism behind every
// by-name extension point of troupe (rewards, tasks, recipes), filled by static registration.
//
//   // reward/reward_function.h
//   Registry<RewardFactory>& RewardRegistry();        // a function-local static, kind "reward"
//   #define TROUPE_REGISTER_REWARD(name, Factory)  /* expands to: */
//     TROUPE_REGISTER_IN(::troupe::reward::RewardRegistry(), name, Factory)
//
//   // tasks/countdown/countdown.cc (in a cc_library with alwayslink = True)
//   TROUPE_REGISTER_REWARD("countdown", MakeCountdownReward);
//
// The library holding a registration line needs `alwayslink = True`, else the linker drops the
// object file and its static initialiser with it. A registration that fails (a duplicate name)
// aborts the program with the registry's message: during static initialisation nobody could
// handle a Status, and two extensions claiming one name is a build error, not a run-time one.
//
// Entries are never removed, so pointers returned by Find stay valid for the registry's lifetime.
// Thread-safety: every method may be called concurrently (one mutex guards the map).
#ifndef TROUPE_BASE_REGISTRY_H_
#define TROUPE_BASE_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace troupe {

template <typename Entry>
class Registry {
 public:
  // `kind` names what is registered ("reward", "task", "recipe") in error messages.
  using entry_type = Entry;

  explicit Registry(std::string kind) : kind_(std::move(kind)) {}
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  const std::string& kind() const { return kind_; }

  // Adds `entry` under `name`. INVALID_ARGUMENT for an empty name; ALREADY_EXISTS if the name is
  // taken (the registered entry is kept).
  absl::Status Add(absl::string_view name, Entry entry) {
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(kind_, " name is empty"));
    }
    absl::MutexLock lock(&mu_);
    auto [it, added] = entries_.try_emplace(std::string(name), nullptr);
    if (!added) {
      return absl::AlreadyExistsError(absl::StrCat(kind_, " '", name, "' is already registered"));
    }
    it->second = std::make_unique<const Entry>(std::move(entry));
    return absl::OkStatus();
  }

  // The entry registered under `name`, or nullptr.
  const Entry* Find(absl::string_view name) const {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(std::string(name));
    return it == entries_.end() ? nullptr : it->second.get();
  }

  // The entry registered under `name`; NOT_FOUND listing the registered names otherwise.
  absl::StatusOr<const Entry*> Get(absl::string_view name) const {
    if (const Entry* e = Find(name)) return e;
    return absl::NotFoundError(
        absl::StrCat("no ", kind_, " '", name,
                     "' is registered (registered: ", absl::StrJoin(Names(), ", "), ")"));
  }

  // Every registered name, sorted.
  std::vector<std::string> Names() const {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> names;
    names.reserve(entries_.size());
    for (const auto& [name, entry] : entries_) names.push_back(name);
    return names;
  }

 private:
  const std::string kind_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<const Entry>> entries_ ABSL_GUARDED_BY(mu_);
};

namespace internal {
// Prints `status` and aborts unless it is OK; returns true (the value a registration line keeps).
bool CheckRegistration(const absl::Status& status);
}  // namespace internal

// Adds `entry` to `registry` under `name` during static initialisation; aborts the program with
// the registry's message on failure (see the file comment). Returns true.
template <typename Entry>
bool RegisterStatically(Registry<Entry>& registry, absl::string_view name,
                        typename Registry<Entry>::entry_type entry) {
  return internal::CheckRegistration(registry.Add(name, std::move(entry)));
}

}  // namespace troupe

#define TROUPE_REGISTRY_CAT2(a, b) a##b
#define TROUPE_REGISTRY_CAT(a, b) TROUPE_REGISTRY_CAT2(a, b)

// One static registration of `entry` under `name` in `registry` (an expression yielding a
// troupe::Registry<Entry>&); for the per-kind macros (TROUPE_REGISTER_REWARD, ...), at namespace
// scope in a .cc file.
#define TROUPE_REGISTER_IN(registry, name, entry)                                        \
  static const bool TROUPE_REGISTRY_CAT(troupe_registered_, __LINE__) [[maybe_unused]] = \
      ::troupe::RegisterStatically(registry, name, entry)

#endif  // TROUPE_BASE_REGISTRY_H_
