// The context of the actor instance being constructed on this thread, so that troupe::Actor's
// default constructor can find it without every actor type forwarding it.
#ifndef TROUPE_RUNTIME_INTERNAL_CONSTRUCTING_H_
#define TROUPE_RUNTIME_INTERNAL_CONSTRUCTING_H_

namespace troupe {

class ActorContext;

namespace internal {

class ScopedConstructing {
 public:
  explicit ScopedConstructing(const ActorContext* ctx);
  ~ScopedConstructing();

 private:
  const ActorContext* saved_;
};

// Null outside an actor constructor run by the ActorSystem.
const ActorContext* ConstructingContext();

}  // namespace internal
}  // namespace troupe

#endif  // TROUPE_RUNTIME_INTERNAL_CONSTRUCTING_H_
