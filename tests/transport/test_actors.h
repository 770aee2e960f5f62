// Actor types shared by the multi-process transport tests: the worker hosts them, the test
// binary needs them registered to make typed calls (see runtime/transport/transport_client.h).
#ifndef TROUPE_TESTS_TRANSPORT_TEST_ACTORS_H_
#define TROUPE_TESTS_TRANSPORT_TEST_ACTORS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/actor.h"
#include "runtime/testing/test_messages.pb.h"

namespace troupe {
namespace transport_test {

// A counter that also reports which process hosts it.
class ProcessCounter : public Actor {
 public:
  // Adds n.value() to the total; replies with the new total.
  absl::StatusOr<testing::Num> Add(const testing::Num& n);
  // Sleeps for s.millis() milliseconds.
  absl::StatusOr<testing::Empty> Nap(const testing::Sleep& s);
  // Replies with the hosting process's pid.
  absl::StatusOr<testing::Num> Pid(const testing::Empty&);

 private:
  int64_t total_ = 0;
};

}  // namespace transport_test
}  // namespace troupe

#endif  // TROUPE_TESTS_TRANSPORT_TEST_ACTORS_H_
