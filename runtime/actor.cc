#include "runtime/actor.h"

#include "runtime/actor_system.h"
#include "runtime/internal/constructing.h"

namespace troupe {
namespace internal {
namespace {

thread_local const ActorContext* constructing_context = nullptr;

}  // namespace

ScopedConstructing::ScopedConstructing(const ActorContext* ctx) : saved_(constructing_context) {
  constructing_context = ctx;
}

ScopedConstructing::~ScopedConstructing() { constructing_context = saved_; }

const ActorContext* ConstructingContext() { return constructing_context; }

}  // namespace internal

const char* ActorStateName(ActorState s) {
  switch (s) {
    case ActorState::kPending:
      return "PENDING";
    case ActorState::kAlive:
      return "ALIVE";
    case ActorState::kRestarting:
      return "RESTARTING";
    case ActorState::kDead:
      return "DEAD";
  }
  return "UNKNOWN";
}

const std::string& ActorContext::node_address() const {
  static const std::string* const kLoopback = new std::string("127.0.0.1");
  return system_ != nullptr ? system_->node_address() : *kLoopback;
}

Actor::Actor() : context_(internal::ConstructingContext()) {}

}  // namespace troupe
