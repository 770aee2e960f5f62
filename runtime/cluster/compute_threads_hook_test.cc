#include "runtime/cluster/compute_threads_hook.h"

#include "gtest/gtest.h"

namespace troupe {
namespace {

int last_threads = 0;
void RecordFirst(int threads) { last_threads = threads; }
void RecordSecond(int threads) { last_threads = -threads; }

TEST(ComputeThreadsHook, NoneUntilRegisteredThenTheLatestRegistration) {
  // This test links no application, so nothing registered a setter.
  EXPECT_EQ(RegisteredComputeThreadsSetter(), nullptr);
  RegisterComputeThreadsSetter(&RecordFirst);
  ASSERT_NE(RegisteredComputeThreadsSetter(), nullptr);
  RegisteredComputeThreadsSetter()(3);
  EXPECT_EQ(last_threads, 3);
  RegisterComputeThreadsSetter(&RecordSecond);
  RegisteredComputeThreadsSetter()(2);
  EXPECT_EQ(last_threads, -2);
}

}  // namespace
}  // namespace troupe
