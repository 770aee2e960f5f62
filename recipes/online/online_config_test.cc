#include "recipes/online/online_config.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/testing/temp_dir.h"
#include "base/trace/span_recorder.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "models/model_config.h"
#include "models/transformer.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_recipes.h"
#include "recipes/job_spec/job_tasks.h"
#include "recipes/online/online_rules.h"
#include "reward/reward_function.h"
#include "runtime/actor.h"
#include "tasks/task.h"

namespace troupe::recipes {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// This binary's temporary directory (removed when it exits).
const std::string& Tmp() {
  static const test::TempDir dir("online_config_test");
  return dir.path();
}

// The recipes' rules (the recipes themselves are not linked into this test: CheckKeysRead is the
// part of CheckRecipe their rules decide, Check*Spec the rest).
const bool kOnlineRulesRegistered [[maybe_unused]] = RegisterJobRecipe(GrpoRules()).ok() &&
                                                     RegisterJobRecipe(PpoRules()).ok() &&
                                                     RegisterJobRecipe(DpoRules()).ok();

constexpr char kBase[] = R"(name: g
model: {config: examples/models/tiny.json}
data: {task: arithmetic}
trainer: {total_steps: 2}
)";

absl::StatusOr<JobSpec> Parse(const std::string& extra) {
  return ParseJobSpec(std::string(kBase) + extra, "job.yaml");
}

TEST(OnlineSpec, TheDefaultsAreHonoured) {
  absl::StatusOr<JobSpec> spec = Parse("");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
}

// What the recipe hands its actors for a spec: the trainer's and a rollout worker's config, and
// a generation request's sampling settings, as one JSON object.
nlohmann::json ActorSettings(const JobSpec& spec) {
  const proto::GenerateRequest req = OnlineGenerateRequest(spec, {proto::Prompt()}, 0);
  return {{"trainer", ConfigJson(OnlineTrainerConfig(spec, "model", "", "ckpt"))},
          {"rollout", ConfigJson(OnlineRolloutConfig(spec, "model"))},
          {"generate",
           {{"n", req.n()},
            {"temperature", req.temperature()},
            {"top_p", req.top_p()},
            {"top_k", req.top_k()},
            {"max_new_tokens", req.max_new_tokens()},
            {"seed", req.seed()}}}};
}

// Every spec key the GRPO recipe passes to its actors changes what they are given: the setting
// takes the key's value (not the default's).
TEST(OnlineSpec, EveryKeyItHandsToItsActorsChangesWhatTheyGet) {
  struct Row {
    std::vector<std::string> overrides;
    std::string where;  // "/trainer/lr"
    nlohmann::json expected;
  };
  const std::vector<Row> rows = {
      {{"trainer.lr=0.002"}, "/trainer/lr", 0.002},
      {{"trainer.warmup_steps=1"}, "/trainer/warmup_steps", "1"},
      {{"trainer.total_steps=7"}, "/trainer/total_steps", "7"},
      {{"trainer.lr_schedule=cosine"}, "/trainer/lr_schedule", "LR_SCHEDULE_COSINE"},
      {{"trainer.lr_schedule=cosine", "trainer.min_lr_ratio=0.3"}, "/trainer/min_lr_ratio", 0.3},
      {{"trainer.weight_decay=0.05"}, "/trainer/weight_decay", 0.05},
      {{"trainer.grad_clip=0.5"}, "/trainer/grad_clip", 0.5},
      {{"trainer.seed=9"}, "/trainer/seed", "9"},
      {{"trainer.micro_batch_size=4"}, "/trainer/micro_batch_size", "4"},
      {{"algorithm.clip_eps=0.3"}, "/trainer/clip_eps_low", 0.3},
      {{"algorithm.clip_eps=0.3"}, "/trainer/clip_eps_high", 0.3},
      {{"algorithm.clip_eps_low=0.1"}, "/trainer/clip_eps_low", 0.1},
      {{"algorithm.clip_eps_high=0.28"}, "/trainer/clip_eps_high", 0.28},
      {{"algorithm.kl.coef=0.05"}, "/trainer/kl_coef", 0.05},
      {{"algorithm.kl.type=k1"}, "/trainer/kl_type", "KL_K1"},
      {{"algorithm.entropy_coeff=0.01"}, "/trainer/entropy_coeff", 0.01},
      {{"algorithm.loss_agg_mode=seq-mean-token-mean"},
       "/trainer/loss_agg_mode",
       "LOSS_AGG_SEQ_MEAN_TOKEN_MEAN"},
      {{"algorithm.norm_adv_by_std=false"}, "/trainer/norm_adv_by_std", false},
      {{"algorithm.off_policy.correction=mask"}, "/trainer/off_policy", "OFF_POLICY_MASK"},
      {{"algorithm.off_policy.cap=3"}, "/trainer/importance_cap", 3.0},
      {{"data.max_response_length=64"}, "/trainer/max_response_length", "64"},
      {{"data.max_response_length=64"}, "/rollout/max_seq_len", 512 + 64 + 2},
      {{"data.max_prompt_length=16"}, "/rollout/max_seq_len", 16 + 512 + 2},
      {{"data.train_batch_size=64"}, "/rollout/num_slots", 64 * 8},
      {{"actors.rollout.replicas=2"}, "/rollout/num_slots", 1024 * 8 / 2},
      {{"async.max_staleness=1", "data.gen_batch_size=3072"}, "/rollout/num_slots", 3072 * 8},
      {{"async.max_staleness=3"}, "/rollout/weight_versions_kept", 4},
      {{"algorithm.n=4"}, "/generate/n", 4},
      {{"rollout.temperature=0.5"}, "/generate/temperature", 0.5},
      {{"rollout.top_p=0.75"}, "/generate/top_p", 0.75},
      {{"rollout.top_k=5"}, "/generate/top_k", 5},
      {{"rollout.max_new_tokens=7"}, "/generate/max_new_tokens", 7},
      {{"trainer.profile_steps=[1, 2]"}, "/trainer/profile_from", "1"},
      {{"trainer.profile_steps=[1, 2]"}, "/trainer/profile_to", "2"},
      {{"trainer.activation_checkpointing=true"}, "/trainer/activation_checkpointing", true},
  };
  absl::StatusOr<JobSpec> defaults = Parse("");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  const nlohmann::json base = ActorSettings(*defaults);
  for (const Row& row : rows) {
    const std::string what = absl::StrJoin(row.overrides, " ");
    absl::StatusOr<JobSpec> spec = ParseJobSpec(kBase, "job.yaml", row.overrides);
    ASSERT_TRUE(spec.ok()) << what << ": " << spec.status();
    ASSERT_TRUE(CheckGrpoSpec(*spec).ok()) << what << ": " << CheckGrpoSpec(*spec);
    const nlohmann::json got = ActorSettings(*spec);
    const nlohmann::json::json_pointer at(row.where);
    EXPECT_NE(got.at(at), base.at(at)) << what << " did not change " << row.where;
    if (row.expected.is_number_float()) {
      EXPECT_NEAR(got.at(at).get<double>(), row.expected.get<double>(), 1e-6) << what;
    } else {
      EXPECT_EQ(got.at(at), row.expected) << what;
    }
  }
  // The seed of generation requests follows trainer.seed.
  absl::StatusOr<JobSpec> seeded = ParseJobSpec(kBase, "job.yaml", {"trainer.seed=9"});
  ASSERT_TRUE(seeded.ok());
  EXPECT_NE(ActorSettings(*seeded)["generate"]["seed"], base["generate"]["seed"]);
}

