// The in-flight state of one actor call: request, reply future, deadline — one allocation.
//
// A call is created by a handle, sits in the system's DeadlineQueue until it completes, and
// travels to the actor as a reference (in-process calls never serialize the request). Exactly
// one completion wins: the method's reply, a failure (actor killed, shut down), or the deadline.
//
// Thread-safety: completion and deadline handling are thread-safe; Invoke runs on the actor's
// thread.
#ifndef TROUPE_RUNTIME_INTERNAL_CALL_H_
#define TROUPE_RUNTIME_INTERNAL_CALL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "runtime/actor.h"
#include "runtime/actor_registry.h"
#include "runtime/future.h"
#include "runtime/internal/deadline_queue.h"
#include "runtime/internal/ref_counted.h"

namespace troupe {
namespace internal {

class CallBase;

// The executor of one actor instance, which async calls also tell when their method's future
// completed (so the actor can count calls in flight against max_concurrency).
class CallSink : public Executor {
 public:
  // Thread-safe; may be called after the instance ended (then it does nothing).
  virtual void AsyncCallDone(CallBase* call) = 0;
};

// Who a call is addressed to, for error messages ("actor Counter 'c1'").
struct CallTarget {
  std::string type_name;
  std::string name;  // the actor's name, or its id when anonymous
  std::string Describe() const { return absl::StrCat("actor ", type_name, " '", name, "'"); }
};

// An event loop that completes calls (a remote transport's completion queue), which a thread
// waiting for one of them may run itself instead of parking (see FutureState::HelpUntilReady).
class CallDriver {
 public:
  virtual ~CallDriver() = default;
  // Runs the loop on this thread until done() or `deadline`; may return earlier (the caller
  // then waits as usual). Thread-safe.
  virtual void DriveUntil(absl::FunctionRef<bool()> done, absl::Time deadline) = 0;
};

class CallBase : public DeadlineEntry {
 public:
  explicit CallBase(const MethodInfo* method) : method_(method) {}

  virtual void Ref() const = 0;
  virtual void Unref() const = 0;

  // Runs the method on `self` (the actor's thread). Returns true if the call is complete when
  // Invoke returns; false for an async method, which later calls sink->AsyncCallDone(this).
  virtual bool Invoke(Actor* self, CallSink* sink) = 0;

  // Completes the call with an error; returns false if it had completed already.
  virtual bool Fail(absl::Status status) = 0;

  // The request (for transports that serialize it).
  virtual const google::protobuf::Message& request() const = 0;

  // Completes with a reply of the method's reply type (for transports that parsed it).
  virtual bool CompleteWithMessage(std::unique_ptr<google::protobuf::Message> reply) = 0;

  const MethodInfo* method() const { return method_; }

  // Set by the handle when the call is sent.
  void set_target(std::shared_ptr<const CallTarget> target) { target_ = std::move(target); }
  const CallTarget* target() const { return target_.get(); }
  void set_generation(uint64_t g) { generation_ = g; }
  uint64_t generation() const { return generation_; }
  void set_queue(DeadlineQueue* q, absl::Duration timeout) {
    queue_ = q;
    timeout_ = timeout;
  }
  DeadlineQueue* queue() const { return queue_; }
  // Wall-clock µs when the method started (runtime/actor_system.cc records the call's span from
  // it); 0 when the call is not traced.
  void set_trace_start_us(int64_t t) { trace_start_us_ = t; }
  int64_t trace_start_us() const { return trace_start_us_; }
  // Set by a transport whose event loop completes the call (before it is sent).
  void set_driver(std::shared_ptr<CallDriver> driver) { driver_ = std::move(driver); }

  // "actor Counter 'c1' method Add".
  std::string Describe() const {
    return absl::StrCat(target_ != nullptr ? target_->Describe() : std::string("actor"), " method ",
                        method_ != nullptr ? method_->name : std::string("?"));
  }

  void RefEntry() override { Ref(); }
  void UnrefEntry() override { Unref(); }
  void OnDeadline() override {
    Fail(absl::DeadlineExceededError(absl::StrCat(
        "call to ", Describe(), " missed its deadline of ", absl::FormatDuration(timeout_))));
  }
  void OnDrain(const absl::Status& why) override {
    Fail(absl::Status(why.code(), absl::StrCat("call to ", Describe(), ": ", why.message())));
  }

 protected:
  // After the result is set: leave the deadline queue.
  void Unqueue() {
    if (queue_ != nullptr) queue_->Remove(this);
  }

  const MethodInfo* method_;

