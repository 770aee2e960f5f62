#include "runtime/actor_registry.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/log.h"
#include "google/protobuf/descriptor.h"
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

absl::Status CheckServes(const ActorTypeInfo& type, const ActorTypeInfo& role) {
  std::vector<std::string> problems;
  for (const MethodInfo& want : role.methods) {
    const std::string signature =
        absl::StrCat(want.name, "(", want.request_prototype->GetDescriptor()->full_name(), ") -> ",
                     want.reply_prototype->GetDescriptor()->full_name());
    const MethodInfo* have = type.FindMethod(want.name);
    if (have == nullptr) {
      problems.push_back(absl::StrCat("no method ", signature));
    } else if (have->request_prototype->GetDescriptor() !=
                   want.request_prototype->GetDescriptor() ||
               have->reply_prototype->GetDescriptor() != want.reply_prototype->GetDescriptor()) {
      problems.push_back(
          absl::StrCat("method ", want.name, " takes ",
                       have->request_prototype->GetDescriptor()->full_name(), " and returns ",
                       have->reply_prototype->GetDescriptor()->full_name(), ", not ", signature));
    }
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(type.name, " does not serve the methods of ",
                                                 role.name, ": ", absl::StrJoin(problems, "; ")));
}

namespace internal {
namespace {

absl::Mutex sink_mu(absl::kConstInit);
RegistrationSink* sink ABSL_GUARDED_BY(sink_mu) = nullptr;

}  // namespace

void SetRegistrationSink(RegistrationSink* s) {
  absl::MutexLock lock(&sink_mu);
  sink = s;
}

bool RegisterActorTypeOrDie(ActorTypeInfo info) {
  const std::string name = info.name;
  absl::Status s = ActorRegistry::Global().Register(std::move(info));
  {
    absl::MutexLock lock(&sink_mu);
    if (sink != nullptr) {
      if (s.ok()) {
        sink->registered.push_back(name);
      } else {
        sink->errors.push_back(absl::Status(
            s.code(), absl::StrCat("cannot register actor type ", name, ": ", s.message())));
      }
      return s.ok();
    }
  }
  if (!s.ok()) {
    TROUPE_LOG(WARNING) << absl::StrFormat("troupe: cannot register actor type %s: %s",
                                           name.c_str(), s.ToString().c_str());
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