// The recipe decides every field of the trainer's and rollout workers' configs (no actor-side
// default applies unseen), and a spec's defaults are the actor's (proto/actor_config.proto).
TEST(OnlineSpec, ActorConfigsAreWholeAndShareTheActorsDefaults) {
  absl::StatusOr<JobSpec> spec = Parse("");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const proto::TrainerConfig trainer = OnlineTrainerConfig(*spec, "model", "", "ckpt");
  const proto::RolloutWorkerConfig rollout = OnlineRolloutConfig(*spec, "model");
  for (const google::protobuf::Message* m :
       std::vector<const google::protobuf::Message*>{&trainer, &rollout}) {
    const google::protobuf::Descriptor* d = m->GetDescriptor();
    for (int i = 0; i < d->field_count(); ++i) {
      if (d->field(i)->name() == "checkpoint_attempts") continue;  // the actor's own retry bound
      EXPECT_TRUE(m->GetReflection()->HasField(*m, d->field(i)))
          << d->name() << "." << d->field(i)->name() << " is left to the actor's default";
    }
  }
  // Every value the trainer gets from an unwritten key is the trainer's own default, except
  // those the spec resolves from other keys (max_response_length: data's 512 is the default too).
  proto::TrainerConfig expected = proto::TrainerConfig::default_instance();
  expected.set_model_dir("model");
  expected.set_resume_dir("");
  expected.set_checkpointer("ckpt");
  expected.set_total_steps(2);  // kBase's
  proto::TrainerConfig got = trainer;
  got.clear_checkpoint_attempts();
  for (const auto* f :
       {"lr", "lr_schedule", "warmup_steps", "min_lr_ratio", "weight_decay", "grad_clip", "seed",
        "micro_batch_size", "clip_eps_low", "clip_eps_high", "kl_coef", "kl_type", "entropy_coeff",
        "loss_agg_mode", "max_response_length", "norm_adv_by_std", "off_policy", "importance_cap",
        "activation_checkpointing"}) {
    const google::protobuf::FieldDescriptor* field =
        proto::TrainerConfig::descriptor()->FindFieldByName(f);
    ASSERT_NE(field, nullptr) << f;
    std::string a, b;
    google::protobuf::TextFormat::PrintFieldValueToString(got, field, -1, &a);
    google::protobuf::TextFormat::PrintFieldValueToString(expected, field, -1, &b);
    EXPECT_EQ(a, b) << "trainer." << f << ": the spec's default differs from the actor's";
  }
  EXPECT_EQ(spec->actors.checkpointer.keep, proto::CheckpointerConfig::default_instance().keep());
}

TEST(OnlineSpec, TheExampleJobIsHonoured) {
  absl::StatusOr<JobSpec> spec = LoadJobSpec("examples/grpo_arith.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
}

// The demo job with DAPO's options: clip-higher, dynamic sampling without a limit, the entropy
// bonus and no KL reach the trainer and the driver, and no reference is reserved.
TEST(OnlineSpec, TheDapoExampleJobIsHonoured) {
  absl::StatusOr<JobSpec> spec = LoadJobSpec("examples/grpo_arith_dapo.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
  EXPECT_TRUE(spec->algorithm.filter_groups.enable);
  EXPECT_EQ(spec->algorithm.filter_groups.max_num_gen_batches, 0);
  EXPECT_EQ(spec->actors.reference.replicas, 0);
  EXPECT_EQ(spec->sft.dir, "runs/grpo-arith/sft");  // the demo's SFT start
  // Generation rounds of twice the batch: each of the 2 workers gets 32 prompts a call.
  EXPECT_EQ(spec->data.gen_batch_size, 2 * spec->data.train_batch_size);
  EXPECT_EQ(OnlineRolloutConfig(*spec, "model").num_slots(), 64 * 8 / 2);
  const proto::TrainerConfig c = OnlineTrainerConfig(*spec, "model", "", "checkpointer");
  EXPECT_EQ(c.clip_eps_low(), 0.2);
  EXPECT_EQ(c.clip_eps_high(), 0.28);
  EXPECT_EQ(c.entropy_coeff(), spec->algorithm.entropy_coeff);
  EXPECT_GT(c.entropy_coeff(), 0);
  EXPECT_EQ(c.kl_coef(), 0);
  EXPECT_EQ(c.lr(), 5e-4);
}

// The group recipes' estimators and GSPO reach the trainer; gamma only where it is read.
TEST(OnlineSpec, EstimatorsPolicyLossAndGammaReachTheTrainer) {
  absl::StatusOr<JobSpec> spec =
      Parse("algorithm: {adv_estimator: reinforce_plus_plus, gamma: 0.9, policy_loss: gspo}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
  const proto::TrainerConfig c = OnlineTrainerConfig(*spec, "model", "", "checkpointer");
  EXPECT_EQ(c.adv_estimator(), proto::ADV_ESTIMATOR_REINFORCE_PLUS_PLUS);
  EXPECT_EQ(c.gamma(), 0.9);
  EXPECT_EQ(c.policy_loss(), proto::POLICY_LOSS_GSPO);

  absl::StatusOr<JobSpec> rloo = Parse("algorithm: {adv_estimator: rloo, gamma: 0.9}\n");
  ASSERT_TRUE(rloo.ok()) << rloo.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*rloo).message()),
              AllOf(HasSubstr("job.yaml:5:41: algorithm.gamma: is read by adv_estimator gae"),
                    HasSubstr("reinforce_plus_plus"), HasSubstr("; rloo does not use it")));
  // rloo needs a group, as grpo does.
  absl::StatusOr<JobSpec> single = Parse("algorithm: {adv_estimator: rloo, n: 1}\n");
  EXPECT_THAT(std::string(single.status().message()),
              HasSubstr("algorithm.n: adv_estimator rloo needs at least 2 responses per prompt"));
}

