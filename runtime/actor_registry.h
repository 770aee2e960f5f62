// ActorRegistry: actor types by name, and their methods by name, so a node can spawn a type it
// was told about by name and a remote caller can invoke a method by name.
//
// Register a type with the macro, in a .cc file whose library has `alwayslink = True` (static
// registration objects are otherwise dropped by the linker):
//
//   TROUPE_REGISTER_ACTOR(Counter, Add, SumWith);
//
// Each listed method must be a public member `R Method(const Req&)` with Req a protobuf message
// and R either absl::StatusOr<Reply> or troupe::Future<Reply> (Reply a protobuf message).
// Instances come from `static absl::StatusOr<std::unique_ptr<Counter>> Create(const
// troupe::ActorContext&)` when the type has it (construction that can fail says so in its
// Status), else from the constructor `Counter(const troupe::ActorContext&)` or `Counter()`.
//
// Thread-safety: registration happens during static initialisation (or before any lookup);
// lookups are thread-safe.
#ifndef TROUPE_RUNTIME_ACTOR_REGISTRY_H_
#define TROUPE_RUNTIME_ACTOR_REGISTRY_H_

#include <array>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/message.h"
#include "runtime/actor.h"
#include "runtime/future.h"

namespace troupe {
namespace internal {

class UntypedCall;

// Bytes of a member-function pointer, used to find a method's registration from `&T::Method`.
using MethodKey = std::array<char, 2 * sizeof(void*)>;

template <typename M>
MethodKey MakeMethodKey(M method) {
  static_assert(sizeof(M) <= sizeof(MethodKey), "unexpected member-function pointer size");
  MethodKey key{};
  std::memcpy(key.data(), &method, sizeof(M));
  return key;
}

// What a registered method looks like, deduced from its pointer.
template <typename M>
struct MethodTraits;

template <typename Reply>
struct ReplyOf;
template <typename Reply>
struct ReplyOf<absl::StatusOr<Reply>> {
  using type = Reply;
  static constexpr bool kAsync = false;
};
template <typename Reply>
struct ReplyOf<Future<Reply>> {
  using type = Reply;
  static constexpr bool kAsync = true;
};

template <typename C, typename R, typename Req>
struct MethodTraits<R (C::*)(const Req&)> {
  using Class = C;
  using Request = Req;
  using Return = R;
  using Reply = typename ReplyOf<R>::type;
  static constexpr bool kAsync = ReplyOf<R>::kAsync;
};

template <typename C, typename R, typename Req>
struct MethodTraits<R (C::*)(const Req&) const> : MethodTraits<R (C::*)(const Req&)> {};

}  // namespace internal

// One registered method.
struct MethodInfo {
  std::string name;
  const google::protobuf::Message* request_prototype = nullptr;
  const google::protobuf::Message* reply_prototype = nullptr;
  bool is_async = false;
  internal::MethodKey key{};
  // Runs the method for a by-name call whose request has already been checked to be of
  // request_prototype's type; completes `call` now (sync) or later (async).
  void (*invoke_untyped)(Actor* self, internal::UntypedCall* call) = nullptr;
};

// One registered actor type.
struct ActorTypeInfo {
  std::string name;
  std::type_index type = std::type_index(typeid(void));
  // Creates an instance: T::Create when the type has one, else its constructor.
  std::function<absl::StatusOr<std::unique_ptr<Actor>>(const ActorContext&)> factory;
  std::vector<MethodInfo> methods;

  // The method called `name`, or nullptr.
  const MethodInfo* FindMethod(absl::string_view method_name) const;
  // The method whose pointer has `key`, or nullptr.
  const MethodInfo* FindMethod(const internal::MethodKey& key) const;
  // Comma-separated method names, for error messages.
  std::string MethodNames() const;
};

// Whether an actor of `type` can stand in for one of `role` (an actor type whose methods define
// a role, e.g. RewardServer for "reward"): OK if `type` has every method of `role` under the same
// name with the same request and reply message types, so a caller holding a handle typed as
// `role` can call it by name (UntypedActorHandle::As). INVALID_ARGUMENT otherwise, naming each
// method that is missing or has other message types.
absl::Status CheckServes(const ActorTypeInfo& type, const ActorTypeInfo& role);

class ActorRegistry {
 public:
  // The process-wide registry that TROUPE_REGISTER_ACTOR fills.
  static ActorRegistry& Global();

  // Adds a type. ALREADY_EXISTS if the name is taken (by another C++ type), INVALID_ARGUMENT if
  // two methods share a name.
  absl::Status Register(ActorTypeInfo info);

