#include "runtime/future.h"

#include <cxxabi.h>

#include <cstdlib>
#include <string>
#include <typeinfo>

#include "base/log.h"

namespace troupe {
namespace {

thread_local Executor* current_executor = nullptr;
thread_local const char* current_mailbox_actor = nullptr;
// The actor a background task (runtime/background_task.h) of this thread works for.
thread_local const char* current_background_actor = nullptr;

}  // namespace

Executor* CurrentExecutor() { return current_executor; }

namespace internal {

const char* CurrentMailboxActor() { return current_mailbox_actor; }

namespace {
const char* LogContext() {
  return current_mailbox_actor != nullptr ? current_mailbox_actor : current_background_actor;
}
// Log lines written inside an actor's handler, or by its background tasks, name the actor
// (base/log.h).
[[maybe_unused]] const bool kLogsNameTheActor = [] {
  SetLogContextProvider(&LogContext);
  return true;
}();
}  // namespace

ScopedActorContext::ScopedActorContext(Executor* executor, const char* mailbox_actor)
    : saved_executor_(current_executor), saved_actor_(current_mailbox_actor) {
  current_executor = executor;
  current_mailbox_actor = mailbox_actor;
}

ScopedActorContext::~ScopedActorContext() {
  current_executor = saved_executor_;
  current_mailbox_actor = saved_actor_;
}

ScopedBackgroundActor::ScopedBackgroundActor(const char* actor) : saved_(current_background_actor) {
  current_background_actor = actor;
}

ScopedBackgroundActor::~ScopedBackgroundActor() { current_background_actor = saved_; }

absl::Status ExceptionToStatus(std::exception_ptr e, const char* where) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    // c10::Error derives from std::exception; its what() carries LibTorch's message.
    int rc = 0;
    char* demangled = abi::__cxa_demangle(typeid(ex).name(), nullptr, nullptr, &rc);
    std::string type = rc == 0 && demangled != nullptr ? demangled : typeid(ex).name();
    std::free(demangled);
    return absl::InternalError(absl::StrCat(where, " threw ", type, ": ", ex.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(where, " threw a non-std::exception"));
  }
}

}  // namespace internal
}  // namespace troupe