TEST(OnlineSpec, RefusesWhatItCannotRunWithTheKeysLocation) {
  absl::StatusOr<JobSpec> spec = Parse(R"(algorithm: {adv_estimator: gae, gamma: 0.99}
actors:
  critic: {replicas: 1}
  reward: {type: MyReward}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::Status s = CheckGrpoSpec(*spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::string m(s.message());
  // (The estimators are the registry's, sorted: trainers/algorithm_check.h; a new one joins the
  // list.)
  EXPECT_THAT(m, HasSubstr("job.yaml:5:28: algorithm.adv_estimator: gae is not supported by "
                           "recipe grpo, which has no critic (supported: grpo, "
                           "reinforce_plus_plus, reinforce_plus_plus_baseline, rloo"));
  EXPECT_THAT(m, HasSubstr("; recipe ppo runs gae)"));
  EXPECT_THAT(m, HasSubstr("actors.critic.replicas: recipe grpo has no critic"));
  EXPECT_THAT(m, HasSubstr("job.yaml:8:18: actors.reward.type: MyReward is not a registered "
                           "actor type (registered: Checkpointer, "));
  EXPECT_THAT(m, HasSubstr("a type from a shared library needs actors.reward.library"));
}

// Recipe ppo: gae with one critic (a registered type serving the Critic's methods, its config a
// CriticConfig); what it hands the critic and the trainer.
// The trainer's ranks reach its config; a group with more ranks than a mini-batch has sequences
// (pairs for dpo) is refused at actors.trainer.replicas.
TEST(OnlineSpec, TrainerRanksReachTheTrainerAndEachNeedsAShareOfEveryMiniBatch) {
  const auto parse = [](std::vector<std::string> overrides) {
    absl::StatusOr<JobSpec> spec = ParseJobSpec(kBase, "job.yaml", overrides);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return *std::move(spec);
  };
  const JobSpec two =
      parse({"data.train_batch_size=2", "algorithm.n=2", "actors.trainer.replicas=4"});
  EXPECT_TRUE(CheckGrpoSpec(two).ok()) << CheckGrpoSpec(two);
  EXPECT_EQ(OnlineTrainerConfig(two, "m", "", "c").data_parallel_size(), 4);
  const JobSpec many =
      parse({"data.train_batch_size=2", "algorithm.n=2", "actors.trainer.replicas=5"});
  EXPECT_THAT(std::string(CheckGrpoSpec(many).message()),
              HasSubstr("actors.trainer.replicas: 5 trainer ranks, but a mini-batch has only 4 "
                        "sequences"));
  const JobSpec mini = parse({"data.train_batch_size=4", "algorithm.n=2",
                              "trainer.mini_batch_size=1", "actors.trainer.replicas=3"});
  EXPECT_THAT(std::string(CheckGrpoSpec(mini).message()),
              HasSubstr("3 trainer ranks, but a mini-batch has only 2 sequences"));
  // A sharded optimizer needs ranks to shard over; it reaches the trainer.
  const JobSpec alone = parse({"trainer.sharding=optimizer"});
  EXPECT_THAT(std::string(CheckGrpoSpec(alone).message()),
              HasSubstr("trainer.sharding: shards the trainer's state over its ranks, and "
                        "actors.trainer.replicas is 1"));
  const JobSpec sharded = parse({"trainer.sharding=optimizer", "actors.trainer.replicas=2"});
  EXPECT_TRUE(CheckGrpoSpec(sharded).ok()) << CheckGrpoSpec(sharded);
  EXPECT_EQ(OnlineTrainerConfig(sharded, "m", "", "c").sharding(), proto::SHARDING_OPTIMIZER);
  const JobSpec dpo = parse({"recipe=dpo", "data.train_batch_size=2", "actors.trainer.replicas=3"});
  EXPECT_THAT(std::string(CheckDpoSpec(dpo).message()),
              HasSubstr("3 trainer ranks, but a mini-batch has only 2 preference pairs"));
}

// The critic's ranks reach its config, are not restarted, and each needs a share of every
// mini-batch.
TEST(PpoSpec, CriticRanksReachTheCriticAreNotRestartedAndEachNeedsAShareOfEveryMiniBatch) {
  const auto parse = [](std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), "recipe=ppo");
    absl::StatusOr<JobSpec> spec = ParseJobSpec(kBase, "job.yaml", overrides);
    EXPECT_TRUE(spec.ok()) << spec.status();
    return *std::move(spec);
  };
  const JobSpec one = parse({});
  EXPECT_EQ(one.actors.critic.max_restarts, 3);
  EXPECT_EQ(PpoCriticConfig(one, "m", "").data_parallel_size(), 1);
  const JobSpec two =
      parse({"data.train_batch_size=2", "algorithm.n=2", "actors.critic.replicas=4"});
  EXPECT_TRUE(CheckPpoSpec(two).ok()) << CheckPpoSpec(two);
  EXPECT_EQ(two.actors.critic.max_restarts, 0);  // resolved: a critic group is not restarted
  const proto::CriticConfig c = PpoCriticConfig(two, "m", "");
  EXPECT_EQ(c.data_parallel_size(), 4);
  EXPECT_GT(c.grad_bucket_mb(), 0);
  const JobSpec many =
      parse({"data.train_batch_size=2", "algorithm.n=2", "actors.critic.replicas=5"});
  EXPECT_THAT(std::string(CheckPpoSpec(many).message()),
              HasSubstr("actors.critic.replicas: 5 critic ranks, but a mini-batch has only 4 "
                        "sequences"));
  const JobSpec mini = parse({"data.train_batch_size=4", "algorithm.n=2",
                              "trainer.mini_batch_size=1", "actors.critic.replicas=3"});
  EXPECT_THAT(std::string(CheckPpoSpec(mini).message()),
              HasSubstr("3 critic ranks, but a mini-batch has only 2 sequences"));
  const JobSpec restarts = parse({"actors.critic.replicas=2", "actors.critic.max_restarts=1"});
  EXPECT_THAT(std::string(CheckPpoSpec(restarts).message()),
              HasSubstr("override actors.critic.max_restarts=1: actors.critic.max_restarts: a "
                        "critic of 2 data-parallel ranks is not restarted"));
  EXPECT_TRUE(
      CheckPpoSpec(parse({"actors.critic.replicas=2", "actors.critic.max_restarts=0"})).ok());
}