  // Registered type by name / by C++ type, or nullptr. Returned pointers stay valid for the
  // registry's lifetime.
  const ActorTypeInfo* Find(absl::string_view type_name) const;
  const ActorTypeInfo* Find(std::type_index type) const;

  // All registered type names, sorted.
  std::vector<std::string> TypeNames() const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<ActorTypeInfo>> by_name_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::type_index, const ActorTypeInfo*> by_type_ ABSL_GUARDED_BY(mu_);
};

namespace internal {

// Completion interface of by-name calls (defined in call.h).
void CompleteUntypedCall(UntypedCall* call,
                         absl::StatusOr<std::unique_ptr<google::protobuf::Message>> r);
const google::protobuf::Message& UntypedCallRequest(const UntypedCall* call);
void RefUntypedCall(UntypedCall* call);
void UnrefUntypedCall(UntypedCall* call);

// Keeps a by-name call alive while its async method runs (UntypedCall is incomplete here).
class UntypedCallHold {
 public:
  explicit UntypedCallHold(UntypedCall* c) : c_(c) { RefUntypedCall(c_); }
  UntypedCallHold(UntypedCallHold&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  UntypedCallHold(const UntypedCallHold&) = delete;
  ~UntypedCallHold() {
    if (c_ != nullptr) UnrefUntypedCall(c_);
  }
  UntypedCall* get() const { return c_; }

 private:
  UntypedCall* c_;
};

// INTERNAL status naming the actor and method of `call`, for a method that threw.
absl::Status UntypedCallThrew(const UntypedCall* call, std::exception_ptr e);

template <auto Method>
void InvokeUntyped(Actor* self, UntypedCall* call) {
  using Traits = MethodTraits<decltype(Method)>;
  using C = typename Traits::Class;
  using Req = typename Traits::Request;
  using Reply = typename Traits::Reply;
  const Req& req = static_cast<const Req&>(UntypedCallRequest(call));
  C* obj = static_cast<C*>(self);
  if constexpr (Traits::kAsync) {
    Future<Reply> f;
    try {
      f = (obj->*Method)(req);
    } catch (...) {
      CompleteUntypedCall(call, UntypedCallThrew(call, std::current_exception()));
      return;
    }
    std::move(f).OnCompleteInline([keep = UntypedCallHold(call)](absl::StatusOr<Reply> r) {
      if (!r.ok()) {
        CompleteUntypedCall(keep.get(), r.status());
      } else {
        CompleteUntypedCall(keep.get(),
                            std::unique_ptr<google::protobuf::Message>(new Reply(std::move(*r))));
      }
    });
  } else {
    absl::StatusOr<Reply> r = absl::UnknownError("");
    try {
      r = (obj->*Method)(req);
    } catch (...) {
      CompleteUntypedCall(call, UntypedCallThrew(call, std::current_exception()));
      return;
    }
    if (!r.ok()) {
      CompleteUntypedCall(call, r.status());
    } else {
      CompleteUntypedCall(call,
                          std::unique_ptr<google::protobuf::Message>(new Reply(std::move(*r))));
    }
  }
}

template <auto Method>
MethodInfo MakeMethodInfo(const char* name) {
  using Traits = MethodTraits<decltype(Method)>;
  static_assert(std::is_base_of_v<google::protobuf::Message, typename Traits::Request>,
                "actor method requests must be protobuf messages");
  static_assert(std::is_base_of_v<google::protobuf::Message, typename Traits::Reply>,
                "actor method replies must be protobuf messages");
  MethodInfo m;
  m.name = name;
  m.request_prototype = &Traits::Request::default_instance();
  m.reply_prototype = &Traits::Reply::default_instance();
  m.is_async = Traits::kAsync;
  m.key = MakeMethodKey(Method);
  m.invoke_untyped = &InvokeUntyped<Method>;
  return m;
}

// Whether T has a factory `static absl::StatusOr<std::unique_ptr<T>> Create(const ActorContext&)`.
template <typename T, typename = void>
struct HasCreate : std::false_type {};
template <typename T>
struct HasCreate<T, std::void_t<decltype(T::Create(std::declval<const ActorContext&>()))>>
    : std::true_type {};

template <typename T>
absl::StatusOr<std::unique_ptr<Actor>> ConstructActor(const ActorContext& ctx) {
  if constexpr (HasCreate<T>::value) {
    static_assert(std::is_same_v<decltype(T::Create(std::declval<const ActorContext&>())),
                                 absl::StatusOr<std::unique_ptr<T>>>,
                  "an actor's Create must return absl::StatusOr<std::unique_ptr<T>>");
    absl::StatusOr<std::unique_ptr<T>> made = T::Create(ctx);
    if (!made.ok()) return made.status();
    if (*made == nullptr) return absl::InternalError("Create returned null");
    return std::unique_ptr<Actor>(*std::move(made));
  } else if constexpr (std::is_constructible_v<T, const ActorContext&>) {
    return std::make_unique<T>(ctx);
  } else {
    static_assert(std::is_default_constructible_v<T>,
                  "actor types need a constructor T(const troupe::ActorContext&) or T()");
    return std::make_unique<T>();
  }
}

// Registers T; aborts the program with a message on a registration error (it happens during
// static initialisation, where no caller could handle a Status) — unless a RegistrationSink is
// installed, which then receives the name or the error.
bool RegisterActorTypeOrDie(ActorTypeInfo info);

// What the registrations run while a shared library is loaded (runtime/actor_library.h) did:
// the names registered and the errors, which then do not abort the program.
struct RegistrationSink {
  std::vector<std::string> registered;
  std::vector<absl::Status> errors;
};
// Installs `sink` (nullptr removes it). The caller serialises loads; registrations on other
// threads meanwhile would land in the sink too, so install it only around a dlopen.
void SetRegistrationSink(RegistrationSink* sink);

template <typename T>
bool RegisterActorType(const char* name, std::vector<MethodInfo> methods) {
  static_assert(std::is_base_of_v<Actor, T>, "actor types must derive from troupe::Actor");
  ActorTypeInfo info;
  info.name = name;
  info.type = std::type_index(typeid(T));
  info.factory = &ConstructActor<T>;
  info.methods = std::move(methods);
  return RegisterActorTypeOrDie(std::move(info));
}

}  // namespace internal
}  // namespace troupe

#define TROUPE_INTERNAL_CAT2(a, b) a##b
#define TROUPE_INTERNAL_CAT(a, b) TROUPE_INTERNAL_CAT2(a, b)
#define TROUPE_INTERNAL_METHOD(Type, M) ::troupe::internal::MakeMethodInfo<&Type::M>(#M),
#define TROUPE_INTERNAL_FE_1(T, X) TROUPE_INTERNAL_METHOD(T, X)
#define TROUPE_INTERNAL_FE_2(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_1(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_3(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_2(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_4(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_3(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_5(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_4(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_6(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_5(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_7(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_6(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_8(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_7(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_9(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_8(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_10(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_9(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_11(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_10(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_12(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_11(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_13(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_12(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_14(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_13(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_15(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_14(T, __VA_ARGS__)
#define TROUPE_INTERNAL_FE_16(T, X, ...) \
  TROUPE_INTERNAL_METHOD(T, X) TROUPE_INTERNAL_FE_15(T, __VA_ARGS__)
#define TROUPE_INTERNAL_GET_FE(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, \
                               _16, NAME, ...)                                                   \
  NAME
