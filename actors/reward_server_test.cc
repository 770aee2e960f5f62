#include "actors/reward_server.h"

#include "gtest/gtest.h"
#include "runtime/actor_system.h"

namespace troupe::actors {
namespace {

proto::Sample MakeSample(int64_t prompt, const std::string& text, const std::string& answer) {
  proto::Sample s;
  s.set_prompt_id(prompt);
  s.set_response_text(text);
  s.set_reference_answer(answer);
  s.set_finish_reason("stop");
  return s;
}

TEST(RewardServer, ScoresEverySampleAndSurvivesAVerifierThatThrows) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  auto rs = system.Spawn<RewardServer>({.config = {{"task", "arithmetic"}, {"format_weight", 0}}});
  ASSERT_TRUE(rs.ok());
  proto::ScoreRequest req;
  proto::SampleGroup* g = req.add_groups();
  g->set_prompt_id(1);
  *g->add_samples() = MakeSample(1, "12", "12");
  *g->add_samples() = MakeSample(1, "13", "12");
  *g->add_samples() = MakeSample(1, "12", "");  // no reference: the verifier throws
  absl::StatusOr<proto::ScoreReply> r = rs->Call(&RewardServer::Score, req).Get();
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->groups(0).samples_size(), 3);
  EXPECT_FLOAT_EQ(r->groups(0).samples(0).reward(), 1);
  EXPECT_FLOAT_EQ(r->groups(0).samples(1).reward(), 0);
  EXPECT_FLOAT_EQ(r->groups(0).samples(2).reward(), 0);
  EXPECT_FALSE(r->groups(0).samples(2).reward_error().empty());
  EXPECT_EQ(r->failures(), 1);
}

TEST(RewardServer, UnknownTaskMakesTheActorDeadWithTheReason) {
  ActorSystem system(ActorSystemOptions{.num_threads = 1});
  auto rs = system.Spawn<RewardServer>({.config = {{"task", "poetry"}}});
  ASSERT_TRUE(rs.ok());
  absl::Status ready = rs->Ready().Get(absl::Seconds(5));
  EXPECT_EQ(ready.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(ready.message().find("poetry"), std::string::npos) << ready;
}

}  // namespace
}  // namespace troupe::actors