TEST(PpoSpec, TheExampleJobIsHonouredAndItsKeysReachTheCriticAndTrainer) {
  absl::StatusOr<JobSpec> spec = LoadJobSpec("examples/ppo_arith.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckPpoSpec(*spec).ok()) << CheckPpoSpec(*spec);
  EXPECT_FALSE(CheckGrpoSpec(*spec).ok());
  const proto::CriticConfig c = PpoCriticConfig(*spec, "model", "resume");
  EXPECT_EQ(c.model_dir(), "model");
  EXPECT_EQ(c.resume_dir(), "resume");
  EXPECT_EQ(c.ppo_epochs(), 2);
  EXPECT_EQ(c.mini_batch_size(), 32);
  EXPECT_EQ(c.gamma(), spec->algorithm.gamma);
  EXPECT_EQ(c.lam(), spec->algorithm.lam);
  const proto::TrainerConfig t = OnlineTrainerConfig(*spec, "model", "", "checkpointer");
  EXPECT_EQ(t.adv_estimator(), proto::ADV_ESTIMATOR_GAE);
  EXPECT_EQ(t.ppo_epochs(), 2);
  EXPECT_EQ(t.mini_batch_size(), 32);
  EXPECT_EQ(t.train_batch_size(), spec->data.train_batch_size);
  EXPECT_EQ(t.lam(), spec->algorithm.lam);
  // trainer.activation_checkpointing: both models the run trains recompute their layers.
  EXPECT_FALSE(c.activation_checkpointing());
  EXPECT_FALSE(t.activation_checkpointing());
  spec->trainer.activation_checkpointing = true;
  EXPECT_TRUE(PpoCriticConfig(*spec, "model", "resume").activation_checkpointing());
  EXPECT_TRUE(OnlineTrainerConfig(*spec, "model", "", "checkpointer").activation_checkpointing());
}

TEST(PpoSpec, RefusesWhatItCannotRunWithTheKeysLocation) {
  absl::StatusOr<JobSpec> rloo = Parse("recipe: ppo\nalgorithm: {adv_estimator: rloo}\n");
  ASSERT_TRUE(rloo.ok()) << rloo.status();
  EXPECT_THAT(std::string(CheckPpoSpec(*rloo).message()),
              HasSubstr("job.yaml:6:28: algorithm.adv_estimator: recipe ppo trains a critic for "
                        "adv_estimator gae; rloo needs no critic: run it with recipe grpo"));
  absl::StatusOr<JobSpec> spec = Parse(R"(recipe: ppo
actors:
  critic: {replicas: 1, config: {cliprange: 0.2}}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string m(CheckPpoSpec(*spec).message());
  EXPECT_THAT(m, HasSubstr("actors.critic.config: not a valid CriticConfig"));
  // A critic type that does not serve the Critic's methods.
  absl::StatusOr<JobSpec> typed = Parse("recipe: ppo\nactors: {critic: {type: Reference}}\n");
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_THAT(std::string(CheckPpoSpec(*typed).message()), HasSubstr("actors.critic.type"));
  // The critic's warm-up is recipe ppo's.
  absl::StatusOr<JobSpec> warm = Parse("");
  ASSERT_TRUE(warm.ok());
  warm->trainer.critic_warmup = 1;
  EXPECT_THAT(std::string(CheckGrpoSpec(*warm).message()),
              HasSubstr("trainer.critic_warmup: recipe grpo has no critic to warm up"));
}

// Recipe dpo: the example's algorithm.dpo reaches the trainer, the reference runs, dynamic
// sampling is on unless turned off; the policy-gradient keys it does not read are refused, and
// algorithm.dpo is refused elsewhere.
TEST(DpoSpec, TheExampleJobIsHonouredAndItsKeysReachTheTrainer) {
  absl::StatusOr<JobSpec> spec = LoadJobSpec("examples/dpo_arith.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckDpoSpec(*spec).ok()) << CheckDpoSpec(*spec);
  EXPECT_TRUE(NeedsReference(*spec));
  EXPECT_TRUE(spec->algorithm.filter_groups.enable) << "recipe dpo's default";
  const proto::TrainerConfig t = OnlineTrainerConfig(*spec, "model", "", "checkpointer");
  EXPECT_EQ(t.preference_loss(), proto::PREFERENCE_LOSS_DPO);
  EXPECT_EQ(t.preference_beta(), 0.1);
  EXPECT_EQ(t.kl_coef(), 0);
  for (const char* loss : {"ipo", "kto"}) {
    absl::StatusOr<JobSpec> other =
        Parse(absl::StrCat("recipe: dpo\nalgorithm: {dpo: {loss: ", loss,
                           ", beta: 0.3}, filter_groups: {enable: false}}\n"));
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_TRUE(CheckDpoSpec(*other).ok()) << CheckDpoSpec(*other);
    EXPECT_FALSE(other->algorithm.filter_groups.enable);
    const proto::TrainerConfig c = OnlineTrainerConfig(*other, "model", "", "checkpointer");
    EXPECT_EQ(c.preference_loss(),
              std::string(loss) == "ipo" ? proto::PREFERENCE_LOSS_IPO : proto::PREFERENCE_LOSS_KTO);
    EXPECT_EQ(c.preference_beta(), 0.3);
  }
  // A grpo job's trainer takes no preference loss.
  absl::StatusOr<JobSpec> grpo = Parse("");
  ASSERT_TRUE(grpo.ok());
  EXPECT_EQ(OnlineTrainerConfig(*grpo, "m", "", "c").preference_loss(),
            proto::PREFERENCE_LOSS_NONE);
}

TEST(DpoSpec, RefusesWhatItDoesNotReadWithTheKeysLocation) {
  absl::StatusOr<JobSpec> spec = Parse(R"(recipe: dpo
algorithm:
  clip_eps: 0.3
  kl: {coef: 0.01}
  dpo: {loss: ipo, label_smoothing: 0.1, desirable_weight: 2.0}
)");
  ASSERT_TRUE(spec.ok()) << spec.status();
  // The keys its rules do not read (online_rules.h), then what the losses' traits refuse.
  const std::string unread(CheckKeysRead(*spec).message());
  EXPECT_THAT(unread, HasSubstr("job.yaml:7:13: algorithm.clip_eps: is not read by recipe dpo"));
  EXPECT_THAT(unread, HasSubstr("algorithm.kl.coef: is not read by recipe dpo"));
  const std::string m(CheckDpoSpec(*spec).message());
  EXPECT_THAT(m, HasSubstr("algorithm.dpo.label_smoothing: is read by loss dpo; loss ipo does not "
                           "read it"));
  EXPECT_THAT(m, HasSubstr("algorithm.dpo.desirable_weight: is read by loss kto; loss ipo"));
  // algorithm.dpo is recipe dpo's only.
  absl::StatusOr<JobSpec> grpo = Parse("algorithm: {dpo: {beta: 0.2}}\n");
  ASSERT_TRUE(grpo.ok()) << grpo.status();
  EXPECT_THAT(std::string(CheckKeysRead(*grpo).message()),
              HasSubstr("algorithm.dpo.beta: is recipe dpo's; recipe grpo does not read it"));
  // The parser's own checks: a pair needs two samples, the losses a reference, a loss a name.
  absl::StatusOr<JobSpec> one = Parse("recipe: dpo\nalgorithm: {n: 1}\n");
  EXPECT_THAT(std::string(one.status().message()),
              HasSubstr("recipe dpo needs at least 2 responses per prompt to form a pair"));
  absl::StatusOr<JobSpec> unreferenced = Parse("recipe: dpo\nactors: {reference: {replicas: 0}}\n");
  EXPECT_THAT(std::string(unreferenced.status().message()),
              HasSubstr("recipe dpo's losses are against a reference model"));
  absl::StatusOr<JobSpec> none = Parse("recipe: dpo\nalgorithm: {dpo: {loss: none}}\n");
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("algorithm.dpo.loss"));
  absl::StatusOr<JobSpec> smooth = Parse("recipe: dpo\nalgorithm: {dpo: {label_smoothing: 0.5}}\n");
  EXPECT_THAT(std::string(smooth.status().message()), HasSubstr("algorithm.dpo.label_smoothing"));
}

// reward.model: served by the RewardModel actor with the verifiers beside it; a directory without a
// value head is refused before anything starts, naming the key.
TEST(OnlineSpec, ARewardModelDirectoryIsCheckedAndServedByTheRewardModelActor) {
  const std::string rm = Tmp() + "/online_config_test_rm";
  std::filesystem::remove_all(rm);
  absl::StatusOr<models::ModelConfig> config = models::LoadModelConfig("examples/models/tiny.json");
  ASSERT_TRUE(config.ok()) << config.status();
  config->vocab_size = 15;
  absl::StatusOr<models::ValueModel> model = models::CreateValueModel(*config);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_TRUE(models::SavePretrained(**model, rm).ok());

  absl::StatusOr<JobSpec> spec = Parse(absl::StrCat(
      "reward: {model: ", rm, ", model_weight: 2.0, name: [arithmetic], weights: [0]}\n"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->actors.reward.type, "RewardModel");
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
  const nlohmann::json role = RewardRoleConfig(*spec);
  EXPECT_EQ(role["model_dir"], rm);
  EXPECT_EQ(role["weight"], 2.0);
  EXPECT_EQ(role["verifiers"], ConfigJson(OnlineRewardConfig(*spec)));
  // Its actors.reward.config keys are RewardModelConfig's fields, checked before any actor starts.
  absl::StatusOr<JobSpec> batched = Parse(
      absl::StrCat("reward: {model: ", rm, "}\nactors: {reward: {config: {batch_size: 8}}}\n"));
  ASSERT_TRUE(batched.ok()) << batched.status();
  EXPECT_TRUE(CheckGrpoSpec(*batched).ok()) << CheckGrpoSpec(*batched);
  EXPECT_EQ(RewardRoleConfig(*batched)["batch_size"], 8);
  absl::StatusOr<JobSpec> typo =
      Parse(absl::StrCat("reward: {model: ", rm, "}\nactors: {reward: {config: {batch: 8}}}\n"));
  ASSERT_TRUE(typo.ok()) << typo.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*typo).message()),
              HasSubstr("actors.reward.config: not a valid RewardModelConfig "
                        "(proto/actor_config.proto): "));

  // A policy directory (no value head) is refused.
  const std::string policy = rm + "-policy";
  std::filesystem::remove_all(policy);
  absl::StatusOr<models::CausalLM> lm = models::CreateCausalLM(*config);
  ASSERT_TRUE(lm.ok());
  ASSERT_TRUE(models::SavePretrained(**lm, policy).ok());
  absl::StatusOr<JobSpec> bad = Parse(absl::StrCat("reward: {model: ", policy, "}\n"));
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*bad).message()),
              HasSubstr(absl::StrCat("job.yaml:5:17: reward.model: ", policy,
                                     " is not a reward model: its weights have no value head "
                                     "(score.weight)")));
  // A weight without a model is refused by the parser.
  EXPECT_THAT(std::string(Parse("reward: {model_weight: 2.0}\n").status().message()),
              HasSubstr("reward.model_weight: weighs reward.model's score, and no reward.model "
                        "is set"));
}