#define TROUPE_INTERNAL_FOR_EACH_METHOD(T, ...)                                               \
  TROUPE_INTERNAL_GET_FE(__VA_ARGS__, TROUPE_INTERNAL_FE_16, TROUPE_INTERNAL_FE_15,           \
                         TROUPE_INTERNAL_FE_14, TROUPE_INTERNAL_FE_13, TROUPE_INTERNAL_FE_12, \
                         TROUPE_INTERNAL_FE_11, TROUPE_INTERNAL_FE_10, TROUPE_INTERNAL_FE_9,  \
                         TROUPE_INTERNAL_FE_8, TROUPE_INTERNAL_FE_7, TROUPE_INTERNAL_FE_6,    \
                         TROUPE_INTERNAL_FE_5, TROUPE_INTERNAL_FE_4, TROUPE_INTERNAL_FE_3,    \
                         TROUPE_INTERNAL_FE_2, TROUPE_INTERNAL_FE_1)                          \
  (T, __VA_ARGS__)

// Registers actor type `Type` under the name #Type with up to 16 methods (see the file comment).
#define TROUPE_REGISTER_ACTOR(Type, ...)                                      \
  static const bool TROUPE_INTERNAL_CAT(troupe_actor_registered_, __LINE__) = \
      ::troupe::internal::RegisterActorType<Type>(                            \
          #Type, {TROUPE_INTERNAL_FOR_EACH_METHOD(Type, __VA_ARGS__)})

#endif  // TROUPE_RUNTIME_ACTOR_REGISTRY_H_
