#include "recipes/grpo/grpo_config.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::recipes {
namespace {

using ::testing::HasSubstr;

constexpr char kBase[] = R"(name: g
model: {config: examples/models/tiny.json}
data: {task: arithmetic}
trainer: {total_steps: 2}
)";

absl::StatusOr<JobSpec> Parse(const std::string& extra) {
  return ParseJobSpec(std::string(kBase) + extra, "job.yaml");
}

TEST(GrpoSpec, TheDefaultsAreHonoured) {
  absl::StatusOr<JobSpec> spec = Parse("");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
}

TEST(GrpoSpec, TheExampleJobIsHonoured) {
  absl::StatusOr<JobSpec> spec = LoadJobSpec("examples/grpo_arith.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
}

TEST(GrpoSpec, RefusesWhatItCannotRunWithTheKeysLocation) {
  absl::StatusOr<JobSpec> spec = Parse(R"(algorithm: {adv_estimator: gae, gamma: 0.99}
actors:
  critic: {replicas: 1}
  trainer: {replicas: 2}
  reward: {type: MyReward}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::Status s = CheckGrpoSpec(*spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::string m(s.message());
  EXPECT_THAT(m, HasSubstr("job.yaml:5:28: algorithm.adv_estimator: gae is not supported by "
                           "recipe grpo (supported: grpo)"));
  EXPECT_THAT(m, HasSubstr("algorithm.gamma: recipe grpo has no GAE"));
  EXPECT_THAT(m, HasSubstr("actors.critic.replicas: recipe grpo has no critic"));
  EXPECT_THAT(m, HasSubstr("actors.trainer.replicas: recipe grpo trains on one trainer"));
  EXPECT_THAT(m, HasSubstr("job.yaml:9:18: actors.reward.type: MyReward is not a registered "
                           "actor type (registered: Checkpointer, "));
  EXPECT_THAT(m, HasSubstr("a type from a shared library needs actors.reward.library"));
}

TEST(GrpoSpec, RefusesReferenceReplicasWithoutAKlTerm) {
  absl::StatusOr<JobSpec> spec =
      Parse("algorithm: {kl: {coef: 0}}\nactors:\n  reference: {replicas: 2}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*spec).message()),
              HasSubstr("actors.reference.replicas: algorithm.kl.coef is 0, so recipe grpo runs "
                        "no reference"));
  spec = Parse("actors:\n  reference: {replicas: 2}\n");  // with the base's KL term
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
}

TEST(GrpoSpec, RefusesAnActorTypeThatDoesNotServeItsRole) {
  absl::StatusOr<JobSpec> spec = Parse("actors:\n  reward: {type: Reference}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*spec).message()),
              HasSubstr("job.yaml:6:18: actors.reward.type: Reference does not serve the methods "
                        "of RewardServer: no method Score(troupe.proto.ScoreRequest) -> "
                        "troupe.proto.ScoreReply"));
}

TEST(GrpoSpec, RefusesALibraryThatDoesNotLoad) {
  absl::StatusOr<JobSpec> spec = Parse("actors:\n  reward: {library: no/such/libreward.so}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string m(CheckGrpoSpec(*spec).message());
  EXPECT_THAT(m, HasSubstr("job.yaml:6:21: actors.reward.library: actor library "
                           "no/such/libreward.so: file not found"));
  EXPECT_EQ(m.find("file not found", m.find("file not found") + 1), std::string::npos) << m;
}

TEST(GrpoSpec, RefusesAnotherTokenizerButRunsARandomInit) {
  absl::StatusOr<JobSpec> spec = Parse("");
  ASSERT_TRUE(spec.ok());
  spec->model.init = ModelInit::kRandom;
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
  spec->model.tokenizer = "tok.json";
  const std::string m(CheckGrpoSpec(*spec).message());
  EXPECT_THAT(m, HasSubstr("model.tokenizer: recipe grpo uses the initial policy's tokenizer"));
}

TEST(GrpoSpec, GenerationRequestsAreSeededByTheFirstPrompt) {
  absl::StatusOr<JobSpec> spec = Parse("algorithm: {n: 3}\n");
  ASSERT_TRUE(spec.ok());
  proto::Prompt a, b;
  a.set_prompt_id(5);
  b.set_prompt_id(6);
  proto::GenerateRequest r1 = GrpoGenerateRequest(*spec, {a, b}, 4);
  proto::GenerateRequest r2 = GrpoGenerateRequest(*spec, {a}, 4);
  proto::GenerateRequest r3 = GrpoGenerateRequest(*spec, {b}, 4);
  EXPECT_EQ(r1.n(), 3);
  EXPECT_EQ(r1.min_weight_version(), 4);
  EXPECT_EQ(r1.prompts_size(), 2);
  EXPECT_EQ(r1.seed(), r2.seed());
  EXPECT_NE(r1.seed(), r3.seed());
}

}  // namespace
}  // namespace troupe::recipes
