#include "runtime/actor_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/internal/call.h"

namespace troupe {

const MethodInfo* ActorTypeInfo::FindMethod(absl::string_view method_name) const {
  for (const MethodInfo& m : methods) {
    if (m.name == method_name) return &m;
  }
  return nullptr;
}

const MethodInfo* ActorTypeInfo::FindMethod(const internal::MethodKey& key) const {
  for (const MethodInfo& m : methods) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

std::string ActorTypeInfo::MethodNames() const {
  std::vector<std::string> names;
  for (const MethodInfo& m : methods) names.push_back(m.name);
  return absl::StrJoin(names, ", ");
}

ActorRegistry& ActorRegistry::Global() {
  static ActorRegistry* registry = new ActorRegistry();
  return *registry;
}

absl::Status ActorRegistry::Register(ActorTypeInfo info) {
  for (size_t i = 0; i < info.methods.size(); ++i) {
    for (size_t j = i + 1; j < info.methods.size(); ++j) {
      if (info.methods[i].name == info.methods[j].name) {
        return absl::InvalidArgumentError(absl::StrCat("actor type ", info.name, " lists method ",
                                                       info.methods[i].name, " twice"));
      }
    }
  }
  absl::MutexLock lock(&mu_);
  auto it = by_name_.find(info.name);
  if (it != by_name_.end()) {
    if (it->second->type == info.type) return absl::OkStatus();  // same type, registered twice
    return absl::AlreadyExistsError(
        absl::StrCat("actor type name ", info.name, " is already registered by another type"));
  }
  auto owned = std::make_unique<ActorTypeInfo>(std::move(info));
  by_type_[owned->type] = owned.get();
  by_name_.emplace(owned->name, std::move(owned));
  return absl::OkStatus();
}

const ActorTypeInfo* ActorRegistry::Find(absl::string_view type_name) const {
  absl::MutexLock lock(&mu_);
  auto it = by_name_.find(type_name);
  return it == by_name_.end() ? nullptr : it->second.get();
}

const ActorTypeInfo* ActorRegistry::Find(std::type_index type) const {
  absl::MutexLock lock(&mu_);
  auto it = by_type_.find(type);
  return it == by_type_.end() ? nullptr : it->second;
}

std::vector<std::string> ActorRegistry::TypeNames() const {
  std::vector<std::string> names;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, info] : by_name_) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace internal {

bool RegisterActorTypeOrDie(ActorTypeInfo info) {
  const std::string name = info.name;
  absl::Status s = ActorRegistry::Global().Register(std::move(info));
  if (!s.ok()) {
    std::fprintf(stderr, "troupe: cannot register actor type %s: %s\n", name.c_str(),
                 s.ToString().c_str());
    std::abort();
  }
  return true;
}

void CompleteUntypedCall(UntypedCall* call,
                         absl::StatusOr<std::unique_ptr<google::protobuf::Message>> r) {
  call->MethodDone(std::move(r));
}

const google::protobuf::Message& UntypedCallRequest(const UntypedCall* call) {
  return call->request();
}

void RefUntypedCall(UntypedCall* call) { call->Ref(); }
void UnrefUntypedCall(UntypedCall* call) { call->Unref(); }

absl::Status UntypedCallThrew(const UntypedCall* call, std::exception_ptr e) {
  return CallThrew(call, e);
}

absl::Status CallThrew(const CallBase* call, std::exception_ptr e) {
  absl::Status s = ExceptionToStatus(e, call->Describe().c_str());
  return s;
}

}  // namespace internal
}  // namespace troupe