// reward.judge: served by the Judge actor with the verifiers beside it; its keys reach the actor's
// config, and what the actor would refuse is refused before anything starts, naming the key.
TEST(OnlineSpec, AJudgeIsCheckedAndServedByTheJudgeActor) {
  const std::string judge = Tmp() + "/online_config_test_judge";
  std::filesystem::remove_all(judge);
  std::filesystem::create_directories(judge);
  for (const char* file : {"config.json", "tokenizer.json"})
    test::WriteFile(judge + "/" + file, "");

  absl::StatusOr<JobSpec> spec = Parse(absl::StrCat(
      "reward:\n  name: [arithmetic]\n  weights: [0]\n  judge:\n    model: ", judge,
      "\n    template: \"Q {prompt} A {response} ok?\"\n    verdicts: {Y: 1.0, N: -0.5}\n"
      "    max_new_tokens: 3\n    slots: 7\n    add_bos: false\n    weight: 2.0\n"
      "    marker: 'Verdict:'\n"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->actors.reward.type, "Judge");
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
  const nlohmann::json role = RewardRoleConfig(*spec);
  EXPECT_EQ(role["model_dir"], judge);
  EXPECT_EQ(role["template"], "Q {prompt} A {response} ok?");
  EXPECT_EQ(role["verdicts"], nlohmann::json({{"Y", 1.0}, {"N", -0.5}}));
  EXPECT_FALSE(role.contains("score"));
  EXPECT_EQ(OnlineJudgeConfig(*spec).max_new_tokens(), 3);  // (int64: a string in JSON)
  EXPECT_EQ(role["marker"], "Verdict:");
  EXPECT_EQ(OnlineJudgeConfig(*spec).slots(), 7);
  EXPECT_EQ(role["add_bos"], false);
  EXPECT_EQ(role["weight"], 2.0);
  EXPECT_EQ(role["verifiers"], ConfigJson(OnlineRewardConfig(*spec)));

  absl::StatusOr<JobSpec> scored = Parse(absl::StrCat(
      "reward: {judge: {model: ", judge, ", template: '{response}', score: {min: 1, max: 5}}}\n"));
  ASSERT_TRUE(scored.ok()) << scored.status();
  EXPECT_EQ(RewardRoleConfig(*scored)["score"], nlohmann::json({{"min", 1.0}, {"max", 5.0}}));
  EXPECT_FALSE(RewardRoleConfig(*scored).contains("verdicts"));

  auto parse_error = [](const std::string& extra) {
    absl::StatusOr<JobSpec> s = Parse(extra);
    return s.ok() ? std::string("OK") : std::string(s.status().message());
  };
  EXPECT_THAT(parse_error("reward: {judge: {template: '{response}'}}\n"),
              HasSubstr("reward.judge.template: configures reward.judge.model, which is not set"));
  const std::string model = absl::StrCat("reward: {judge: {model: ", judge);
  EXPECT_THAT(parse_error(model + ", verdicts: {Y: 1}}}\n"),
              HasSubstr("reward.judge.template: the judge needs its prompt template"));
  EXPECT_THAT(parse_error(model + ", template: '{response}'}}\n"),
              HasSubstr("give exactly one of verdicts"));
  EXPECT_THAT(
      parse_error(model +
                  ", template: '{response}', verdicts: {Y: 1}, score: {min: 0, max: 1}}}\n"),
      HasSubstr("reward.judge.score: give exactly one of verdicts"));
  EXPECT_THAT(parse_error(model + ", template: '{response}', verdicts: {Y: yes}}}\n"),
              HasSubstr("expected the verdict's reward (a number), got \"yes\""));
  EXPECT_THAT(parse_error(model + ", template: '{response}', score: {min: 3, max: 3}}}\n"),
              HasSubstr("reward.judge.score: min (3) must be below max (3)"));
  EXPECT_THAT(parse_error(model + ", template: '{response}', verdicts: {Y: 1}, slots: 0}}\n"),
              HasSubstr("reward.judge.slots"));
  EXPECT_THAT(parse_error(model + ", template: '{response}', verdicts: {Y: 1}, topk: 3}}\n"),
              HasSubstr("topk"));

  auto check_error = [](const std::string& extra) {
    absl::StatusOr<JobSpec> s = Parse(extra);
    if (!s.ok()) return std::string(s.status().message());
    return std::string(CheckGrpoSpec(*s).message());
  };
  EXPECT_THAT(check_error(model + ", template: '{prompt} {answer}', verdicts: {Y: 1}}}\n"),
              HasSubstr("reward.judge.template: template: unknown placeholder {answer}"));
  EXPECT_THAT(check_error(absl::StrCat("reward: {judge: {model: ", judge,
                                       "-missing, template: '{response}', verdicts: {Y: 1}}}\n")),
              HasSubstr("reward.judge.model: " + judge + "-missing is not a model directory"));
  EXPECT_THAT(check_error(model + ", template: '{response}', verdicts: {Y: 1}}}\n"
                                  "actors: {reward: {type: RewardServer}}\n"),
              HasSubstr("reward.judge is served by the Judge actor, not RewardServer"));
  // actors.reward.config: JudgeConfig's fields over reward.judge's.
  EXPECT_THAT(check_error(model + ", template: '{response}', verdicts: {Y: 1}}}\n"
                                  "actors: {reward: {config: {temperature: 0.5}}}\n"),
              HasSubstr("actors.reward.config: not a valid JudgeConfig"));
  absl::StatusOr<JobSpec> overridden = Parse(model +
                                             ", template: '{response}', verdicts: {Y: 1}}}\n"
                                             "actors: {reward: {config: {slots: 3}}}\n");
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  EXPECT_EQ(check_error(model + ", template: '{response}', verdicts: {Y: 1}}}\n"
                                "actors: {reward: {config: {slots: 3}}}\n"),
            "");
  EXPECT_EQ(RewardRoleConfig(*overridden)["slots"], 3);
}

// A judge's and a reward model's defaults are their actors' (proto/actor_config.proto): a job that
// leaves a key out gives its actor the value the actor would take by itself.
TEST(OnlineSpec, AJudgesAndARewardModelsDefaultsAreTheirActorsOwn) {
  const std::string dir = Tmp() + "/online_config_test_defaults";
  absl::StatusOr<JobSpec> judged = Parse(absl::StrCat(
      "reward: {judge: {model: ", dir, ", template: '{response}', score: {min: 0}}}\n"));
  ASSERT_TRUE(judged.ok()) << judged.status();
  const proto::JudgeConfig judge = OnlineJudgeConfig(*judged);
  const proto::JudgeConfig& bare = proto::JudgeConfig::default_instance();
  EXPECT_EQ(judge.max_new_tokens(), bare.max_new_tokens());
  EXPECT_EQ(judge.slots(), bare.slots());
  EXPECT_EQ(judge.add_bos(), bare.add_bos());
  EXPECT_EQ(judge.weight(), bare.weight());
  EXPECT_EQ(judge.marker(), bare.marker());
  EXPECT_EQ(judge.score().min(), bare.score().min());
  EXPECT_EQ(judge.score().max(), bare.score().max());
  absl::StatusOr<JobSpec> modelled = Parse(absl::StrCat("reward: {model: ", dir, "}\n"));
  ASSERT_TRUE(modelled.ok()) << modelled.status();
  EXPECT_EQ(OnlineRewardModelConfig(*modelled).weight(),
            proto::RewardModelConfig::default_instance().weight());
  EXPECT_FALSE(OnlineRewardModelConfig(*modelled).has_batch_size());  // the actor's own default
}

TEST(OnlineSpec, RefusesProfileStepsItCannotHonour) {
  for (const char* bad : {"[2, 1]", "[0, 1]", "3", "[1, 2, 3]", "[1, x]"}) {
    absl::StatusOr<JobSpec> spec =
        ParseJobSpec(kBase, "job.yaml", {absl::StrCat("trainer.profile_steps=", bad)});
    ASSERT_FALSE(spec.ok()) << bad;
    EXPECT_THAT(std::string(spec.status().message()),
                HasSubstr("trainer.profile_steps: expected [from, to], whole numbers with 1 <= "
                          "from <= to"))
        << bad;
  }
  absl::StatusOr<JobSpec> beyond =
      ParseJobSpec(kBase, "job.yaml", {"trainer.profile_steps=[2, 3]"});
  ASSERT_FALSE(beyond.ok());
  EXPECT_THAT(std::string(beyond.status().message()),
              HasSubstr("profiles steps up to 3, beyond trainer.total_steps (2)"));
  // With span recording off the operators would go nowhere: refused, not ignored.
  ASSERT_TRUE(InitGlobalSpans({.capacity = 0}).ok());
  absl::StatusOr<JobSpec> off = ParseJobSpec(kBase, "job.yaml", {"trainer.profile_steps=[1, 1]"});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*off).message()),
              HasSubstr("trainer.profile_steps: cannot be honoured: span recording is off"));
  ASSERT_TRUE(InitGlobalSpans({.capacity = 64}).ok());
  EXPECT_TRUE(CheckGrpoSpec(*off).ok()) << CheckGrpoSpec(*off);
}

