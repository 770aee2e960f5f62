#include "recipes/rl/replay_buffer_client.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/actor_system.h"

namespace troupe::recipes {
namespace {

proto::SampleGroup Group(int64_t prompt, int64_t version) {
  proto::SampleGroup g;
  g.set_prompt_id(prompt);
  for (int i = 0; i < 2; ++i) {
    proto::Sample* s = g.add_samples();
    s->set_prompt_id(prompt);
    s->set_sample_index(i);
    s->set_policy_version(version);
    s->add_response_tokens(3);
  }
  return g;
}

proto::ReplayAddRequest Add(std::vector<proto::SampleGroup> groups) {
  proto::ReplayAddRequest r;
  for (proto::SampleGroup& g : groups) *r.add_groups() = std::move(g);
  return r;
}

proto::ReplayTakeRequest Take(int groups, int64_t version) {
  proto::ReplayTakeRequest r;
  r.set_num_groups(groups);
  r.set_current_version(version);
  r.set_max_staleness(1);
  return r;
}

RetryOptions FastRetry() {
  return {.max_attempts = 3,
          .initial_backoff = absl::Milliseconds(1),
          .max_backoff = absl::Milliseconds(5),
          .call_timeout = absl::Seconds(10)};
}

class ReplayBufferClientTest : public ::testing::Test {
 protected:
  void TearDown() override { system_.Shutdown(); }
  ActorSystem system_{{.num_threads = 2}};
};

// Killed between calls, the buffer restarts empty: the next call finds the restarted instance,
// which refuses to serve until restored; the client restores the accounting and hands back the
// prompts of the groups that were waiting, which are then accepted again.
TEST_F(ReplayBufferClientTest, ARestartedBufferGetsItsAccountingBackAndTheLostPromptsAreFreed) {
  absl::StatusOr<ActorHandle<actors::ReplayBuffer>> buffer =
      system_.Spawn<actors::ReplayBuffer>({.name = "replay", .max_restarts = 2});
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::vector<std::string> log;
  ReplayBufferClient client(
      *buffer, FastRetry(), [] { return absl::OkStatus(); },
      [&log](const std::string& line) { log.push_back(line); });
  ASSERT_TRUE(client.Add(Add({Group(0, 0), Group(1, 0), Group(2, 0)})).ok());
  absl::StatusOr<proto::ReplayTakeReply> took = client.Take(Take(1, 0));
  ASSERT_TRUE(took.ok()) << took.status();
  ASSERT_EQ(took->groups(0).prompt_id(), 0);

  ASSERT_TRUE(system_.Kill(*buffer, /*no_restart=*/false).ok());
  absl::StatusOr<proto::ReplayStats> stats = client.Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->added(), 2);  // prompt 0's two samples, used; the waiting four are gone
  EXPECT_EQ(stats->used(), 2);
  EXPECT_EQ(stats->buffered(), 0);
  EXPECT_EQ(client.restores(), 1);
  ReplayBufferClient::Lost lost = client.TakeLost();
  EXPECT_EQ(lost.prompt_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(lost.samples, 4);
  EXPECT_TRUE(client.TakeLost().prompt_ids.empty()) << "handed out once";
  ASSERT_FALSE(log.empty());
  EXPECT_NE(log.back().find("2 groups (4 samples)"), std::string::npos) << log.back();

  // Regenerated, they are accepted; prompt 0 (used before the kill) is still a duplicate.
  absl::StatusOr<proto::ReplayAddReply> again =
      client.Add(Add({Group(1, 1), Group(2, 1), Group(0, 1)}));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->accepted(), 4);
  EXPECT_EQ(again->duplicates(), 2);
  took = client.Take(Take(2, 1));
  ASSERT_TRUE(took.ok()) << took.status();
  EXPECT_EQ(took->groups_size(), 2);
  stats = client.Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->added(), stats->used() + stats->dropped_stale() + stats->buffered());
  EXPECT_EQ(stats->used(), 6);
}

// With no restart left, the client gives up after its attempts with the buffer's error.
TEST_F(ReplayBufferClientTest, ABufferThatStaysDeadFailsTheCallAfterTheAttempts) {
  absl::StatusOr<ActorHandle<actors::ReplayBuffer>> buffer =
      system_.Spawn<actors::ReplayBuffer>({.name = "mortal"});
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  int waits = 0;
  ReplayBufferClient client(
      *buffer, FastRetry(),
      [&waits] {
        ++waits;
        return absl::OkStatus();
      },
      nullptr);
  ASSERT_TRUE(client.Add(Add({Group(0, 0)})).ok());
  ASSERT_TRUE(system_.Kill(*buffer).ok());
  absl::StatusOr<proto::ReplayStats> stats = client.Stats();
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kUnavailable) << stats.status();
  EXPECT_NE(stats.status().message().find("failed 3 times"), std::string::npos) << stats.status();
  EXPECT_EQ(waits, 2);
  EXPECT_EQ(client.restores(), 0);
}

}  // namespace
}  // namespace troupe::recipes
