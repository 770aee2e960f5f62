#include "actors/replay_buffer.h"

#include "gtest/gtest.h"
#include "runtime/actor_system.h"

namespace troupe::actors {
namespace {

proto::SampleGroup Group(int64_t prompt, std::vector<int64_t> versions) {
  proto::SampleGroup g;
  g.set_prompt_id(prompt);
  for (size_t i = 0; i < versions.size(); ++i) {
    proto::Sample* s = g.add_samples();
    s->set_prompt_id(prompt);
    s->set_sample_index(static_cast<int32_t>(i));
    s->set_policy_version(versions[i]);
  }
  return g;
}

void ExpectBalanced(const proto::ReplayStats& s) {
  EXPECT_EQ(s.added(), s.used() + s.dropped_stale() + s.buffered())
      << "added " << s.added() << " used " << s.used() << " dropped " << s.dropped_stale()
      << " buffered " << s.buffered();
}

TEST(ReplayBuffer, GroupVersionIsTheOldestTokenVersion) {
  EXPECT_EQ(GroupVersion(Group(1, {3, 2, 5})), 2);
}

TEST(ReplayBuffer, TakesOldestFirstAndDropsWhatIsTooStale) {
  ReplayBufferCore rb;
  ASSERT_TRUE(
      rb.Add({Group(1, {0, 0}), Group(2, {1, 1}), Group(3, {2, 2}), Group(4, {3, 3})}).ok());
  // Trainer at version 3, eta = 1: versions 0 and 1 are too stale (staleness 3 and 2).
  proto::ReplayTakeReply r = rb.Take(/*num_groups=*/1, /*current_version=*/3, /*max_staleness=*/1);
  EXPECT_EQ(r.dropped_stale(), 4);
  ASSERT_EQ(r.groups_size(), 1);
  EXPECT_EQ(r.groups(0).prompt_id(), 3);
  EXPECT_EQ(rb.Ready(3, 1), 1);
  proto::ReplayStats s = rb.Stats();
  EXPECT_EQ(s.used(), 2);
  EXPECT_EQ(s.dropped_stale(), 4);
  EXPECT_EQ(s.buffered(), 2);
  ASSERT_GE(s.staleness_counts_size(), 2);
  EXPECT_EQ(s.staleness_counts(1), 2);  // the taken group was 1 version old
  ExpectBalanced(s);
}

TEST(ReplayBuffer, SynchronousModeTakesOnlyCurrentVersionGroups) {
  ReplayBufferCore rb;
  ASSERT_TRUE(rb.Add({Group(1, {4}), Group(2, {5})}).ok());
  proto::ReplayTakeReply r = rb.Take(8, /*current_version=*/5, /*max_staleness=*/0);
  ASSERT_EQ(r.groups_size(), 1);
  EXPECT_EQ(r.groups(0).prompt_id(), 2);
  EXPECT_EQ(r.dropped_stale(), 1);
  ExpectBalanced(rb.Stats());
}

// Below a prompt id: groups at or above it wait (they count for nothing), whatever their version,
// so a batch is the oldest groups below the driver's frontier however the groups arrived.
TEST(ReplayBuffer, BelowAPromptIdTakesOnlyGroupsUnderItAndWaitsForEnough) {
  ReplayBufferCore rb;
  ASSERT_TRUE(rb.Add({Group(0, {1}), Group(3, {1}), Group(5, {0})}).ok());
  EXPECT_EQ(rb.Ready(1, 2, /*below_prompt_id=*/3), 1);
  proto::ReplayTakeReply r =
      rb.Take(2, /*current_version=*/1, /*max_staleness=*/2, /*min_groups=*/2, /*below=*/3);
  EXPECT_EQ(r.groups_size(), 0);  // only prompt 0 is below 3
  ASSERT_TRUE(rb.Add({Group(1, {1})}).ok());
  r = rb.Take(2, 1, 2, 2, /*below=*/3);
  ASSERT_EQ(r.groups_size(), 2);
  EXPECT_EQ(r.groups(0).prompt_id(), 0);
  EXPECT_EQ(r.groups(1).prompt_id(), 1);         // not 5, though its version is older
  EXPECT_EQ(rb.Take(8, 1, 2).groups_size(), 2);  // no bound: 5 (version 0), then 3
  ExpectBalanced(rb.Stats());
}

TEST(ReplayBuffer, MinGroupsTakesNothingUntilEnoughAreReadyButStillDropsStaleOnes) {
  ReplayBufferCore rb;
  ASSERT_TRUE(rb.Add({Group(1, {0}), Group(2, {5})}).ok());
  proto::ReplayTakeReply r =
      rb.Take(4, /*current_version=*/5, /*max_staleness=*/1, /*min_groups=*/2);
  EXPECT_EQ(r.groups_size(), 0);
  EXPECT_EQ(r.dropped_stale(), 1);  // version 0 is 5 behind
  ASSERT_TRUE(rb.Add({Group(3, {5})}).ok());
  EXPECT_EQ(rb.Take(4, 5, 1, 2).groups_size(), 2);
  ExpectBalanced(rb.Stats());
}

TEST(ReplayBuffer, AGroupArrivingTwiceIsCountedOnce) {
  ReplayBufferCore rb;
  ASSERT_TRUE(rb.Add({Group(7, {0, 0, 0})}).ok());
  absl::StatusOr<proto::ReplayAddReply> again = rb.Add({Group(7, {0, 0, 0})});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->accepted(), 0);
  EXPECT_EQ(again->duplicates(), 3);
  EXPECT_EQ(rb.Stats().added(), 3);
  EXPECT_EQ(rb.Stats().duplicates(), 3);
  ExpectBalanced(rb.Stats());
}

TEST(ReplayBuffer, FullBufferRefusesTheWholeCall) {
  ReplayBufferCore rb(/*capacity_groups=*/2);
  ASSERT_TRUE(rb.Add({Group(1, {0}), Group(2, {0})}).ok());
  absl::StatusOr<proto::ReplayAddReply> r = rb.Add({Group(3, {0})});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(rb.Stats().added(), 2);
  rb.Take(1, 0, 0);
  EXPECT_TRUE(rb.Add({Group(3, {0})}).ok());  // room again
}

TEST(ReplayBuffer, MalformedGroupsAreRefusedNamingThePrompt) {
  ReplayBufferCore rb;
  proto::SampleGroup mixed = Group(5, {0, 0});
  mixed.mutable_samples(1)->set_prompt_id(6);
  absl::StatusOr<proto::ReplayAddReply> r = rb.Add({mixed});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("prompt 5"), std::string::npos);
  proto::SampleGroup empty;
  empty.set_prompt_id(9);
  EXPECT_EQ(rb.Add({empty}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReplayBuffer, AccountingHoldsThroughARandomWorkload) {
  ReplayBufferCore rb;
  int64_t prompt = 0;
  for (int step = 0; step < 200; ++step) {
    std::vector<proto::SampleGroup> batch;
    for (int g = 0; g < 3; ++g) batch.push_back(Group(prompt++, {step / 4, step / 4 + (g % 2)}));
    ASSERT_TRUE(rb.Add(batch).ok());
    rb.Take(2, step / 3, 2);
    ExpectBalanced(rb.Stats());
  }
}

TEST(ReplayBuffer, AnExportedBufferImportedElsewhereContinuesItsAccounting) {
  ReplayBufferCore a;
  ASSERT_TRUE(a.Add({Group(1, {0, 0}), Group(2, {1, 1}), Group(3, {1, 1})}).ok());
  ASSERT_EQ(a.Take(1, 1, 1).groups_size(), 1);
  proto::ReplayState state = a.Export();
  EXPECT_EQ(state.groups_size(), 2);
  EXPECT_EQ(state.seen_prompt_ids_size(), 3);

  ReplayBufferCore b;
  ASSERT_TRUE(b.Import(state).ok());
  // The prompts it had seen stay duplicates; the accounting goes on from the exported counters.
  absl::StatusOr<proto::ReplayAddReply> again = b.Add({Group(1, {2, 2})});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(b.Stats().duplicates(), 2);  // samples
  ASSERT_TRUE(b.Add({Group(4, {2, 2})}).ok());
  proto::ReplayTakeReply r = b.Take(3, 2, 1);
  EXPECT_EQ(r.groups_size(), 3);
  proto::ReplayStats s = b.Stats();
  EXPECT_EQ(s.added(), 8);
  EXPECT_EQ(s.used(), 8);
  ExpectBalanced(s);
}

TEST(ReplayBuffer, ReturnedGroupsAreBufferedAgainAndNoLongerUsed) {
  ReplayBufferCore rb;
  ASSERT_TRUE(rb.Add({Group(1, {0, 0}), Group(2, {1, 1})}).ok());
  proto::ReplayTakeReply r = rb.Take(2, 1, 1);
  ASSERT_EQ(r.groups_size(), 2);
  ASSERT_TRUE(rb.Return({r.groups(1)}, 1).ok());
  proto::ReplayStats s = rb.Stats();
  EXPECT_EQ(s.used(), 2);
  EXPECT_EQ(s.buffered(), 2);
  EXPECT_EQ(s.staleness_counts(0), 0);  // group 2 was taken at staleness 0, then given back
  ExpectBalanced(s);
  EXPECT_EQ(rb.Return({r.groups(1)}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rb.Return({Group(9, {0})}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rb.Take(2, 1, 1).groups(0).prompt_id(), 2);
}

TEST(ReplayBuffer, ImportRefusesAStateThatDoesNotAddUp) {
  ReplayBufferCore a;
  ASSERT_TRUE(a.Add({Group(1, {0, 0})}).ok());
  proto::ReplayState state = a.Export();
  state.mutable_stats()->set_buffered(5);
  ReplayBufferCore b;
  EXPECT_EQ(b.Import(state).code(), absl::StatusCode::kInvalidArgument);
  state = a.Export();
  *state.add_groups() = state.groups(0);
  state.mutable_stats()->set_buffered(4);
  state.mutable_stats()->set_added(4);
  EXPECT_EQ(b.Import(state).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.Stats().added(), 0) << "a refused import changed the buffer";
}

// A restarted buffer lost what its previous instance held: rather than answer from an empty state
// (zero counters a driver would take for the run's), it refuses every call but Import.
TEST(ReplayBuffer, ARestartedBufferServesNothingUntilImported) {
  ActorSystem system({.num_threads = 2});
  absl::StatusOr<ActorHandle<ReplayBuffer>> rb =
      system.Spawn<ReplayBuffer>({.name = "replay", .max_restarts = 1});
  ASSERT_TRUE(rb.ok()) << rb.status();
  proto::ReplayAddRequest add;
  *add.add_groups() = Group(1, {0, 0});
  ASSERT_TRUE(rb->Call(&ReplayBuffer::Add, add).Get().ok());  // the first instance serves
  absl::StatusOr<proto::ReplayState> state = rb->Call(&ReplayBuffer::Export, proto::Empty()).Get();
  ASSERT_TRUE(state.ok()) << state.status();

  ASSERT_TRUE(system.Kill(*rb, /*no_restart=*/false).ok());
  absl::StatusOr<proto::ReplayStats> stats = rb->Call(&ReplayBuffer::Stats, proto::Empty()).Get();
  EXPECT_EQ(stats.status().code(), absl::StatusCode::kDataLoss) << stats.status();
  EXPECT_NE(stats.status().message().find("restarted"), std::string::npos) << stats.status();
  EXPECT_EQ(rb->Call(&ReplayBuffer::Add, add).Get().status().code(), absl::StatusCode::kDataLoss);
  proto::ReplayTakeRequest take;
  take.set_num_groups(1);
  EXPECT_EQ(rb->Call(&ReplayBuffer::Take, take).Get().status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(rb->Call(&ReplayBuffer::Export, proto::Empty()).Get().status().code(),
            absl::StatusCode::kDataLoss);

  ASSERT_TRUE(rb->Call(&ReplayBuffer::Import, *state).Get().ok());
  stats = rb->Call(&ReplayBuffer::Stats, proto::Empty()).Get();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->buffered(), 2);
  system.Shutdown();
}

}  // namespace
}  // namespace troupe::actors