TEST(OnlineSpec, RefusesReferenceReplicasWithoutAKlTerm) {
  absl::StatusOr<JobSpec> spec =
      Parse("algorithm: {kl: {coef: 0}}\nactors:\n  reference: {replicas: 2}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(
      std::string(CheckGrpoSpec(*spec).message()),
      HasSubstr("actors.reference.replicas: algorithm.kl.coef is 0 and use_kl_in_reward is off, "
                "so recipe grpo runs "
                "no reference"));
  spec = Parse("actors:\n  reference: {replicas: 2}\n");  // with the base's KL term
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
}

TEST(OnlineSpec, RefusesAnActorTypeThatDoesNotServeItsRole) {
  absl::StatusOr<JobSpec> spec = Parse("actors:\n  reward: {type: Reference}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*spec).message()),
              HasSubstr("job.yaml:6:18: actors.reward.type: Reference does not serve the methods "
                        "of RewardServer: no method Score(troupe.proto.ScoreRequest) -> "
                        "troupe.proto.ScoreReply"));
}

// A built-in actor's config overrides are checked against its config message before any actor
// starts; a user's own type (not one of troupe's) takes any config.
TEST(OnlineSpec, ChecksConfigOverridesOfBuiltInActorsAgainstTheirMessage) {
  absl::StatusOr<JobSpec> spec =
      Parse("actors:\n  trainer:\n    config: {lr: 0.1, lern_rate: 1}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*spec).message()),
              HasSubstr("job.yaml:7:5: actors.trainer.config: not a valid TrainerConfig "
                        "(proto/actor_config.proto): "));
  EXPECT_THAT(std::string(CheckGrpoSpec(*spec).message()), HasSubstr("lern_rate"));
  spec = Parse("actors:\n  rollout:\n    config: {num_slots: many}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*spec).message()),
              HasSubstr("actors.rollout.config: not a valid RolloutWorkerConfig"));
  spec = Parse("actors:\n  reward:\n    config: {format_wieght: 0.2}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*spec).message()),
              HasSubstr("actors.reward.config: reward config: unknown key 'format_wieght'"));
  for (const char* good : {"actors:\n  trainer:\n    config: {lr: 0.1}\n",
                           "actors:\n  reward:\n    config: {format_weight: 0.2}\n",
                           "actors:\n  trainer:\n    config: {off_policy: OFF_POLICY_MASK}\n",
                           "actors:\n  checkpointer:\n    config: {keep: 2}\n"}) {
    spec = Parse(good);
    ASSERT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << good << CheckGrpoSpec(*spec);
  }
}

