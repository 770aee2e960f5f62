#include "recipes/rl/replay_ledger.h"

#include <algorithm>
#include <random>

#include "gtest/gtest.h"

namespace troupe::recipes {
namespace {

proto::SampleGroup Group(int64_t prompt, int64_t version, int samples = 2) {
  proto::SampleGroup g;
  g.set_prompt_id(prompt);
  for (int i = 0; i < samples; ++i) {
    proto::Sample* s = g.add_samples();
    s->set_prompt_id(prompt);
    s->set_sample_index(i);
    s->set_policy_version(version);
    s->add_response_tokens(7);  // a payload the ledger does not keep
  }
  return g;
}

proto::ReplayTakeRequest TakeRequest(int groups, int64_t version, int64_t eta) {
  proto::ReplayTakeRequest r;
  r.set_num_groups(groups);
  r.set_min_groups(groups);
  r.set_current_version(version);
  r.set_max_staleness(eta);
  return r;
}

// The buffer (a ReplayBufferCore standing for the actor) and the ledger, fed the same calls.
struct Pair {
  actors::ReplayBufferCore buffer;
  ReplayLedger ledger;

  void Add(std::vector<proto::SampleGroup> groups) {
    absl::StatusOr<proto::ReplayAddReply> r = buffer.Add(groups);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(ledger.Added(groups, *r).ok());
  }
  proto::ReplayTakeReply Take(int groups, int64_t version, int64_t eta) {
    const proto::ReplayTakeRequest req = TakeRequest(groups, version, eta);
    proto::ReplayTakeReply r = buffer.Take(groups, version, eta, groups);
    EXPECT_TRUE(ledger.Took(req, r).ok());
    return r;
  }
};

void ExpectBalanced(const proto::ReplayStats& s) {
  EXPECT_EQ(s.added(), s.used() + s.dropped_stale() + s.buffered())
      << "added " << s.added() << " used " << s.used() << " dropped " << s.dropped_stale()
      << " buffered " << s.buffered();
}

TEST(ReplayLedger, KeepsTheBuffersCountersThroughARandomWorkload) {
  Pair p;
  std::mt19937 rng(5);
  int64_t next_prompt = 0, version = 0;
  for (int round = 0; round < 300; ++round) {
    switch (rng() % 4) {
      case 0:
      case 1: {
        std::vector<proto::SampleGroup> gs;
        for (int i = 0, n = 1 + rng() % 3; i < n; ++i) {
          gs.push_back(Group(next_prompt++, version - static_cast<int64_t>(rng() % 3), 2));
        }
        if (rng() % 5 == 0) gs.push_back(Group(std::max<int64_t>(0, next_prompt - 7), 0));
        p.Add(std::move(gs));
        break;
      }
      case 2: {
        proto::ReplayTakeReply taken = p.Take(1 + rng() % 2, version, 1);
        if (taken.groups_size() > 0 && rng() % 3 == 0) {  // given back, as a checkpoint does
          proto::ReplayReturnRequest back;
          *back.mutable_groups() = taken.groups();
          back.set_taken_at_version(version);
          ASSERT_TRUE(
              p.buffer
                  .Return({taken.groups().begin(), taken.groups().end()}, back.taken_at_version())
                  .ok());
          ASSERT_TRUE(p.ledger.Returned(back).ok());
        }
        break;
      }
      default:
        ++version;
    }
    const proto::ReplayStats want = p.buffer.Stats(), got = p.ledger.Stats();
    ASSERT_EQ(got.SerializeAsString(), want.SerializeAsString()) << "round " << round;
  }
}

// The buffer dies holding groups: its replacement, given LoseBuffered's state, has every counter
// but the lost samples, takes the lost prompts again, and still refuses prompts it already used.
TEST(ReplayLedger, ABufferLostWithGroupsIsReplacedWithItsAccountingAndTheirPromptsFreed) {
  Pair p;
  p.Add({Group(0, 0), Group(1, 0), Group(2, 0, 3)});
  ASSERT_EQ(p.Take(1, 0, 0).groups(0).prompt_id(), 0);  // prompt 0 used
  p.Add({Group(3, 0)});
  // Waiting when the buffer dies: prompts 1, 2 (3 samples) and 3.
  const proto::ReplayStats before = p.buffer.Stats();
  ASSERT_EQ(before.buffered(), 2 + 3 + 2);

  ReplayLedger::Loss loss = p.ledger.LoseBuffered();
  EXPECT_EQ(loss.prompt_ids, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(loss.samples, 7);
  EXPECT_EQ(loss.restore.groups_size(), 0);
  EXPECT_EQ(loss.restore.stats().added(), before.added() - 7);
  EXPECT_EQ(loss.restore.stats().used(), before.used());
  EXPECT_EQ(loss.restore.stats().buffered(), 0);

  actors::ReplayBufferCore replacement;
  ASSERT_TRUE(replacement.Import(loss.restore).ok());
  ExpectBalanced(replacement.Stats());
  // The lost prompts arrive again (regenerated) and are accepted; the used one is a duplicate.
  std::vector<proto::SampleGroup> again = {Group(1, 1), Group(2, 1, 3), Group(3, 1), Group(0, 1)};
  absl::StatusOr<proto::ReplayAddReply> r = replacement.Add(again);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->accepted(), 7);
  EXPECT_EQ(r->duplicates(), 2);
  // The ledger follows the replacement from there on.
  EXPECT_TRUE(p.ledger.Added(again, *r).ok());
  EXPECT_EQ(p.ledger.Stats().SerializeAsString(), replacement.Stats().SerializeAsString());
  // Nothing more is lost by a second call (the replacement held nothing yet when it died).
  ReplayLedger fresh;
  EXPECT_TRUE(fresh.Imported(loss.restore).ok());
  EXPECT_TRUE(fresh.LoseBuffered().prompt_ids.empty());
}

// A Take bounded by prompt id (the determinism of an asynchronous run: a batch holds only prompts
// below the step's bound) is recorded with the same bound, so both skip the same groups.
TEST(ReplayLedger, FollowsATakeBoundedByPromptId) {
  Pair p;
  p.Add({Group(5, 0), Group(1, 0), Group(2, 0)});
  proto::ReplayTakeRequest req = TakeRequest(3, 0, 0);
  req.set_min_groups(1);
  req.set_below_prompt_id(3);
  const proto::ReplayTakeReply r = p.buffer.Take(3, 0, 0, 1, 3);
  ASSERT_EQ(r.groups_size(), 2);  // prompts 1 and 2; 5 waits
  EXPECT_EQ(r.groups(0).prompt_id(), 1);
  EXPECT_EQ(r.groups(1).prompt_id(), 2);
  ASSERT_TRUE(p.ledger.Took(req, r).ok());
  EXPECT_EQ(p.ledger.Stats().SerializeAsString(), p.buffer.Stats().SerializeAsString());
  // Recorded without the bound, the record would have given prompt 5 too: a disagreement.
  Pair q;
  q.Add({Group(5, 0), Group(1, 0), Group(2, 0)});
  const proto::ReplayTakeReply bounded = q.buffer.Take(3, 0, 0, 1, 3);
  proto::ReplayTakeRequest unbounded = TakeRequest(3, 0, 0);
  unbounded.set_min_groups(1);
  EXPECT_EQ(q.ledger.Took(unbounded, bounded).code(), absl::StatusCode::kInternal);
}

TEST(ReplayLedger, SaysSoWhenTheBufferAnswersOtherwiseThanItsRecord) {
  Pair p;
  p.Add({Group(0, 0), Group(1, 0)});
  proto::ReplayAddReply wrong;
  wrong.set_accepted(2);  // the buffer says it took prompt 0 again: the record says duplicate
  absl::Status s = p.ledger.Added({Group(0, 0)}, wrong);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  ReplayLedger other;
  ASSERT_TRUE(other
                  .Added({Group(0, 0), Group(1, 0)},
                         *actors::ReplayBufferCore().Add({Group(0, 0), Group(1, 0)}))
                  .ok());
  proto::ReplayTakeReply took;
  *took.add_groups() = Group(1, 0);  // the record's oldest is prompt 0
  s = other.Took(TakeRequest(1, 0, 0), took);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_NE(s.message().find("disagree"), absl::string_view::npos) << s;
}

}  // namespace
}  // namespace troupe::recipes
