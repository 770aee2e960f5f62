#include "runtime/actor_library.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <system_error>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "runtime/actor_registry.h"

namespace troupe {
namespace {

struct Loaded {
  absl::Mutex mu;
  // Resolved path -> what its load gave.
  std::map<std::string, absl::StatusOr<std::vector<std::string>>> by_path ABSL_GUARDED_BY(mu);
};

Loaded& Libraries() {
  static Loaded* loaded = new Loaded;
  return *loaded;
}

absl::StatusOr<std::vector<std::string>> Open(const std::string& path, const std::string& shown) {
  internal::RegistrationSink sink;
  internal::SetRegistrationSink(&sink);
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  internal::SetRegistrationSink(nullptr);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return absl::InvalidArgumentError(absl::StrCat(
        "actor library ", shown, ": cannot load it: ", why != nullptr ? why : "dlopen failed"));
  }
  // The handle is never closed: registered types point into the library.
  if (!sink.errors.empty()) {
    std::vector<std::string> messages;
    for (const absl::Status& s : sink.errors) messages.push_back(std::string(s.message()));
    return absl::InvalidArgumentError(
        absl::StrCat("actor library ", shown, ": ", absl::StrJoin(messages, "; ")));
  }
  if (sink.registered.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor library ", shown,
                     ": exports no actor type (no TROUPE_REGISTER_ACTOR ran when it was loaded)"));
  }
  std::sort(sink.registered.begin(), sink.registered.end());
  return sink.registered;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> LoadActorLibrary(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (path.empty()) return absl::InvalidArgumentError("actor library: the path is empty");
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("actor library ", path, ": file not found"));
  }
  if (fs::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor library ", path, ": is a directory, not a shared library"));
  }
  fs::path resolved = fs::canonical(path, ec);
  if (ec) resolved = fs::absolute(path, ec);
  Loaded& loaded = Libraries();
  absl::MutexLock lock(&loaded.mu);
  auto it = loaded.by_path.find(resolved.string());
  if (it == loaded.by_path.end()) {
    // dlopen needs a path with a slash to skip the library search path.
    it = loaded.by_path.emplace(resolved.string(), Open(resolved.string(), path)).first;
  }
  return it->second;
}

}  // namespace troupe
