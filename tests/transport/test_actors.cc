#include "tests/transport/test_actors.h"

#include <unistd.h>

#include "absl/time/clock.h"
#include "runtime/actor_registry.h"

namespace troupe {
namespace transport_test {

absl::StatusOr<testing::Num> ProcessCounter::Add(const testing::Num& n) {
  total_ += n.value();
  testing::Num out;
  out.set_value(total_);
  return out;
}

absl::StatusOr<testing::Empty> ProcessCounter::Nap(const testing::Sleep& s) {
  absl::SleepFor(absl::Milliseconds(s.millis()));
  return testing::Empty();
}

absl::StatusOr<testing::Num> ProcessCounter::Pid(const testing::Empty&) {
  testing::Num out;
  out.set_value(static_cast<int64_t>(getpid()));
  return out;
}

TROUPE_REGISTER_ACTOR(ProcessCounter, Add, Nap, Pid);

}  // namespace transport_test
}  // namespace troupe
