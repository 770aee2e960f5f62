// Actor types in a shared library, for runtime/actor_library_test: one that serves the test's
// "EchoRole" methods and one whose Echo takes other messages.
#include "absl/status/statusor.h"
#include "runtime/actor.h"
#include "runtime/actor_registry.h"
#include "runtime/testing/test_messages.pb.h"

namespace troupe::testing {
namespace {

class PluginEcho : public Actor {
 public:
  explicit PluginEcho(const ActorContext& ctx) : offset_(ctx.config().value("offset", 1)) {}
  absl::StatusOr<Num> Echo(const Num& n) {
    Num out;
    out.set_value(n.value() + offset_);
    return out;
  }

 private:
  int64_t offset_;
};

class PluginTextEcho : public Actor {
 public:
  absl::StatusOr<Text> Echo(const Text& t) { return t; }
};

TROUPE_REGISTER_ACTOR(PluginEcho, Echo);
TROUPE_REGISTER_ACTOR(PluginTextEcho, Echo);

}  // namespace
}  // namespace troupe::testing