  // Runs the driver (if any) until done() or `deadline`.
  void Drive(absl::FunctionRef<bool()> done, absl::Time deadline) {
    if (driver_ != nullptr) driver_->DriveUntil(done, deadline);
  }

 private:
  std::shared_ptr<const CallTarget> target_;
  std::shared_ptr<CallDriver> driver_;
  DeadlineQueue* queue_ = nullptr;
  absl::Duration timeout_;
  uint64_t generation_ = 0;
  int64_t trace_start_us_ = 0;
};

// INTERNAL status for a method that threw.
absl::Status CallThrew(const CallBase* call, std::exception_ptr e);

// A call made through ActorHandle<T>::Call(&T::Method, request).
template <typename Method>
class TypedCall final : public FutureState<typename MethodTraits<Method>::Reply>, public CallBase {
 public:
  using Traits = MethodTraits<Method>;
  using Req = typename Traits::Request;
  using Reply = typename Traits::Reply;
  using C = typename Traits::Class;

  template <typename Arg>
  TypedCall(const MethodInfo* info, Method method, Arg&& request)
      : CallBase(info), method_ptr_(method), request_(std::forward<Arg>(request)) {}

  void Ref() const override { RefCounted::Ref(); }
  void Unref() const override { RefCounted::Unref(); }

  bool Invoke(Actor* self, CallSink* sink) override {
    C* obj = static_cast<C*>(self);
    if constexpr (Traits::kAsync) {
      Future<Reply> f;
      try {
        f = (obj->*method_ptr_)(request_);
      } catch (...) {
        Fail(CallThrew(this, std::current_exception()));
        return true;
      }
      Ref();  // released when the method's future completes
      std::move(f).OnCompleteInline([this, sink = RefPtr<CallSink>(sink)](absl::StatusOr<Reply> r) {
        Finish(std::move(r));
        sink->AsyncCallDone(this);
        Unref();
      });
      return false;
    } else {
      try {
        Finish((obj->*method_ptr_)(request_));
      } catch (...) {
        Fail(CallThrew(this, std::current_exception()));
      }
      return true;
    }
  }

  bool Fail(absl::Status status) override { return Finish(std::move(status)); }

  const google::protobuf::Message& request() const override { return request_; }

  bool CompleteWithMessage(std::unique_ptr<google::protobuf::Message> reply) override {
    return Finish(std::move(*static_cast<Reply*>(reply.get())));
  }

 protected:
  void HelpUntilReady(absl::Time deadline) override {
    Drive([this] { return this->ready(); }, deadline);
  }

 private:
  bool Finish(absl::StatusOr<Reply> r) {
    if (!this->Complete(std::move(r))) return false;
    Unqueue();
    return true;
  }

  Method method_ptr_;
  Req request_;
};

// A call by method name with a type-erased request (remote callers, SpawnByName users).
class UntypedCall final : public FutureState<std::unique_ptr<google::protobuf::Message>>,
                          public CallBase {
 public:
  UntypedCall(const MethodInfo* info, std::unique_ptr<google::protobuf::Message> request)
      : CallBase(info), request_(std::move(request)) {}

  void Ref() const override { RefCounted::Ref(); }
  void Unref() const override { RefCounted::Unref(); }

  bool Invoke(Actor* self, CallSink* sink) override {
    if (!method_->is_async) {
      method_->invoke_untyped(self, this);
      return true;
    }
    sink_ = RefPtr<CallSink>(sink);
    method_->invoke_untyped(self, this);
    return false;
  }

  bool Fail(absl::Status status) override { return Finish(std::move(status)); }

  const google::protobuf::Message& request() const override { return *request_; }

  bool CompleteWithMessage(std::unique_ptr<google::protobuf::Message> reply) override {
    return Finish(std::move(reply));
  }

  void HelpUntilReady(absl::Time deadline) override {
    Drive([this] { return this->ready(); }, deadline);
  }

  // From the method (see InvokeUntyped).
  void MethodDone(absl::StatusOr<std::unique_ptr<google::protobuf::Message>> r) {
    Finish(std::move(r));
    if (sink_ != nullptr) {
      RefPtr<CallSink> sink = std::move(sink_);
      sink->AsyncCallDone(this);
    }
  }

 private:
  bool Finish(absl::StatusOr<std::unique_ptr<google::protobuf::Message>> r) {
    if (!this->Complete(std::move(r))) return false;
    Unqueue();
    return true;
  }

  std::unique_ptr<google::protobuf::Message> request_;
  RefPtr<CallSink> sink_;
};

}  // namespace internal
}  // namespace troupe

#endif  // TROUPE_RUNTIME_INTERNAL_CALL_H_
