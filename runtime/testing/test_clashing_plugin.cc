// A shared library that registers a type under a name the loading program already uses
// ("EchoRole", defined in runtime/actor_library_test).
#include "absl/status/statusor.h"
#include "runtime/actor.h"
#include "runtime/actor_registry.h"
#include "runtime/testing/test_messages.pb.h"

namespace troupe::testing {
namespace {

class EchoRole : public Actor {
 public:
  absl::StatusOr<Num> Echo(const Num& n) { return n; }
};

TROUPE_REGISTER_ACTOR(EchoRole, Echo);

}  // namespace
}  // namespace troupe::testing