TEST(OnlineSpec, RefusesALibraryThatDoesNotLoad) {
  absl::StatusOr<JobSpec> spec = Parse("actors:\n  reward: {library: no/such/libreward.so}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string m(CheckGrpoSpec(*spec).message());
  EXPECT_THAT(m, HasSubstr("job.yaml:6:21: actors.reward.library: actor library "
                           "no/such/libreward.so: file not found"));
  EXPECT_EQ(m.find("file not found", m.find("file not found") + 1), std::string::npos) << m;
}

TEST(OnlineSpec, TakesAnotherTokenizerExceptForTheSftWarmStart) {
  absl::StatusOr<JobSpec> spec = Parse("");
  ASSERT_TRUE(spec.ok());
  spec->model.init = ModelInit::kRandom;
  spec->model.tokenizer = "tok.json";
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);
  spec->model.init = ModelInit::kSft;
  const std::string m(CheckGrpoSpec(*spec).message());
  EXPECT_THAT(m,
              HasSubstr("model.tokenizer: the sft warm start of a task trains with the task's own "
                        "character tokenizer"));
}

// Fake tasks, registered the way tasks/ register theirs: one the recipe can run (prompts and a
// verifier), one without a verifier, one with neither.
class OnePrompt final : public tasks::TaskProblems {
 public:
  int64_t num_train() const override { return 1; }
  tasks::TaskProblem Train(int64_t) const override { return {"ab", "ba"}; }
  std::vector<tasks::TaskProblem> HeldOut() const override { return {{"ba", "ab"}}; }
};
class ExactReward final : public reward::RewardFunction {
 public:
  reward::RewardOutput Score(const reward::RewardInput& in) const override {
    return {in.response_text == in.reference_answer ? 1.0 : 0.0, {}};
  }
};
absl::StatusOr<std::unique_ptr<tasks::TaskProblems>> MakeOnePrompt(const tasks::TaskConfig&) {
  return std::make_unique<OnePrompt>();
}
absl::StatusOr<std::unique_ptr<reward::RewardFunction>> MakeExactReward(const nlohmann::json&) {
  return std::make_unique<ExactReward>();
}
tasks::TaskDefinition ReverseTask() {
  tasks::TaskDefinition task;
  task.alphabet = "ab";
  task.make_problems = MakeOnePrompt;
  task.make_reward = MakeExactReward;
  return task;
}
tasks::TaskDefinition UnverifiedTask() {
  tasks::TaskDefinition task = ReverseTask();
  task.make_reward = nullptr;
  return task;
}
tasks::TaskDefinition SpecOnlyTask() { return tasks::TaskDefinition(); }
TROUPE_REGISTER_TASK("reverse_test", ReverseTask);
TROUPE_REGISTER_TASK("unverified_test", UnverifiedTask);
TROUPE_REGISTER_TASK("spec_only_test", SpecOnlyTask);

TEST(OnlineSpec, RunsAnyRegisteredTaskWithPromptsAndAVerifier) {
  absl::StatusOr<JobSpec> spec =
      ParseJobSpec(kBase, "job.yaml", {"data.task=reverse_test", "model.init=random"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(CheckGrpoSpec(*spec).ok()) << CheckGrpoSpec(*spec);

  spec = ParseJobSpec(kBase, "job.yaml", {"data.task=unverified_test", "model.init=random"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*spec).message()),
              HasSubstr("data.task: task unverified_test has no verifier for the built-in reward "
                        "server (no reward 'unverified_test' is registered"));

  spec = ParseJobSpec(kBase, "job.yaml", {"data.task=spec_only_test", "model.init=random"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*spec).message()),
              HasSubstr("data.task: recipe grpo needs a task with prompts of its own; "
                        "spec_only_test has none"));
}

// The warm start asks the task for its supervised data (tasks/task.h's make_sft_data), whatever
// its name: a task that declares supports_sft without providing the data is refused at the check.
TEST(OnlineSpec, TheSftWarmStartNeedsTheTasksOwnSupervisedData) {
  tasks::TaskDefinition with_sft = ReverseTask();
  with_sft.name = "reverse_sft_test";
  with_sft.supports_sft = true;
  ASSERT_TRUE(tasks::RegisterTask(with_sft).ok());
  absl::StatusOr<JobSpec> spec = ParseJobSpec(kBase, "job.yaml", {"data.task=reverse_sft_test"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(std::string(CheckGrpoSpec(*spec).message()),
              HasSubstr("model.init: the sft warm start trains on a task's own supervised data, "
                        "and task reverse_sft_test provides none"));
}

TEST(OnlineSpec, GenerationRequestsAreSeededByTheFirstPrompt) {
  absl::StatusOr<JobSpec> spec = Parse("algorithm: {n: 3}\n");
  ASSERT_TRUE(spec.ok());
  proto::Prompt a, b;
  a.set_prompt_id(5);
  b.set_prompt_id(6);
  proto::GenerateRequest r1 = OnlineGenerateRequest(*spec, {a, b}, 4);
  proto::GenerateRequest r2 = OnlineGenerateRequest(*spec, {a}, 4);
  proto::GenerateRequest r3 = OnlineGenerateRequest(*spec, {b}, 4);
  EXPECT_EQ(r1.n(), 3);
  EXPECT_EQ(r1.min_weight_version(), 4);
  EXPECT_TRUE(r1.pin_weight_version());
  EXPECT_EQ(r1.prompts_size(), 2);
  EXPECT_EQ(r1.seed(), r2.seed());
  EXPECT_NE(r1.seed(), r3.seed());
}

// A dataset job over a JSONL file written into the test's temp dir.
absl::StatusOr<JobSpec> DatasetJob(const std::string& records, const std::string& extra = "") {
  const std::string path = Tmp() + "/train.jsonl";
  test::WriteFile(path, records);
  return ParseJobSpec(absl::StrCat("name: g\nmodel: {config: examples/models/tiny.json, init: "
                                   "random, tokenizer: t.json}\ndata: {train_files: ",
                                   path, "}\ntrainer: {total_steps: 2}\n", extra),
                      "job.yaml");
}

constexpr char kArithmeticRecords[] =
    R"({"data_source": "arithmetic", "prompt": "1+2=", "reward_model": {"ground_truth": "3"}})"
    "\n";

TEST(OnlineSpec, TheRewardServersGetTheTaskFormOrTheRewardForm) {
  auto json = [](const JobSpec& spec) { return ConfigJson(OnlineRewardConfig(spec)); };
  EXPECT_EQ(json(*Parse("")), nlohmann::json({{"task", "arithmetic"}}));
  EXPECT_EQ(RewardRoleConfig(*Parse("")), nlohmann::json({{"task", "arithmetic"}}));
  absl::StatusOr<JobSpec> one = DatasetJob(kArithmeticRecords, "reward: {name: arithmetic}\n");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(json(*one), nlohmann::json({{"task", "arithmetic"}}));
  absl::StatusOr<JobSpec> per_record = DatasetJob(kArithmeticRecords);
  EXPECT_EQ(json(*per_record), nlohmann::json::parse(R"({"reward": {}})"));
  absl::StatusOr<JobSpec> weighted = DatasetJob(
      kArithmeticRecords,
      "reward: {name: [arithmetic], weights: [0.5], config: {arithmetic: {format_weight: 0}}}\n");
  ASSERT_TRUE(weighted.ok()) << weighted.status();
  EXPECT_EQ(json(*weighted), nlohmann::json::parse(R"(
      {"reward": {"name": ["arithmetic"], "weights": [0.5],
                  "config": {"arithmetic": {"format_weight": 0}}}})"));
  // A task job's actors.reward.config is the task reward's own config (as before it was typed).
  absl::StatusOr<JobSpec> configured = Parse("actors: {reward: {config: {format_weight: 0.2}}}\n");
  ASSERT_TRUE(configured.ok()) << configured.status();
  EXPECT_EQ(RewardRoleConfig(*configured), nlohmann::json::parse(R"(
      {"task": "arithmetic", "task_config": {"format_weight": 0.2}})"));
  const ActorGroupOptions role = RewardRoleOptions("job", *configured);
  EXPECT_EQ(role.role, "reward");
  EXPECT_EQ(role.config(0), RewardRoleConfig(*configured));  // not overlaid a second time
  EXPECT_FALSE(role.placement.has_value());
  // actors.reward.placement reaches the group the recipe spawns.
  absl::StatusOr<JobSpec> placed =
      Parse("actors: {reward: {replicas: 2, resources: {CPU: 0.5}, placement: STRICT_SPREAD}}\n");
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_EQ(RewardRoleOptions("job", *placed).placement, proto::STRICT_SPREAD);
}

TEST(OnlineSpec, ReadsADatasetsRecordsBeforeAnyActorStarts) {
  absl::StatusOr<JobSpec> good = DatasetJob(kArithmeticRecords);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_TRUE(CheckGrpoSpec(*good).ok()) << CheckGrpoSpec(*good);
  absl::StatusOr<JobSpec> bad = DatasetJob(std::string(kArithmeticRecords) + "\n{\"prompt\": 1\n");
  EXPECT_THAT(CheckGrpoSpec(*bad).message(),
              HasSubstr("job.yaml:3:21: data.train_files: " + good->data.train_files[0] +
                        ":3: not valid JSON ("));
  absl::StatusOr<JobSpec> chat = DatasetJob(
      R"({"data_source": "arithmetic", "prompt": [{"role": "user", "content": "1+2="}], )"
      R"("reward_model": {"ground_truth": "3"}})");
  EXPECT_THAT(CheckGrpoSpec(*chat).message(),
              HasSubstr(":1: 'prompt' is a list of chat messages, and no chat template"));
}

// A dataset job with a character tokenizer the checks can load, and `data` keys added.
absl::StatusOr<JobSpec> TokenizedDatasetJob(const std::string& records, const std::string& data) {
  const std::string tmp = Tmp();
  test::WriteFile(tmp + "/train2.jsonl", records);
  test::WriteFile(tmp + "/chars.json", R"({"type": "char", "alphabet": "0123456789+=<>|"})");
  return ParseJobSpec(
      absl::StrCat("name: g\nmodel: {config: examples/models/tiny.json, init: "
                   "random, tokenizer: ",
                   tmp, "/chars.json}\ndata: {train_files: ", tmp,
                   "/train2.jsonl, max_prompt_length: 8", data, "}\ntrainer: {total_steps: 2}\n"),
      "job.yaml");
}

TEST(OnlineSpec, PromptLengthsAndChatTemplatesAreCheckedBeforeAnythingStarts) {
  const std::string records =
      R"({"data_source": "arithmetic", "prompt": "1+2=", "reward_model": {"ground_truth": "3"}})"
      "\n"
      R"({"data_source": "arithmetic", "prompt": "1111111111+2=", )"
      R"("reward_model": {"ground_truth": "1111111113"}})"
      "\n";
  absl::StatusOr<JobSpec> spec = TokenizedDatasetJob(records, "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(
      CheckGrpoSpec(*spec).message(),
      HasSubstr("train2.jsonl:2: prompt of 14 tokens, more than data.max_prompt_length = 8"));
  for (const char* fix : {", truncation: left", ", filter_overlong_prompts: true"}) {
    absl::StatusOr<JobSpec> fixed = TokenizedDatasetJob(records, fix);
    EXPECT_TRUE(CheckGrpoSpec(*fixed).ok()) << fix << ": " << CheckGrpoSpec(*fixed);
  }
  // Filtering that leaves nothing to train on.
  absl::StatusOr<JobSpec> none = TokenizedDatasetJob(records.substr(records.find('\n') + 1),
                                                     ", filter_overlong_prompts: true");
  EXPECT_THAT(CheckGrpoSpec(*none).message(),
              HasSubstr("data.train_files: no prompt fits data.max_prompt_length = 8 tokens"));

  // Messages prompts: rendered by data.chat_template; a template that does not parse is refused,
  // naming its file and line; one that renders too long a prompt is refused by length.
  const std::string tmp = Tmp();
  const std::string chat =
      R"({"data_source": "arithmetic", "prompt": [{"role": "user", "content": "1+2="}], )"
      R"("reward_model": {"ground_truth": "3"}})"
      "\n";
  test::WriteFile(tmp + "/plain.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}");
  absl::StatusOr<JobSpec> rendered =
      TokenizedDatasetJob(chat, absl::StrCat(", chat_template: ", tmp, "/plain.jinja"));
  EXPECT_TRUE(CheckGrpoSpec(*rendered).ok()) << CheckGrpoSpec(*rendered);
  test::WriteFile(tmp + "/long.jinja", "<|<|<|{{ messages[0].content }}|>|>|>");
  absl::StatusOr<JobSpec> long_prompt =
      TokenizedDatasetJob(chat, absl::StrCat(", chat_template: ", tmp, "/long.jinja"));
  EXPECT_THAT(CheckGrpoSpec(*long_prompt).message(), HasSubstr(":1: prompt of 17 tokens"));
  test::WriteFile(tmp + "/broken.jinja", "ok\n{% for m in messages %}");
  absl::StatusOr<JobSpec> broken =
      TokenizedDatasetJob(chat, absl::StrCat(", chat_template: ", tmp, "/broken.jinja"));
  const std::string message(CheckGrpoSpec(*broken).message());
  EXPECT_THAT(message, HasSubstr("data.chat_template: "));
  EXPECT_THAT(message, HasSubstr("broken.jinja"));
  EXPECT_THAT(message, HasSubstr(":2: "));
}

TEST(OnlineSpec, ADataSourceWithoutARegisteredRewardIsRefusedUnlessRewardNameIsSet) {
  const std::string records =
      R"({"data_source": "openai/gsm8k", "prompt": "1+2=", "reward_model": {"ground_truth": "3"}})";
  absl::StatusOr<JobSpec> spec = DatasetJob(records);
  EXPECT_THAT(CheckGrpoSpec(*spec).message(),
              HasSubstr("records of data source \"openai/gsm8k\" have no reward of that name, "
                        "and reward.name is not set (registered rewards: "));
  absl::StatusOr<JobSpec> named = DatasetJob(records, "reward: {name: arithmetic}\n");
  EXPECT_TRUE(CheckGrpoSpec(*named).ok()) << CheckGrpoSpec(*named);
  absl::StatusOr<JobSpec> bad_config =
      DatasetJob(records, "reward: {name: arithmetic, config: {arithmetic: {nope: 1}}}\n");
  EXPECT_THAT(CheckGrpoSpec(*bad_config).message(),
              HasSubstr("reward.config: arithmetic: reward config: unknown key 'nope'"));
}

}  // namespace
}  // namespace troupe::recipes
