#include "recipes/job_spec/job_spec.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/model_config.h"
#include "models/weight_shapes.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_recipes.h"
#include "recipes/job_spec/job_tasks.h"
#include "recipes/online/online_rules.h"

namespace troupe::recipes {
namespace {

// The rules of recipes grpo, ppo and dpo, which the specs below name (the recipes themselves are
// not linked into this test).
const bool kOnlineRulesRegistered [[maybe_unused]] = RegisterJobRecipe(GrpoRules()).ok() &&
                                                     RegisterJobRecipe(PpoRules()).ok() &&
                                                     RegisterJobRecipe(DpoRules()).ok();

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// The example of issue 6, verbatim.
constexpr char kIssueExample[] = R"(name: grpo-arith
model: {config: examples/models/tiny.json, init: sft}      # or a safetensors directory
data: {task: arithmetic, train_batch_size: 32, max_response_length: 16}
algorithm: {adv_estimator: grpo, n: 8, clip_eps: 0.2, kl: {coef: 0.01, type: k3}}
async: {max_staleness: 2}                                   # 0 = synchronous, on-policy
actors:
  rollout:   {replicas: 2, resources: {CPU: 1}}
  reward:    {replicas: 1, resources: {CPU: 0.5}}
  reference: {replicas: 1}
  trainer:   {replicas: 1, resources: {CPU: 1}, config: {lr: 1e-4}}
  checkpointer: {dir: runs/grpo-arith/ckpt, every_steps: 20, keep: 3}
trainer: {total_steps: 200, seed: 1}
logging: {dir: runs/grpo-arith}
)";

// A minimal valid spec of four lines; tests append sections from line 5 on.
constexpr char kBase[] = R"(name: t
model: {config: m.json, init: random}
data: {task: arithmetic}
trainer: {total_steps: 10}
)";

JobSpec Parse(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "job.yaml", overrides);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *std::move(spec) : JobSpec{};
}

// The error message of a spec that must not parse.
std::string ParseError(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "job.yaml", overrides);
  EXPECT_FALSE(spec.ok()) << "parsed:\n" << yaml;
  if (spec.ok()) return "";
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(spec.status().message());
}

// An empty directory `name` under this binary's temporary directory (removed when it exits).
std::string TempDir(const std::string& name) {
  static const test::TempDir root("job_spec_test");
  const std::filesystem::path dir = root.Path(name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

using ::troupe::test::WriteFile;

// A model config.json of the given width and depth (the shapes the tests vary).
std::string ModelConfigJson(int hidden, int layers, int vocab = 40) {
  return absl::StrCat(R"({"model_type": "llama", "vocab_size": )", vocab, R"(, "hidden_size": )",
                      hidden, R"(, "intermediate_size": )", 2 * hidden,
                      R"(, "num_hidden_layers": )", layers,
                      R"(, "num_attention_heads": 4, "max_position_embeddings": 4096})");
}

// A model directory as troupe writes one: config.json and model.safetensors with the weights (all
// zero) of that config's CausalLM.
void WriteCheckpoint(const std::string& dir, const std::string& config_json) {
  std::filesystem::create_directories(dir);
  WriteFile(dir + "/config.json", config_json);
  absl::StatusOr<models::ModelConfig> config = models::ParseModelConfig(config_json, "config");
  ASSERT_TRUE(config.ok()) << config.status();
  nlohmann::json header = nlohmann::json::object();
  int64_t offset = 0;
  for (const auto& [name, shape] : models::CausalLmWeightShapes(*config)) {
    int64_t bytes = 4;
    for (int64_t d : shape) bytes *= d;
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  const std::string text = header.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  out += text;
  out += std::string(static_cast<size_t>(offset), '\0');
  WriteFile(dir + "/model.safetensors", out);
}

// Runs `check` on another thread; if it is still running after 20 s (blocked on a FIFO of
// `fifos`), fails, and opens and closes each FIFO for writing until it ends (a reader waiting in
// open(2) then sees an empty file).
template <typename T>
T WithoutBlocking(std::function<T()> check, const std::vector<std::string>& fifos) {
  std::future<T> result = std::async(std::launch::async, std::move(check));
  if (result.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "blocked on a FIFO";
    for (int i = 0;
         i < 600 && result.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready;
         ++i) {
      for (const std::string& fifo : fifos) {
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) ::close(fd);
      }
    }
  }
  return result.get();
}

// ------------------------------------------------------------------------------------------------
// Values and defaults
// ------------------------------------------------------------------------------------------------

TEST(JobSpec, ParsesTheIssueExampleWithItsValuesAndFillsInDefaults) {
  const JobSpec spec = Parse(kIssueExample);
  EXPECT_EQ(spec.name, "grpo-arith");
  EXPECT_EQ(spec.model.config, "examples/models/tiny.json");
  EXPECT_EQ(spec.model.init, ModelInit::kSft);
  EXPECT_EQ(spec.data.task, "arithmetic");
  EXPECT_EQ(spec.data.train_batch_size, 32);
  EXPECT_EQ(spec.data.max_response_length, 16);
  EXPECT_EQ(spec.algorithm.adv_estimator, proto::ADV_ESTIMATOR_GRPO);
  EXPECT_EQ(spec.algorithm.n, 8);
  EXPECT_DOUBLE_EQ(spec.algorithm.clip_eps, 0.2);
  EXPECT_DOUBLE_EQ(spec.algorithm.kl.coef, 0.01);
  EXPECT_EQ(spec.algorithm.kl.type, proto::KL_K3);
  EXPECT_EQ(spec.async.max_staleness, 2);
  EXPECT_EQ(spec.actors.rollout.replicas, 2);
  EXPECT_DOUBLE_EQ(spec.actors.rollout.resources.cpu, 1);
  EXPECT_DOUBLE_EQ(spec.actors.reward.resources.cpu, 0.5);
  EXPECT_EQ(spec.actors.reference.replicas, 1);
  EXPECT_EQ(spec.actors.trainer.config, nlohmann::json::parse(R"({"lr": 0.0001})"));
  EXPECT_EQ(spec.actors.checkpointer.dir, "runs/grpo-arith/ckpt");
  EXPECT_EQ(spec.actors.checkpointer.every_steps, 20);
  EXPECT_EQ(spec.actors.checkpointer.keep, 3);
  EXPECT_EQ(spec.trainer.total_steps, 200);
  EXPECT_EQ(spec.trainer.seed, 1);
  EXPECT_EQ(spec.logging.dir, "runs/grpo-arith");

  // Defaults (verl's where it has them) and the ones derived from other keys.
  EXPECT_EQ(spec.data.max_prompt_length, 512);
  EXPECT_EQ(spec.data.heldout_size, 500);
  EXPECT_EQ(spec.data.task_params,
            nlohmann::json::parse(R"({"digits": 2, "dropped_carry_rate": 0.0, "num_train": 0})"));
  EXPECT_DOUBLE_EQ(spec.algorithm.clip_eps_low, 0.2);
  EXPECT_DOUBLE_EQ(spec.algorithm.clip_eps_high, 0.2);
  EXPECT_TRUE(spec.algorithm.norm_adv_by_std);
  EXPECT_EQ(spec.algorithm.loss_agg_mode, proto::LOSS_AGG_TOKEN_MEAN);
  EXPECT_DOUBLE_EQ(spec.algorithm.entropy_coeff, 0);
  EXPECT_EQ(spec.algorithm.off_policy.correction, proto::OFF_POLICY_TRUNCATE);
  EXPECT_EQ(spec.rollout.max_new_tokens, 16);  // = data.max_response_length.
  EXPECT_DOUBLE_EQ(spec.rollout.temperature, 1.0);
  EXPECT_DOUBLE_EQ(spec.trainer.lr, 1e-6);
  EXPECT_DOUBLE_EQ(spec.trainer.grad_clip, 1.0);
  EXPECT_EQ(spec.sft.dir, "runs/grpo-arith/sft");
  EXPECT_TRUE(spec.logging.tensorboard);
  EXPECT_EQ(spec.actors.rollout.type, "RolloutWorker");
  EXPECT_EQ(spec.actors.rollout.max_restarts, 3);
  EXPECT_DOUBLE_EQ(spec.actors.reference.resources.cpu, 1);  // Not written: the kind's default.
  EXPECT_EQ(spec.actors.trainer.max_restarts, 0);
  EXPECT_EQ(spec.actors.critic.replicas, 0);
  EXPECT_EQ(spec.actors.replay_buffer.replicas, 1);
  EXPECT_EQ(spec.actors.checkpointer.type, "Checkpointer");

  // Locations of what was written; defaults point at their nearest written ancestor.
  EXPECT_EQ(spec.Where("algorithm.n"), "job.yaml:4:37");
  EXPECT_EQ(spec.Where("actors.rollout.resources.CPU"), "job.yaml:7:45");
  EXPECT_EQ(spec.Where("actors.rollout.max_restarts"), "job.yaml:7:3");
  EXPECT_EQ(spec.Where("sft.steps"), "job.yaml");
  EXPECT_EQ(spec.ErrorAt("algorithm.n", "too many").message(),
            "job.yaml:4:37: algorithm.n: too many");
}

TEST(JobSpec, DerivedDefaultsFollowTheRunName) {
  const JobSpec spec = Parse(kBase);
  EXPECT_EQ(spec.logging.dir, "runs/t");
  EXPECT_EQ(spec.actors.checkpointer.dir, "runs/t/ckpt");
  EXPECT_EQ(spec.sft.dir, "runs/t/sft");
  EXPECT_EQ(spec.model.init, ModelInit::kRandom);
}

TEST(JobSpec, AnEmptySectionMeansDefaultsAndAWrittenResourcesMapIsTheWholeRequest) {
  const JobSpec spec = Parse(absl::StrCat(kBase, R"(actors:
  reference:
  trainer: {resources: {GPU: 1, memory: 4GiB, custom: {tpu_slice: 2}}}
  rollout: {resources: {memory: 512MB}}
)"));
  EXPECT_EQ(spec.actors.reference.replicas, 1);
  EXPECT_DOUBLE_EQ(spec.actors.reference.resources.cpu, 1);
  EXPECT_DOUBLE_EQ(spec.actors.trainer.resources.cpu, 0);  // Not named, so 0.
  EXPECT_DOUBLE_EQ(spec.actors.trainer.resources.gpu, 1);
  EXPECT_DOUBLE_EQ(spec.actors.trainer.resources.memory, 4.0 * 1024 * 1024 * 1024);
  EXPECT_EQ(spec.actors.trainer.resources.AsMap(),
            (std::map<std::string, double>{
                {"GPU", 1}, {"memory", 4.0 * 1024 * 1024 * 1024}, {"tpu_slice", 2}}));
  EXPECT_DOUBLE_EQ(spec.actors.rollout.resources.memory, 512e6);
}

TEST(JobSpec, ModelInitTakesAPathAndThenModelConfigIsOptional) {
  const JobSpec spec = Parse(R"(name: t
model: {init: ckpt/step_20}
data: {task: arithmetic}
trainer: {total_steps: 10}
)");
  EXPECT_EQ(spec.model.init, ModelInit::kPath);
  EXPECT_EQ(spec.model.init_path, "ckpt/step_20");
  EXPECT_EQ(spec.model.config, "");
}

// ------------------------------------------------------------------------------------------------
// Errors: each names FILE:LINE:COL and the key path
// ------------------------------------------------------------------------------------------------

TEST(JobSpec, AWrongTypeNamesTheLineColumnAndKeyPath) {
  EXPECT_EQ(ParseError(absl::StrCat(kBase, R"(algorithm:
  adv_estimator: grpo
  n: eight
)")),
            R"(job.yaml:7:6: algorithm.n: expected a positive integer, got "eight")");
  EXPECT_EQ(
      ParseError(absl::StrCat(kBase, "algorithm: {n: \"8\"}\n")),
      R"(job.yaml:5:16: algorithm.n: expected a positive integer, got "8" (a quoted string))");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "logging: {tensorboard: yes}\n")),
            R"(job.yaml:5:24: logging.tensorboard: expected true or false, got "yes")");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "algorithm: [1, 2]\n")),
            "job.yaml:5:12: algorithm: expected a map, got a list");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {trainer: {config: 3}}\n")),
            "job.yaml:5:28: actors.trainer.config: expected a map, got 3");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "algorithm: {adv_estimator: ppo}\n")),
            "job.yaml:5:28: algorithm.adv_estimator: expected one of grpo, gae, rloo, "
            "reinforce_plus_plus, reinforce_plus_plus_baseline, got \"ppo\" "
            "(PPO's estimator is called gae, as in verl)");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "algorithm: {kl: {type: k4}}\n")),
            "job.yaml:5:24: algorithm.kl.type: expected one of k1, k2, k3, got \"k4\" (did you "
            "mean \"k1\"?)");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {trainer: {resources: {memory: lots}}}\n")),
            "job.yaml:5:40: actors.trainer.resources.memory: expected a non-negative number of "
            "bytes or a size such as \"512MiB\" or \"4GB\", got \"lots\"");
  EXPECT_EQ(ParseError("- name: t\n"),
            "job.yaml:1:1: expected a map of sections (name, model, data, algorithm, ...), got a "
            "list");
}

TEST(JobSpec, UnknownKeysAreErrorsWithADidYouMean) {
  EXPECT_EQ(ParseError(absl::StrCat(kBase, R"(actors:
  rollout:
    replica: 2
)")),
            R"(job.yaml:7:5: actors.rollout.replica: unknown key (did you mean "replicas"?))");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "trainr: {seed: 1}\n")),
            R"(job.yaml:5:1: trainr: unknown key (did you mean "trainer"?))");
  // A key of another section, and verl's spelling of a key.
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "algorithm: {lr: 0.1}\n")),
            "job.yaml:5:13: algorithm.lr: unknown key (did you mean trainer.lr?)");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "rollout: {n: 4}\n")),
            "job.yaml:5:11: rollout.n: unknown key (did you mean algorithm.n?)");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {reward: {every_steps: 4}}\n")),
            "job.yaml:5:19: actors.reward.every_steps: unknown key (did you mean "
            "actors.checkpointer.every_steps?)");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "algorithm: {clip_ratio: 0.2}\n")),
            "job.yaml:5:13: algorithm.clip_ratio: unknown key (verl's clip_ratio is "
            "algorithm.clip_eps here)");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {rollout: {resources: {cpu: 1}}}\n")),
            R"(job.yaml:5:32: actors.rollout.resources.cpu: unknown key (did you mean "CPU"?))");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "data_: 1\n")),
            "job.yaml:5:1: data_: unknown key (did you mean \"data\"?)");
}

TEST(JobSpec, AnUnknownTaskOrActorKindIsAnError) {
  EXPECT_EQ(ParseError(R"(name: t
model: {config: m.json}
data: {task: arithmetc, digits: 3}
trainer: {total_steps: 10}
actors: {critc: {replicas: 1}}
)"),
            "job.yaml:3:14: data.task: unknown task \"arithmetc\" (did you mean \"arithmetic\"?); "
            "registered tasks: arithmetic\n"
            "job.yaml:5:10: actors.critc: unknown actor kind (did you mean \"critic\"?); known: "
            "checkpointer, critic, reference, replay_buffer, reward, rollout, trainer");
}

TEST(JobSpec, OutOfRangeValuesAreAllReportedInFileOrder) {
  EXPECT_EQ(
      ParseError(R"(name: t
model: {config: m.json}
data: {task: arithmetic, digits: 7}
trainer: {total_steps: 10}
algorithm: {n: 0, clip_eps: 1.5}
async: {max_staleness: -1}
rollout: {top_p: 0}
actors:
  rollout: {resources: {CPU: -1, GPU: 0.5}}
  replay_buffer: {replicas: 2, max_restarts: -2}
)"),
      "job.yaml:3:34: data.digits: expected an integer in [1, 3], got 7\n"
      "job.yaml:5:16: algorithm.n: expected a positive integer, got 0\n"
      "job.yaml:5:29: algorithm.clip_eps: expected a number in (0, 1), got 1.5\n"
      "job.yaml:6:24: async.max_staleness: expected a non-negative integer, got -1\n"
      "job.yaml:7:18: rollout.top_p: expected a number in (0, 1], got 0\n"
      "job.yaml:9:30: actors.rollout.resources.CPU: expected a non-negative number, got -1\n"
      "job.yaml:9:39: actors.rollout.resources.GPU: expected a whole number of GPUs, got 0.5\n"
      "job.yaml:10:29: actors.replay_buffer.replicas: expected exactly 1, got 2\n"
      "job.yaml:10:46: actors.replay_buffer.max_restarts: expected an integer >= -1, got -2");
}

TEST(JobSpec, MissingRequiredKeysAreNamed) {
  EXPECT_EQ(ParseError("model: {init: random}\n"),
            "job.yaml: name: missing required key\n"
            "job.yaml: data.task: missing required key (or data.train_files for a dataset)\n"
            "job.yaml: trainer.total_steps: missing required key\n"
            "job.yaml:1:1: model.config: missing required key");
  EXPECT_EQ(ParseError(""),
            "job.yaml: name: missing required key\n"
            "job.yaml: model.config: missing required key\n"
            "job.yaml: data.task: missing required key (or data.train_files for a dataset)\n"
            "job.yaml: trainer.total_steps: missing required key");
}

TEST(JobSpec, RulesBetweenKeysAreCheckedWithTheLocationOfTheKeyToChange) {
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "algorithm: {n: 1}\n")),
            "job.yaml:5:16: algorithm.n: adv_estimator grpo needs at least 2 responses per prompt "
            "to form a group, got 1");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {reference: {replicas: 0}}\n")),
            "job.yaml:5:32: actors.reference.replicas: algorithm.kl.coef > 0 needs a reference "
            "model (replicas >= 1); set kl.coef: 0 to run without one");
  EXPECT_EQ(ParseError(absl::StrCat(kBase,
                                    "algorithm: {adv_estimator: gae}\n"
                                    "actors: {critic: {replicas: 0}}\n")),
            "job.yaml:6:29: actors.critic.replicas: adv_estimator gae needs a critic: set "
            "actors.critic.replicas >= 1");
  EXPECT_EQ(ParseError(absl::StrCat(kBase,
                                    "algorithm: {kl: {coef: 0}, use_kl_in_reward: true}\n"
                                    "actors: {reference: {replicas: 0}}\n")),
            "job.yaml:6:32: actors.reference.replicas: algorithm.use_kl_in_reward needs a "
            "reference model (replicas >= 1)");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "algorithm: {kl_ctrl: {kl_coef: 0.1}}\n")),
            "job.yaml:5:32: algorithm.kl_ctrl.kl_coef: the KL controller sets the KL in the "
            "reward: it needs algorithm.use_kl_in_reward: true");
  EXPECT_THAT(ParseError(absl::StrCat(
                  kBase, "algorithm: {use_kl_in_reward: true, kl_ctrl: {target_kl: 0.1}}\n")),
              HasSubstr("algorithm.kl_ctrl.target_kl: only the adaptive controller has a target"));
  EXPECT_THAT(ParseError(absl::StrCat(kBase, "algorithm: {kl_ctrl: {type: adaptiv}}\n")),
              HasSubstr("algorithm.kl_ctrl.type: expected one of fixed, adaptive"));
  EXPECT_THAT(ParseError(kBase, {"trainer.mini_batch_size=2000"}),
              HasSubstr("trainer.mini_batch_size: larger than a step's batch "
                        "(data.train_batch_size = 1024 prompts), got 2000"));
  EXPECT_THAT(ParseError(kBase, {"trainer.ppo_epochs=0"}), HasSubstr("trainer.ppo_epochs"));
  EXPECT_THAT(ParseError(kBase, {"trainer.critic_warmup=10"}),
              HasSubstr("trainer.critic_warmup: must be less than trainer.total_steps (10), got "
                        "10"));
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "rollout: {max_new_tokens: 600}\n")),
            "job.yaml:5:27: rollout.max_new_tokens: 600 exceeds data.max_response_length (512)");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "name: x\n")),
            "job.yaml:5:1: name: duplicate key (first at job.yaml:1:1)");
  EXPECT_THAT(
      ParseError(absl::StrCat(kBase, "reward: {overlong_buffer: {enable: true, len: 512}}\n")),
      HasSubstr("reward.overlong_buffer.len: must be in [1, data.max_response_length) = "
                "[1, 512) when overlong_buffer is enabled, got 512"));
  EXPECT_THAT(ParseError(absl::StrCat(kBase, "reward: {overlong_buffer: {enable: true}}\n")),
              HasSubstr("reward.overlong_buffer.len: must be in [1, "));
  EXPECT_THAT(
      ParseError(absl::StrCat(kBase, "algorithm: {filter_groups: {max_num_gen_batches: -1}}\n")),
      HasSubstr("algorithm.filter_groups.max_num_gen_batches"));
  EXPECT_THAT(ParseError(absl::StrCat(kBase, "algorithm: {policy_loss: gpso}\n")),
              HasSubstr("algorithm.policy_loss: expected one of vanilla, gspo, got \"gpso\""));
  // Fine: no KL term, so no reference model needed; gae with a critic.
  Parse(absl::StrCat(kBase, "algorithm: {kl: {coef: 0}}\nactors: {reference: {replicas: 0}}\n"));
  Parse(absl::StrCat(kBase,
                     "algorithm: {adv_estimator: gae, n: 1}\nactors: {critic: {replicas: 1}}\n"));
}

TEST(JobSpec, MalformedYamlIsReportedWithLineAndColumn) {
  const std::string message = ParseError("name: t\nmodel: {config: m.json\ndata: {task: x}\n");
  EXPECT_THAT(message, StartsWith("job.yaml:3:"));
  EXPECT_THAT(message, HasSubstr(": malformed YAML: "));
  EXPECT_THAT(ParseError("name: t\n  bad: indent\n"), StartsWith("job.yaml:2:6: malformed YAML: "));
  EXPECT_EQ(ParseError("name: a\n---\nname: b\n"),
            "job.yaml: expected one YAML document, found 2 (--- separators)");
  const std::string recursive = ParseError("a: &x {b: *x}\n");
  EXPECT_THAT(recursive, StartsWith("job.yaml:1:4: a.b.b.b.b.b."));
  EXPECT_THAT(recursive, HasSubstr(".b: nested deeper than 64 levels (a recursive alias?)"));
}

// ------------------------------------------------------------------------------------------------
// Anchors, aliases and merge keys
// ------------------------------------------------------------------------------------------------

TEST(JobSpec, AnchorsAliasesAndMergeKeysWork) {
  const JobSpec spec = Parse(R"(name: anchors
x-cpu: &cpu {CPU: 0.5}
model: {config: m.json, init: random}
data: {task: arithmetic}
trainer: {total_steps: 10}
actors:
  rollout: &worker {replicas: 2, resources: *cpu, max_restarts: 5}
  reward: *worker
  reference: {<<: *worker, replicas: 1}
  trainer: {<<: [{resources: {CPU: 1}}, *worker], replicas: 1}
)");
  EXPECT_EQ(spec.actors.rollout.replicas, 2);
  EXPECT_DOUBLE_EQ(spec.actors.rollout.resources.cpu, 0.5);
  EXPECT_EQ(spec.actors.reward.replicas, 2);
  EXPECT_EQ(spec.actors.reward.max_restarts, 5);
  EXPECT_EQ(spec.actors.reference.replicas, 1);  // The explicit key wins over the merged one.
  EXPECT_DOUBLE_EQ(spec.actors.reference.resources.cpu, 0.5);
  EXPECT_EQ(spec.actors.reference.max_restarts, 5);
  EXPECT_DOUBLE_EQ(spec.actors.trainer.resources.cpu, 1);  // The first merge source wins.
  EXPECT_EQ(spec.actors.trainer.max_restarts, 5);

  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {rollout: {<<: 3}}\n")),
            "job.yaml:5:24: actors.rollout.<<: a merge key takes a map or a list of maps");
}

TEST(JobSpec, AnOverrideThroughAnAliasDoesNotChangeTheAnchor) {
  const JobSpec spec = Parse(absl::StrCat(kBase, R"(actors:
  rollout: &w {replicas: 2, resources: {CPU: 1}}
  reward: *w
)"),
                             {"actors.reward.replicas=1", "actors.reward.resources.CPU=0.25"});
  EXPECT_EQ(spec.actors.rollout.replicas, 2);
  EXPECT_DOUBLE_EQ(spec.actors.rollout.resources.cpu, 1);
  EXPECT_EQ(spec.actors.reward.replicas, 1);
  EXPECT_DOUBLE_EQ(spec.actors.reward.resources.cpu, 0.25);
}

// ------------------------------------------------------------------------------------------------
// Overrides
// ------------------------------------------------------------------------------------------------

TEST(JobSpec, OverridesSetScalarsNestedKeysAndWholeMaps) {
  const JobSpec spec =
      Parse(kIssueExample,
            {"algorithm.n=4", "trainer.total_steps=50", "actors.rollout.replicas=3",
             "actors.trainer.config.lr=3e-4", "actors.reward.resources={CPU: 2, memory: 1GiB}",
             "algorithm.kl={coef: 0.0}", "logging.dir=/tmp/r"});
  EXPECT_EQ(spec.algorithm.n, 4);
  EXPECT_EQ(spec.trainer.total_steps, 50);
  EXPECT_EQ(spec.trainer.seed, 1);  // Untouched siblings stay.
  EXPECT_EQ(spec.actors.rollout.replicas, 3);
  EXPECT_DOUBLE_EQ(spec.actors.rollout.resources.cpu, 1);
  EXPECT_EQ(spec.actors.trainer.config, nlohmann::json::parse(R"({"lr": 0.0003})"));
  EXPECT_DOUBLE_EQ(spec.actors.reward.resources.cpu, 2);
  EXPECT_DOUBLE_EQ(spec.actors.reward.resources.memory, 1024.0 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(spec.algorithm.kl.coef, 0.0);
  EXPECT_EQ(spec.algorithm.kl.type, proto::KL_K3);  // The replaced map's other key: default.
  EXPECT_EQ(spec.logging.dir, "/tmp/r");
  EXPECT_EQ(spec.Where("algorithm.n"), "override algorithm.n=4");
  EXPECT_EQ(spec.Where("algorithm.clip_eps"), "job.yaml:4:50");
  EXPECT_EQ(spec.overrides.size(), 7u);
}

TEST(JobSpec, OverridesCreateSectionsAndMergeIntoFreeFormConfig) {
  const JobSpec spec = Parse(absl::StrCat(kBase, R"(actors:
  trainer: {config: {lr: 1e-4, betas: [0.9, 0.95]}}
)"),
                             {"actors.trainer.config.lr=3e-4", "actors.trainer.config.opt.eps=1e-8",
                              "rollout.temperature=0", "name=renamed"});
  EXPECT_EQ(spec.actors.trainer.config,
            nlohmann::json::parse(R"({"lr": 0.0003, "betas": [0.9, 0.95], "opt": {"eps": 1e-8}})"));
  EXPECT_DOUBLE_EQ(spec.rollout.temperature, 0);
  EXPECT_EQ(spec.name, "renamed");
  EXPECT_EQ(spec.logging.dir, "runs/renamed");
}

TEST(JobSpec, InvalidOverridesNameTheOverride) {
  EXPECT_EQ(ParseError(kBase, {"algorithm.nn=4"}),
            R"(override algorithm.nn=4: algorithm.nn: unknown key (did you mean "n"?))");
  EXPECT_EQ(ParseError(kBase, {"algorithm.n=eight"}),
            R"(override algorithm.n=eight: algorithm.n: expected a positive integer, got "eight")");
  EXPECT_EQ(ParseError(kBase, {"actors.rollout.resources={CPU: 2, GPUU: 1}"}),
            "override actors.rollout.resources={CPU: 2, GPUU: 1}: actors.rollout.resources.GPUU: "
            "unknown key (did you mean \"GPU\"?)");
  EXPECT_EQ(ParseError(kBase, {"actors.learner.replicas=1"}),
            "override actors.learner.replicas=1: actors.learner: unknown actor kind; known: "
            "checkpointer, critic, reference, replay_buffer, reward, rollout, trainer");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "algorithm: {n: 4}\n"), {"algorithm.n.x=1"}),
            "override algorithm.n.x=1: algorithm.n is a scalar (at job.yaml:5:16), not a map");
  EXPECT_EQ(ParseError(kBase, {"n4"}),
            "override \"n4\": expected KEY.PATH=VALUE, e.g. algorithm.n=4");
  EXPECT_EQ(ParseError(kBase, {"=4"}),
            "override \"=4\": expected KEY.PATH=VALUE, e.g. algorithm.n=4");
  EXPECT_EQ(ParseError(kBase, {"a..b=1"}), "override a..b=1: empty key in \"a..b\"");
  EXPECT_THAT(ParseError(kBase, {"algorithm.n=[1,"}),
              StartsWith("override algorithm.n=[1,: malformed value: "));
  // Errors in the file and in overrides together: the file's first.
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "async: {max_staleness: x}\n"), {"trainer.seed=-1"}),
            "job.yaml:5:24: async.max_staleness: expected a non-negative integer, got \"x\"\n"
            "override trainer.seed=-1: trainer.seed: expected a non-negative integer, got -1");
}

// ------------------------------------------------------------------------------------------------
// Output
// ------------------------------------------------------------------------------------------------

TEST(JobSpec, ToYamlRoundTripsThroughParse) {
  const std::string yaml = absl::StrCat(kIssueExample, R"(rollout: {top_k: 5}
sft: {lr: 0.001}
)");
  const JobSpec spec = Parse(yaml, {"actors.trainer.config={lr: 1e-4, name: \"true\", empty: \"\", "
                                    "version: \"1.5\", list: [1, two, {x: null}], word: yes, "
                                    "nested: {a: {b: 1.0}}, big: 12345678901234}",
                                    "algorithm.clip_eps_high=0.28", "trainer.lr=3e-7"});
  EXPECT_EQ(spec.actors.trainer.config, nlohmann::json::parse(R"({
      "lr": 0.0001, "name": "true", "empty": "", "version": "1.5", "list": [1, "two", {"x": null}],
      "word": "yes", "nested": {"a": {"b": 1.0}}, "big": 12345678901234})"));
  EXPECT_TRUE(spec.actors.trainer.config["nested"]["a"]["b"].is_number_float());

  const std::string out = ToYaml(spec);
  EXPECT_THAT(out, StartsWith("# Resolved troupe job spec, from job.yaml with overrides: "));
  EXPECT_THAT(out, HasSubstr("\n  lr: 3.0e-07\n"));
  EXPECT_THAT(out, HasSubstr("\n  clip_eps_high: 0.28\n"));

  absl::StatusOr<JobSpec> again = ParseJobSpec(out, "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << out;
  EXPECT_EQ(ToJson(*again), ToJson(spec));
  EXPECT_TRUE(again->actors.trainer.config["nested"]["a"]["b"].is_number_float());
  EXPECT_EQ(ToYaml(*again).substr(ToYaml(*again).find('\n')), out.substr(out.find('\n')));

  // JSON is YAML too: the recorded JSON parses back to the same spec.
  absl::StatusOr<JobSpec> from_json = ParseJobSpec(ToJson(spec), "resolved.json");
  ASSERT_TRUE(from_json.ok()) << from_json.status();
  EXPECT_EQ(ToJson(*from_json), ToJson(spec));
}

// trainer.activation_checkpointing: off unless written, listed in the resolved spec only when on
// (so the resolved specs of runs without it are unchanged), a boolean, and verl's spelling points
// to it.
TEST(JobSpec, ActivationCheckpointingIsABooleanListedOnlyWhenOn) {
  const JobSpec off = Parse(kBase);
  EXPECT_FALSE(off.trainer.activation_checkpointing);
  EXPECT_THAT(ToYaml(off), Not(HasSubstr("activation_checkpointing")));

  const JobSpec on = Parse(kBase, {"trainer.activation_checkpointing=true"});
  EXPECT_TRUE(on.trainer.activation_checkpointing);
  const std::string out = ToYaml(on);
  EXPECT_THAT(out, HasSubstr("\n  activation_checkpointing: true\n"));
  absl::StatusOr<JobSpec> again = ParseJobSpec(out, "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << out;
  EXPECT_TRUE(again->trainer.activation_checkpointing);
  EXPECT_EQ(ToJson(*again), ToJson(on));

  EXPECT_THAT(ParseError(kBase, {"trainer.activation_checkpointing=sometimes"}),
              HasSubstr("trainer.activation_checkpointing: "));
  EXPECT_EQ(ParseError("name: t\nmodel: {config: m.json, init: random}\ndata: {task: arithmetic}\n"
                       "trainer: {total_steps: 10, enable_gradient_checkpointing: true}\n"),
            "job.yaml:4:28: trainer.enable_gradient_checkpointing: unknown key (verl's "
            "enable_gradient_checkpointing is trainer.activation_checkpointing here)");
}

// Recipe ppo runs gae with a critic unless the spec says otherwise; its keys round-trip.
TEST(JobSpec, RecipePpoDefaultsToGaeWithACriticAndRoundTrips) {
  const JobSpec spec =
      Parse(absl::StrCat(kBase, R"(recipe: ppo
algorithm: {n: 2, gamma: 0.99, lam: 0.95, use_kl_in_reward: true,
  kl_ctrl: {type: adaptive, kl_coef: 0.02, target_kl: 0.05, horizon: 500}}
)"),
            {"trainer.ppo_epochs=2", "trainer.mini_batch_size=16", "trainer.critic_warmup=3"});
  EXPECT_EQ(spec.algorithm.adv_estimator, proto::ADV_ESTIMATOR_GAE);
  EXPECT_EQ(spec.actors.critic.replicas, 1);
  EXPECT_EQ(spec.algorithm.kl_ctrl.type, KlCtrlType::kAdaptive);
  EXPECT_EQ(spec.trainer.ppo_epochs, 2);
  absl::StatusOr<JobSpec> again = ParseJobSpec(ToYaml(spec), "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << ToYaml(spec);
  EXPECT_EQ(ToJson(*again), ToJson(spec));
  EXPECT_EQ(again->algorithm.kl_ctrl.target_kl, 0.05);
  EXPECT_EQ(again->algorithm.kl_ctrl.horizon, 500);
  EXPECT_EQ(again->trainer.critic_warmup, 3);
  EXPECT_EQ(again->trainer.mini_batch_size, 16);
  // The default recipe keeps grpo and no critic.
  const JobSpec grpo = Parse(kBase);
  EXPECT_EQ(grpo.algorithm.adv_estimator, proto::ADV_ESTIMATOR_GRPO);
  EXPECT_EQ(grpo.actors.critic.replicas, 0);
}

// The group recipe's options (issue 17) survive the resolved spec: ToYaml, then Parse.
TEST(JobSpec, TheGroupRecipeOptionsRoundTrip) {
  const JobSpec spec =
      Parse(absl::StrCat(kBase, R"(algorithm: {adv_estimator: reinforce_plus_plus, gamma: 0.9,
  policy_loss: gspo, filter_groups: {enable: true, max_num_gen_batches: 3}}
reward: {overlong_buffer: {enable: true, len: 64, penalty_factor: 0.5}}
)"));
  EXPECT_EQ(spec.algorithm.adv_estimator, proto::ADV_ESTIMATOR_REINFORCE_PLUS_PLUS);
  EXPECT_EQ(spec.algorithm.policy_loss, proto::POLICY_LOSS_GSPO);
  EXPECT_TRUE(spec.algorithm.filter_groups.enable);
  EXPECT_EQ(spec.algorithm.filter_groups.max_num_gen_batches, 3);
  EXPECT_EQ(spec.reward.overlong_buffer.len, 64);
  EXPECT_EQ(spec.reward.overlong_buffer.penalty_factor, 0.5);
  absl::StatusOr<JobSpec> again = ParseJobSpec(ToYaml(spec), "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << ToYaml(spec);
  EXPECT_EQ(ToJson(*again), ToJson(spec));
  EXPECT_EQ(again->algorithm.gamma, 0.9);
  EXPECT_TRUE(again->reward.overlong_buffer.enable);
}

TEST(JobSpec, ThePromptSamplerIsReadCheckedAndRoundTrips) {
  EXPECT_FALSE(Parse(kBase).data.sampler.prioritized);
  const JobSpec spec =
      Parse(kBase, {"data.sampler.type=prioritized", "data.sampler.uniform_weight=0.25"});
  EXPECT_TRUE(spec.data.sampler.prioritized);
  EXPECT_EQ(spec.data.sampler.uniform_weight, 0.25);
  absl::StatusOr<JobSpec> again = ParseJobSpec(ToYaml(spec), "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << ToYaml(spec);
  EXPECT_TRUE(again->data.sampler.prioritized);
  EXPECT_EQ(again->data.sampler.uniform_weight, 0.25);
  EXPECT_EQ(ToJson(*again), ToJson(spec));

  EXPECT_THAT(ParseError(kBase, {"data.sampler.type=priority"}),
              AllOf(HasSubstr("data.sampler.type"), HasSubstr("prioritized")));
  EXPECT_THAT(ParseError(kBase, {"data.sampler.type=prioritized", "data.sampler.uniform_weight=0"}),
              HasSubstr("data.sampler.uniform_weight: expected a number in (0, 1]"));
  // A weight without prioritized sampling would change nothing: refused.
  EXPECT_THAT(ParseError(kBase, {"data.sampler.uniform_weight=0.5"}),
              AllOf(HasSubstr("data.sampler.uniform_weight"), HasSubstr("prioritized only")));
  // Offline dpo draws its pairs from data.preference_files: no prompts to sample.
  EXPECT_THAT(ParseError(kBase, {"recipe=dpo", "data.preference_files=[p.jsonl]",
                                 "data.sampler.type=prioritized"}),
              HasSubstr("data.sampler.type: offline dpo trains on data.preference_files"));
}

TEST(JobSpec, GenBatchSizeIsForAsynchronousRunsAndRoundTrips) {
  EXPECT_EQ(Parse(kBase).data.gen_batch_size, 0);  // = train_batch_size
  const JobSpec spec = Parse(kBase, {"async.max_staleness=1", "data.gen_batch_size=96"});
  EXPECT_EQ(spec.data.gen_batch_size, 96);
  absl::StatusOr<JobSpec> again = ParseJobSpec(ToYaml(spec), "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << ToYaml(spec);
  EXPECT_EQ(again->data.gen_batch_size, 96);
  EXPECT_THAT(ParseError(kBase, {"data.gen_batch_size=96"}),
              HasSubstr("data.gen_batch_size: sets the prompts of a generation round of an "
                        "asynchronous run"));
  EXPECT_THAT(ParseError(kBase, {"async.max_staleness=1", "data.gen_batch_size=0"}),
              HasSubstr("data.gen_batch_size: expected a positive integer"));
}

TEST(JobSpec, ToYamlOfAModelInitPathWithoutAConfigParsesBack) {
  // What `troupe run` records for such a job (config: "") is a spec troupe can run again.
  const JobSpec spec = Parse(R"(name: t
model: {init: ckpt/step_20}
data: {task: arithmetic}
trainer: {total_steps: 10}
)");
  const std::string out = ToYaml(spec);
  absl::StatusOr<JobSpec> again = ParseJobSpec(out, "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << out;
  EXPECT_EQ(ToJson(*again), ToJson(spec));
  EXPECT_EQ(again->model.config, "");
  // A null config is "not set" too; without an init path it stays required.
  EXPECT_TRUE(ParseJobSpec(out, "resolved.yaml", {"model.config="}).ok());
  EXPECT_EQ(ParseError(kBase, {"model.config=\"\""}),
            "override model.config=\"\": model.config: expected a non-empty string, got \"\"");
}

// A dataset job: data.train_files instead of data.task, and a reward section.
constexpr char kDatasetJob[] = R"(name: d
model: {config: m.json, init: random}
data:
  train_files: [a.jsonl, b.jsonl.gz]
  val_files: v.jsonl
  prompt_key: question
  answer_key: meta.answer
  default_data_source: arithmetic
  shuffle: false
  filter_overlong_prompts: true
  truncation: left
reward: {name: arithmetic, weights: [0.5], config: {arithmetic: {}}}
trainer: {total_steps: 10}
)";

TEST(JobSpecData, ReadsDatasetKeysAndTheRewardSection) {
  const JobSpec spec = Parse(kDatasetJob);
  EXPECT_EQ(spec.data.task, "");
  EXPECT_EQ(spec.data.train_files, (std::vector<std::string>{"a.jsonl", "b.jsonl.gz"}));
  EXPECT_EQ(spec.data.val_files, std::vector<std::string>{"v.jsonl"});
  EXPECT_EQ(spec.data.prompt_key, "question");
  EXPECT_EQ(spec.data.answer_key, "meta.answer");
  EXPECT_EQ(spec.data.data_source_key, "data_source");
  EXPECT_EQ(spec.data.default_data_source, "arithmetic");
  EXPECT_FALSE(spec.data.shuffle);
  EXPECT_TRUE(spec.data.filter_overlong_prompts);
  EXPECT_EQ(spec.data.truncation, Truncation::kLeft);
  EXPECT_EQ(spec.reward.names, std::vector<std::string>{"arithmetic"});
  EXPECT_EQ(spec.reward.weights, std::vector<double>{0.5});
  EXPECT_EQ(spec.reward.config, nlohmann::json::parse(R"({"arithmetic": {}})"));
  // Defaults of a task job: verl's keys, shuffle, errors for overlong prompts.
  const JobSpec task = Parse(kBase);
  EXPECT_TRUE(task.data.shuffle);
  EXPECT_EQ(task.data.truncation, Truncation::kError);
  EXPECT_EQ(task.data.answer_key, "reward_model.ground_truth");
  EXPECT_TRUE(task.reward.names.empty());
}

TEST(JobSpecData, ADatasetJobRoundTripsThroughToYaml) {
  JobSpec spec = Parse(kDatasetJob);
  const std::string out = ToYaml(spec);
  absl::StatusOr<JobSpec> again = ParseJobSpec(out, "resolved.yaml");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << out;
  EXPECT_EQ(again->data.train_files, spec.data.train_files);
  EXPECT_EQ(again->data.truncation, Truncation::kLeft);
  EXPECT_EQ(again->reward.weights, spec.reward.weights);
  EXPECT_EQ(ToYaml(*again).substr(ToYaml(*again).find('\n')), out.substr(out.find('\n')));
}

TEST(JobSpecData, ExactlyOneOfTaskAndTrainFiles) {
  EXPECT_THAT(ParseError("name: t\nmodel: {config: m.json, init: random}\n"
                         "data: {task: arithmetic, train_files: a.jsonl}\n"
                         "trainer: {total_steps: 10}\n"),
              HasSubstr("job.yaml:3:39: data.train_files: give data.task or data.train_files, "
                        "not both"));
  EXPECT_THAT(ParseError("name: t\nmodel: {config: m.json, init: random}\n"
                         "data: {train_batch_size: 4}\ntrainer: {total_steps: 10}\n"),
              HasSubstr("data.task: missing required key (or data.train_files for a dataset)"));
  // Dataset keys are refused for a task job, which has no records.
  EXPECT_THAT(ParseError(kBase, {"data.truncation=left"}),
              HasSubstr("override data.truncation=left: data.truncation: reads records of "
                        "data.train_files"));
  // A dataset job's sft warm start needs its own records, a tokenizer and validation records.
  const std::string sft_error = ParseError(absl::StrCat(kDatasetJob), {"model.init=sft"});
  EXPECT_THAT(sft_error, HasSubstr("model.init: the sft warm start of a dataset job trains on "
                                   "sft.train_files"));
  EXPECT_THAT(sft_error, HasSubstr("needs model.tokenizer"));
  // sft.train_files belongs to a dataset job's sft warm start only.
  EXPECT_THAT(ParseError(kBase, {"sft.train_files=[s.jsonl]"}),
              HasSubstr("sft.train_files: a task's sft warm start trains on the task's own "
                        "supervised data"));
  EXPECT_THAT(ParseError(kDatasetJob, {"sft.response_key=answer"}),
              HasSubstr("sft.response_key: read by the sft warm start only"));
}

TEST(JobSpecData, BadDatasetAndRewardValuesAreNamed) {
  EXPECT_THAT(ParseError(kDatasetJob, {"data.train_files=[]"}),
              HasSubstr("data.train_files: expected a path or a non-empty list of paths"));
  EXPECT_THAT(ParseError(kDatasetJob, {"data.truncation=middle"}),
              HasSubstr("data.truncation: expected one of error, left, right, got \"middle\""));
  const std::string unknown = ParseError(kDatasetJob, {"reward.name=[arithmetik]"});
  EXPECT_THAT(unknown, HasSubstr("reward.name: unknown reward \"arithmetik\" (did you mean "
                                 "\"arithmetic\"?); registered rewards: arithmetic"));
  EXPECT_THAT(ParseError(kDatasetJob, {"reward.weights=[1, 2]"}),
              HasSubstr("reward.weights: 2 weights for 1 reward names"));
  EXPECT_THAT(ParseError(kDatasetJob, {"reward.weights=[-1]"}),
              HasSubstr("reward.weights: expected a non-empty list of numbers >= 0"));
  EXPECT_THAT(ParseError(kDatasetJob, {"reward.config={other: {}}"}),
              HasSubstr("reward.config: config for \"other\", which is not in reward.name"));
}

TEST(JobSpecData, ValidateFilesNamesAMissingDataFile) {
  JobSpec spec = Parse(kDatasetJob);
  spec.model.config.clear();
  absl::Status s = ValidateFiles(spec);
  EXPECT_THAT(s.message(), HasSubstr("job.yaml:4:3: data.train_files: file not found: a.jsonl"));
  EXPECT_THAT(s.message(), HasSubstr("data.val_files: file not found: v.jsonl"));
  const std::vector<std::pair<std::string, std::string>> keys = PathKeys(spec);
  EXPECT_NE(std::find(keys.begin(), keys.end(),
                      std::pair<std::string, std::string>("data.train_files[1]", "b.jsonl.gz")),
            keys.end());
}

TEST(JobSpec, ToJsonHasEveryKeyWithTypedValues) {
  const nlohmann::json j = nlohmann::json::parse(ToJson(Parse(kIssueExample)));
  EXPECT_EQ(j["name"], "grpo-arith");
  EXPECT_EQ(j["algorithm"]["n"], 8);
  EXPECT_EQ(j["algorithm"]["kl"]["type"], "k3");
  EXPECT_EQ(j["algorithm"]["loss_agg_mode"], "token-mean");
  EXPECT_EQ(j["data"]["digits"], 2);
  EXPECT_EQ(j["model"]["init"], "sft");
  EXPECT_EQ(j["actors"]["reward"]["resources"]["CPU"], 0.5);
  EXPECT_EQ(j["actors"]["checkpointer"]["keep"], 3);
  EXPECT_EQ(j["rollout"]["max_new_tokens"], 16);
  EXPECT_EQ(j["sft"]["dir"], "runs/grpo-arith/sft");
  EXPECT_EQ(j["logging"]["tensorboard"], true);
}

// ------------------------------------------------------------------------------------------------
// Checks against the filesystem and the cluster
// ------------------------------------------------------------------------------------------------

TEST(JobSpec, ValidateFilesReportsAMissingModelConfigAtItsLine) {
  const absl::Status status = ValidateFiles(Parse(kBase));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "job.yaml:2:17: model.config: file not found: m.json");
}

TEST(JobSpec, ValidateFilesChecksTheModelConfigAgainstTheSequenceLengths) {
  const std::string dir = TempDir("model_config");
  const std::string config = dir + "/tiny.json";
  WriteFile(config, R"({"model_type": "llama", "vocab_size": 64, "hidden_size": 128,
      "intermediate_size": 352, "num_hidden_layers": 4, "num_attention_heads": 4,
      "num_key_value_heads": 2, "max_position_embeddings": 256})");
  const std::string yaml = R"(name: t
model: {config: m.json, init: random}
data: {task: arithmetic, max_prompt_length: 200, max_response_length: 100}
trainer: {total_steps: 10}
)";
  EXPECT_EQ(std::string(ValidateFiles(Parse(yaml, {"model.config=" + config})).message()),
            absl::StrCat("job.yaml:3:71: data.max_response_length: data.max_prompt_length + "
                         "data.max_response_length = 300 exceeds max_position_embeddings = 256 of ",
                         config));
  const JobSpec fits = Parse(yaml, {"model.config=" + config, "data.max_prompt_length=156"});
  EXPECT_TRUE(ValidateFiles(fits).ok()) << ValidateFiles(fits);

  const std::string bad_config = dir + "/bad.json";
  WriteFile(bad_config, R"({"model_type": "llama"})");
  const absl::Status bad = ValidateFiles(Parse(kBase, {"model.config=" + bad_config}));
  EXPECT_THAT(std::string(bad.message()),
              StartsWith(absl::StrCat("override model.config=", bad_config, ": model.config: ")));
  EXPECT_THAT(std::string(bad.message()), HasSubstr("vocab_size"));
  EXPECT_EQ(std::string(ValidateFiles(Parse(kBase, {"model.config=" + dir})).message()),
            absl::StrCat("override model.config=", dir,
                         ": model.config: expected a config.json "
                         "file, got a directory: ",
                         dir));
}

TEST(JobSpec, ValidateFilesChecksAnInitDirectoryAndTheTokenizer) {
  const std::string dir = TempDir("init_dir");
  const std::string yaml = absl::StrCat(R"(name: t
model: {init: )",
                                        dir, R"(, tokenizer: missing/tokenizer.json}
data: {task: arithmetic}
trainer: {total_steps: 10}
)");
  EXPECT_EQ(std::string(ValidateFiles(Parse(yaml)).message()),
            absl::StrCat("job.yaml:2:15: model.init: no .safetensors file in ", dir, "\n",
                         "job.yaml:2:15: model.init: no config.json in ", dir,
                         ", and model.config is not set\n", "job.yaml:2:", 28 + dir.size(),
                         ": model.tokenizer: file not found: missing/tokenizer.json"));
  WriteCheckpoint(dir, ModelConfigJson(32, 2));
  WriteFile(dir + "/tokenizer.json", "{}");
  EXPECT_TRUE(ValidateFiles(Parse(yaml, {"model.tokenizer=" + dir + "/tokenizer.json"})).ok());
  EXPECT_EQ(
      std::string(ValidateFiles(Parse(yaml, {"model.init=nowhere", "model.tokenizer="})).message()),
      "override model.init=nowhere: model.init: not found: nowhere (expected sft, random, "
      "or a path)");
}

TEST(JobSpec, CheckResourcesFitNamesWhatNoNodeOrTheWholeClusterCanHold) {
  const JobSpec spec = Parse(kIssueExample);
  // rollout 2 x 1 + reward 0.5 + reference 1 (default) + trainer 1 = 4.5 CPUs.
  EXPECT_TRUE(CheckResourcesFit(spec, {{{"CPU", 8}}}).ok());
  EXPECT_TRUE(CheckResourcesFit(spec, {{{"CPU", 2}}, {{"CPU", 2.5}}}).ok());
  const absl::Status total = CheckResourcesFit(spec, {{{"CPU", 2}}});
  EXPECT_EQ(total.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(total.message()),
            "job.yaml:6:1: actors: the job needs 4.5 CPU in total (rollout 2 x 1, reward 1 x 0.5, "
            "reference 1 x 1, trainer 1 x 1), the cluster has 2");

  const JobSpec gpu = Parse(kIssueExample, {"actors.trainer.resources={CPU: 1, GPU: 1}"});
  EXPECT_EQ(
      std::string(CheckResourcesFit(gpu, {{{"CPU", 8}}, {{"CPU", 1}, {"GPU", 0}}}).message()),
      "override actors.trainer.resources={CPU: 1, GPU: 1}: actors.trainer.resources: fits "
      "on no node (GPU: requested 1, the largest node has 0)\n"
      "job.yaml:6:1: actors: the job needs 1 GPU in total (trainer 1 x 1), the cluster has 0");
  EXPECT_EQ(
      std::string(CheckResourcesFit(gpu, {{{"CPU", 8}}, {{"CPU", 0.5}, {"GPU", 1}}}).message()),
      "override actors.trainer.resources={CPU: 1, GPU: 1}: actors.trainer.resources: fits "
      "on no node (no single node has all of it at once)");
}

// ------------------------------------------------------------------------------------------------
// actors.<kind>.placement
// ------------------------------------------------------------------------------------------------

TEST(JobSpec, PlacementIsAbsentByDefaultAndThenLeftOutOfTheResolvedSpec) {
  const JobSpec spec = Parse(kIssueExample);
  for (const auto& [kind, group] : ActorGroups(spec)) {
    EXPECT_FALSE(group->placement.has_value()) << kind;
  }
  EXPECT_THAT(ToYaml(spec), Not(HasSubstr("placement")));
  EXPECT_THAT(ToJson(spec), Not(HasSubstr("placement")));
}

TEST(JobSpec, PlacementTakesTheFourStrategiesSpelledAsRaysAndRoundTrips) {
  const std::vector<std::pair<std::string, proto::PlacementStrategy>> strategies = {
      {"PACK", proto::PACK},
      {"SPREAD", proto::SPREAD},
      {"STRICT_PACK", proto::STRICT_PACK},
      {"STRICT_SPREAD", proto::STRICT_SPREAD}};
  for (const auto& [name, strategy] : strategies) {
    const JobSpec spec = Parse(kIssueExample, {absl::StrCat("actors.rollout.placement=", name)});
    ASSERT_TRUE(spec.actors.rollout.placement.has_value()) << name;
    EXPECT_EQ(*spec.actors.rollout.placement, strategy) << name;
    EXPECT_EQ(PlacementStrategyName(strategy), name);
    EXPECT_FALSE(spec.actors.trainer.placement.has_value()) << name;
    const std::string out = ToYaml(spec);
    EXPECT_THAT(out, HasSubstr(absl::StrCat("\n    placement: ", name, "\n"))) << out;
    absl::StatusOr<JobSpec> again = ParseJobSpec(out, "resolved.yaml");
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << out;
    EXPECT_EQ(again->actors.rollout.placement, strategy) << name;
    EXPECT_EQ(ToJson(*again), ToJson(spec));
  }
  // Written in the file, every role takes it.
  const JobSpec written = Parse(absl::StrCat(kBase, R"(actors:
  rollout: {replicas: 2, placement: SPREAD}
  trainer: {placement: STRICT_PACK}
  checkpointer: {resources: {CPU: 0.5}, placement: PACK}
)"));
  EXPECT_EQ(written.actors.rollout.placement, proto::SPREAD);
  EXPECT_EQ(written.actors.trainer.placement, proto::STRICT_PACK);
  EXPECT_EQ(written.actors.checkpointer.placement, proto::PACK);
  EXPECT_EQ(written.Where("actors.rollout.placement"), "job.yaml:6:37");
  EXPECT_EQ(Parse(kBase, {"actors.rollout.placement=SPREAD"}).Where("actors.rollout.placement"),
            "override actors.rollout.placement=SPREAD");
}

TEST(JobSpec, AnUnknownPlacementNamesTheKeyAndTheStrategies) {
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {rollout: {placement: ANYWHERE}}\n")),
            "job.yaml:5:31: actors.rollout.placement: expected one of PACK, SPREAD, STRICT_PACK, "
            "STRICT_SPREAD, got \"ANYWHERE\"");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {rollout: {placement: SPRED}}\n")),
            "job.yaml:5:31: actors.rollout.placement: expected one of PACK, SPREAD, STRICT_PACK, "
            "STRICT_SPREAD, got \"SPRED\" (did you mean \"SPREAD\"?)");
  // One spelling, as every enum key of the spec has: lowercase is refused, with the right one.
  EXPECT_EQ(ParseError(kBase, {"actors.trainer.placement=strict_pack"}),
            "override actors.trainer.placement=strict_pack: actors.trainer.placement: expected "
            "one of PACK, SPREAD, STRICT_PACK, STRICT_SPREAD, got \"strict_pack\" (did you mean "
            "\"STRICT_PACK\"? the strategies are spelled in capitals, as Ray's)");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {rollout: {placement: [SPREAD]}}\n")),
            "job.yaml:5:31: actors.rollout.placement: expected one of PACK, SPREAD, STRICT_PACK, "
            "STRICT_SPREAD, got a list");
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {rollout: {placment: SPREAD}}\n")),
            "job.yaml:5:20: actors.rollout.placment: unknown key (did you mean \"placement\"?)");
}

TEST(JobSpec, APlacementNeedsResourcesToReserve) {
  // The reward servers reserve nothing by default: a group of them would hold empty bundles.
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "actors: {reward: {placement: SPREAD}}\n")),
            "job.yaml:5:30: actors.reward.placement: a placement group reserves the role's "
            "resources, one bundle per replica, and actors.reward.resources reserves none (give "
            "it some, e.g. {CPU: 0.5})");
  Parse(absl::StrCat(kBase, "actors: {reward: {placement: SPREAD, resources: {CPU: 0.5}}}\n"));
  // A role with no replica starts no group.
  Parse(absl::StrCat(kBase, "actors: {critic: {placement: STRICT_SPREAD, resources: {}}}\n"));
}

TEST(JobSpec, CheckResourcesFitHoldsTheStrictPlacementsToTheNodes) {
  // rollout 2 x 1 CPU (+ reward 0.5, reference 1, trainer 1 elsewhere).
  const JobSpec pack = Parse(kIssueExample, {"actors.rollout.placement=STRICT_PACK"});
  EXPECT_TRUE(CheckResourcesFit(pack, {{{"CPU", 2}}, {{"CPU", 2.5}}}).ok());
  EXPECT_EQ(
      std::string(
          CheckResourcesFit(pack, {{{"CPU", 1.5}}, {{"CPU", 1.5}}, {{"CPU", 1.5}}}).message()),
      "override actors.rollout.placement=STRICT_PACK: actors.rollout.placement: STRICT_PACK "
      "puts the role's 2 replicas on one node, and no node has room for all of them");

  const JobSpec spread = Parse(kIssueExample, {"actors.rollout.placement=STRICT_SPREAD"});
  EXPECT_TRUE(CheckResourcesFit(spread, {{{"CPU", 2}}, {{"CPU", 2.5}}}).ok());
  EXPECT_EQ(std::string(CheckResourcesFit(spread, {{{"CPU", 8}}, {{"CPU", 0.5}}}).message()),
            "override actors.rollout.placement=STRICT_SPREAD: actors.rollout.placement: "
            "STRICT_SPREAD puts each of the role's 2 replicas on a different node, and 1 of the 2 "
            "nodes can hold one");
  // The soft strategies fall back to sharing nodes: one node will do.
  for (const char* soft : {"actors.rollout.placement=SPREAD", "actors.rollout.placement=PACK"}) {
    EXPECT_TRUE(CheckResourcesFit(Parse(kIssueExample, {soft}), {{{"CPU", 8}}}).ok()) << soft;
  }
}

// ------------------------------------------------------------------------------------------------
// Limits: a huge or hostile spec is refused before it costs anything
// ------------------------------------------------------------------------------------------------

// Bytes this process has read through read(2) and its kin so far ("rchar" in /proc/self/io).
int64_t BytesReadSoFar() {
  std::ifstream io("/proc/self/io");
  std::string key;
  int64_t value = 0;
  while (io >> key >> value) {
    if (key == "rchar:") return value;
  }
  ADD_FAILURE() << "no rchar: in /proc/self/io";
  return 0;
}

TEST(JobSpecLimits, A50MegabyteFileIsRefusedBeforeItIsRead) {
  const std::string path = TempDir("limits") + "/huge.yaml";
  {
    std::ofstream out(path, std::ios::binary);
    const std::string line = "# " + std::string(1021, 'x') + "\n";
    for (int i = 0; i < 50 * 1024; ++i) out << line;
  }
  absl::StatusOr<JobSpec> spec;
  const int64_t before = BytesReadSoFar();
  spec = LoadJobSpec(path);
  // At most 1 MiB + 1 byte of the 50 MiB (and a read buffer), whatever the machine's speed.
  EXPECT_LE(BytesReadSoFar() - before, int64_t{2} << 20);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(spec.status().message()),
            absl::StrCat(path, ": 52428800 bytes, more than the 1 MiB a job spec may have"));
}

TEST(JobSpecLimits, ANineMegabyteTextIsRefusedWithoutParsingIt) {
  // The quote never closes: a parse would report that, so the size refusal shows none was made.
  const std::string text = absl::StrCat(kBase, "x-pad: \"", std::string(9 << 20, 'a'), "\n");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(text, "job.yaml");
  EXPECT_EQ(
      std::string(spec.status().message()),
      absl::StrCat("job.yaml: ", text.size(), " bytes, more than the 1 MiB a job spec may have"));
}

TEST(JobSpecLimits, TooManyNodesOrTooDeepANestingIsRefusedAtTheLineWhereItCrossesTheLimit) {
  // ~60k list items in 180 KiB: refused when the 10001st node is seen.
  std::string many = absl::StrCat(kBase, "x-list: [");
  for (int i = 0; i < 60000; ++i) absl::StrAppend(&many, "1,");
  // Malformed YAML after the limit: a parser that read the whole text before counting (building
  // the tree first) would report that instead of the line where the count crossed the limit.
  const std::string malformed_tail = "x-after: [\"never closed\n";
  many += "1]\n" + malformed_tail;
  absl::StatusOr<JobSpec> spec = ParseJobSpec(many, "job.yaml");
  EXPECT_THAT(std::string(spec.status().message()),
              StartsWith("job.yaml:5:19972: more than 10000 YAML nodes (keys and values)"));

  const std::string deep = absl::StrCat(kBase, "x-deep: ", std::string(100000, '['),
                                        std::string(100000, ']'), "\n", malformed_tail);
  spec = ParseJobSpec(deep, "job.yaml");
  EXPECT_EQ(std::string(spec.status().message()),
            "job.yaml:5:72: maps and lists nested deeper than 64 levels");

  // Overrides are bounded the same way.
  std::string list = "actors.trainer.config.x=[";
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&list, "1,");
  list += "1]";
  EXPECT_THAT(ParseError(kBase, {list}), HasSubstr(": more than 10000 YAML nodes"));
  EXPECT_THAT(ParseError(kBase, {"x=" + std::string(2 << 20, 'a')}),
              HasSubstr("bytes, more than the 1 MiB a job spec may have"));
}

TEST(JobSpecLimits, AliasesThatExpandPastTheBoundAreRefused) {
  std::string bomb = absl::StrCat(kBase, "x-0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n");
  for (int i = 1; i <= 8; ++i) {
    absl::StrAppend(&bomb, "x-", i, ": &a", i, " [");
    for (int k = 0; k < 10; ++k) absl::StrAppend(&bomb, k ? ", " : "", "*a", i - 1);
    absl::StrAppend(&bomb, "]\n");
  }
  // 10^9 nodes expanded: a converter without the bound would not end within the test's timeout.
  absl::StatusOr<JobSpec> spec = ParseJobSpec(bomb, "job.yaml");
  EXPECT_THAT(std::string(spec.status().message()),
              HasSubstr("more than 100000 nodes after expanding aliases"));
}

TEST(JobSpecLimits, BinaryInputIsNotATextFile) {
  const size_t base = std::string(kBase).size();
  EXPECT_EQ(ParseError(absl::StrCat(kBase, std::string("x: a\0b\n", 7))),
            absl::StrCat("job.yaml: not a text file (a NUL byte at byte ", base + 4,
                         "); a job spec is YAML text"));
  EXPECT_EQ(ParseError(absl::StrCat(kBase, "x: \xff\xfe\n")),
            absl::StrCat("job.yaml: not a text file (invalid UTF-8 at byte ", base + 3,
                         "); a job spec is YAML text in UTF-8"));
  // Valid UTF-8 passes: "é", "€", "𝄞".
  EXPECT_TRUE(
      ParseJobSpec(absl::StrCat(kBase, "x-note: \"\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e\"\n"),
                   "job.yaml")
          .ok());
  const std::string path = TempDir("binary") + "/job.yaml";
  std::string bytes(4096, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  WriteFile(path, bytes);
  EXPECT_EQ(
      std::string(LoadJobSpec(path).status().message()),
      absl::StrCat(path, ": not a text file (a NUL byte at byte 0); a job spec is YAML text"));
}

TEST(JobSpecLimits, ADirectoryIsRefusedAsSuch) {
  const std::string dir = TempDir("spec_dir");
  absl::StatusOr<JobSpec> spec = LoadJobSpec(dir);
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(spec.status().message()),
            absl::StrCat("job spec ", dir, ": is a directory; expected a job YAML file"));
  EXPECT_EQ(LoadJobSpec(dir + "/none.yaml").status().code(), absl::StatusCode::kNotFound);
}

TEST(JobSpecLimits, EchoedValuesAreCutTo80Bytes) {
  const std::string long_name(500000, 'n');
  const std::string message =
      ParseError(absl::StrCat(kBase, "algorithm: {adv_estimator: ", long_name, "}\n"));
  EXPECT_EQ(message, absl::StrCat("job.yaml:5:28: algorithm.adv_estimator: expected one of grpo, "
                                  "gae, rloo, reinforce_plus_plus, reinforce_plus_plus_baseline, "
                                  "got \"",
                                  std::string(80, 'n'), "\u2026\" (500000 bytes)"));
  // A key path (and the override naming it) is cut at 512 bytes.
  const std::string unknown = ParseError(kBase, {long_name + "=1"});
  EXPECT_LT(unknown.size(), 1200u) << unknown.substr(0, 2000);
  EXPECT_THAT(unknown,
              HasSubstr(absl::StrCat(std::string(512, 'n'), "\u2026 (500000 bytes): unknown key")));
  const std::string number = absl::StrCat("1.", std::string(300, '5'));
  EXPECT_THAT(ParseError(kBase, {"algorithm.n=" + number}),
              HasSubstr(absl::StrCat("got 1.", std::string(78, '5'), "\u2026 (302 bytes)")));
}

// ------------------------------------------------------------------------------------------------
// Paths of a submitted job
// ------------------------------------------------------------------------------------------------

TEST(JobSpecPaths, PathKeysListsEveryPathValuedKey) {
  const JobSpec spec =
      Parse(kBase, {"model.init=ckpt/step_1", "model.config=c.json", "model.tokenizer=t.json",
                    "sft.dir=s", "actors.trainer.config={model_dir: m, lr: 1, n: {data_file: d}}",
                    "actors.checkpointer.config.dir=elsewhere", "reward.model=rm"});
  EXPECT_EQ(PathKeys(spec), (std::vector<std::pair<std::string, std::string>>{
                                {"logging.dir", "runs/t"},
                                {"actors.checkpointer.dir", "runs/t/ckpt"},
                                {"sft.dir", "s"},
                                {"model.config", "c.json"},
                                {"model.init", "ckpt/step_1"},
                                {"model.tokenizer", "t.json"},
                                {"reward.model", "rm"},
                                {"actors.trainer.config.model_dir", "m"},
                                {"actors.trainer.config.n.data_file", "d"},
                                {"actors.checkpointer.config.dir", "elsewhere"}}));
  // The reward role's models, offline preference pairs, and paths in a reward's config (lists
  // too, under a plural name), which the driver and the reward actors read.
  const JobSpec judged =
      Parse(kBase, {"reward.judge={model: judge, template: \"{response}\", verdicts: {Y: 1}}"});
  EXPECT_THAT(PathKeys(judged), testing::Contains(std::pair<std::string, std::string>(
                                    "reward.judge.model", "judge")));
  const JobSpec offline = Parse(kBase, {"recipe=dpo", "data.preference_files=[p.jsonl, q.jsonl]"});
  EXPECT_THAT(PathKeys(offline),
              testing::IsSupersetOf(
                  {std::pair<std::string, std::string>("data.preference_files[0]", "p.jsonl"),
                   std::pair<std::string, std::string>("data.preference_files[1]", "q.jsonl")}));
  const JobSpec configured =
      Parse(kBase, {"reward.name=[arithmetic]",
                    "reward.config={arithmetic: {table_file: t.csv, data_files: [a, b], n: 1}}"});
  EXPECT_THAT(
      PathKeys(configured),
      testing::IsSupersetOf(
          {std::pair<std::string, std::string>("reward.config.arithmetic.table_file", "t.csv"),
           std::pair<std::string, std::string>("reward.config.arithmetic.data_files[0]", "a"),
           std::pair<std::string, std::string>("reward.config.arithmetic.data_files[1]", "b")}));
}

// A submitted job's driver reads these too: each must lie within the roots.
TEST(JobSpecPaths, TheRewardModelsPreferencePairsAndRewardConfigPathsMustLieWithinTheRoots) {
  const std::string dir = TempDir("reward_paths");
  const std::vector<std::string> roots = {dir};
  const JobSpec spec = Parse(kBase, {"logging.dir=" + dir + "/run", "model.config=" + dir + "/m",
                                     "reward.model=/etc", "reward.name=[arithmetic]",
                                     "reward.config={arithmetic: {data_files: [/etc/shadow]}}"});
  const absl::Status s = CheckPathsWithin(spec, dir, roots);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("override reward.model=/etc: reward.model: \"/etc\" outside the "
                        "directories this job may use"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("reward.config.arithmetic.data_files[0]: \"/etc/shadow\" outside"));
  const JobSpec judge = Parse(
      kBase, {"logging.dir=" + dir + "/run", "model.config=" + dir + "/m",
              "reward.judge={model: /opt/judge, template: \"{response}\", verdicts: {Y: 1}}"});
  EXPECT_THAT(std::string(CheckPathsWithin(judge, dir, roots).message()),
              HasSubstr("reward.judge.model: \"/opt/judge\" outside"));
  const JobSpec offline = Parse(kBase, {"logging.dir=" + dir + "/run", "model.config=" + dir + "/m",
                                        "recipe=dpo", "data.preference_files=[/var/pairs.jsonl]"});
  EXPECT_THAT(std::string(CheckPathsWithin(offline, dir, roots).message()),
              HasSubstr("data.preference_files[0]: \"/var/pairs.jsonl\" outside"));
}

TEST(JobSpecPaths, EveryPathMustResolveInsideARootAfterSymlinksAndDotDot) {
  namespace fs = std::filesystem;
  const std::string dir = TempDir("paths");
  fs::create_directories(dir + "/job/run");
  fs::create_directories(dir + "/models");
  fs::create_directories(dir + "/other");
  fs::create_symlink(dir + "/other", dir + "/job/escape");
  const std::vector<std::string> roots = {dir + "/job", "models"};  // relative: against the base
  const std::string base = dir;

  const JobSpec inside = Parse(kBase, {"logging.dir=job/run", "model.config=models/tiny.json",
                                       "actors.checkpointer.dir=" + dir + "/job/run/../ckpt"});
  EXPECT_TRUE(CheckPathsWithin(inside, base, roots).ok()) << CheckPathsWithin(inside, base, roots);

  const JobSpec outside =
      Parse(kBase, {"logging.dir=job/run", "model.config=/etc/shadow",
                    "actors.checkpointer.dir=job/run/../../other", "sft.dir=job/escape/sft",
                    "actors.checkpointer.config.dir=/elsewhere"});
  const absl::Status s = CheckPathsWithin(outside, base, roots);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  const std::string allowed = absl::StrCat("(", dir, "/job, ", dir, "/models)");
  EXPECT_EQ(
      std::string(s.message()),
      absl::StrCat(
          "override actors.checkpointer.dir=job/run/../../other: actors.checkpointer.dir: "
          "\"job/run/../../other\" resolves to \"",
          dir,
          "/other\", outside the directories "
          "this job may use ",
          allowed, "\n",
          "override sft.dir=job/escape/sft: sft.dir: \"job/escape/sft\" resolves to \"", dir,
          "/other/sft\", outside the directories this job may use ", allowed, "\n",
          "override model.config=/etc/shadow: model.config: \"/etc/shadow\" outside the "
          "directories this job may use ",
          allowed, "\n",
          "override actors.checkpointer.config.dir=/elsewhere: actors.checkpointer.config.dir: "
          "\"/elsewhere\" outside the directories this job may use ",
          allowed));
  EXPECT_EQ(CheckPathsWithin(inside, base, {}).code(), absl::StatusCode::kPermissionDenied);
}

TEST(JobSpecPaths, ValidateFilesNeverEchoesWhatAFileHolds) {
  const std::string dir = TempDir("files");
  WriteFile(dir + "/shadow", "admin:$6$the-hash:19000:0:99999:7:::\n");
  WriteFile(dir + "/blob", std::string("\x7f"
                                       "ELF\0\0hash!!",
                                       12));
  for (const char* file : {"shadow", "blob"}) {
    const absl::Status s =
        ValidateFiles(Parse(kBase, {absl::StrCat("model.config=", dir, "/", file)}));
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr("hash"))) << s;
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr("admin"))) << s;
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr("ELF"))) << s;
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr("last read"))) << s;  // nlohmann's echo
  }
  EXPECT_THAT(
      std::string(ValidateFiles(Parse(kBase, {"model.config=" + dir + "/shadow"})).message()),
      HasSubstr("/shadow: not valid JSON (expected a model config.json)"));
  EXPECT_THAT(std::string(ValidateFiles(Parse(kBase, {"model.config=" + dir + "/blob"})).message()),
              HasSubstr("/blob: not a text file (expected a model config.json)"));
}

// ------------------------------------------------------------------------------------------------
// A spec promises only what runs
// ------------------------------------------------------------------------------------------------

// The trainer and the critic are data-parallel groups of any size (docs/job_spec.md says so:
// job_spec_docs_test); a critic of several ranks is not restarted unless the spec says so (which
// recipe ppo refuses: online_config_test).
TEST(JobSpecActors, TrainerAndCriticRanks) {
  EXPECT_EQ(Parse(kBase, {"actors.trainer.replicas=3"}).actors.trainer.replicas, 3);
  EXPECT_EQ(ParseError(kBase, {"actors.trainer.replicas=0"}),
            "override actors.trainer.replicas=0: actors.trainer.replicas: expected a positive "
            "integer, got 0");
  const JobSpec two = Parse(kBase + std::string("recipe: ppo\nactors: {critic: {replicas: 2}}\n"));
  EXPECT_EQ(two.actors.critic.replicas, 2);
  EXPECT_EQ(two.actors.critic.max_restarts, 0);
  EXPECT_EQ(Parse(kBase, {"recipe=ppo", "actors.critic.replicas=2", "actors.critic.max_restarts=2"})
                .actors.critic.max_restarts,
            2);
  EXPECT_EQ(ParseError(kBase, {"recipe=ppo", "actors.critic.replicas=-1"}),
            "override actors.critic.replicas=-1: actors.critic.replicas: expected a "
            "non-negative integer, got -1");
  const JobSpec one = Parse(kBase, {"recipe=ppo"});
  EXPECT_EQ(one.actors.critic.replicas, 1);
  EXPECT_EQ(one.actors.critic.max_restarts, 3);
  EXPECT_EQ(Parse(kBase).actors.trainer.replicas, 1);
}

// Anything a key names that is not a regular file (or a directory where one is expected) is
// refused as such, and never opened: a FIFO with no writer would block whoever opens it.
TEST(JobSpecFiles, AFifoIsRefusedAsSuchWithoutBeingOpened) {
  const std::string dir = TempDir("fifos");
  std::vector<std::string> fifos;
  auto fifo = [&](const std::string& name) {
    const std::string path = dir + "/" + name;
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
    fifos.push_back(path);
    return path;
  };
  const std::string config = fifo("config.json");
  const std::string train = fifo("train.jsonl");
  const std::string tokenizer = fifo("tokenizer.json");
  const std::string templ = fifo("template.jinja");
  const std::string library = fifo("libx.so");
  const std::string yaml =
      absl::StrCat("name: d\nmodel: {config: ", config, ", init: random, tokenizer: ", tokenizer,
                   "}\ndata: {train_files: [", train, "], chat_template: ", templ,
                   "}\nreward: {name: arithmetic}\n",
                   "trainer: {total_steps: 10}\nactors: {reward: {library: ", library, "}}\n");
  const JobSpec spec = Parse(yaml);
  const absl::Status s = WithoutBlocking<absl::Status>([&] { return ValidateFiles(spec); }, fifos);
  const std::string m(s.message());
  EXPECT_THAT(m, HasSubstr(absl::StrCat("model.config: expected a config.json file, got a FIFO: ",
                                        config)));
  EXPECT_THAT(m, HasSubstr(absl::StrCat("data.train_files: expected a file, got a FIFO: ", train)));
  EXPECT_THAT(m, HasSubstr(absl::StrCat(
                     "model.tokenizer: expected a tokenizer.json file, got a FIFO: ", tokenizer)));
  EXPECT_THAT(m,
              HasSubstr(absl::StrCat("data.chat_template: expected a file, got a FIFO: ", templ)));
  EXPECT_THAT(m, HasSubstr(absl::StrCat("actors.reward.library: actor library ", library,
                                        ": expected a shared library file, got a FIFO")));

  // Inside a model directory: its config.json, its weights.
  const std::string init = dir + "/init";
  std::filesystem::create_directories(init);
  WriteFile(init + "/config.json", ModelConfigJson(32, 2));
  fifos.push_back(init + "/model.safetensors");
  ASSERT_EQ(::mkfifo(fifos.back().c_str(), 0600), 0);
  const JobSpec from_dir = Parse(kBase, {"model.config=", "model.init=" + init});
  EXPECT_THAT(
      std::string(
          WithoutBlocking<absl::Status>([&] { return ValidateFiles(from_dir); }, fifos).message()),
      HasSubstr(absl::StrCat("model.init: ", init,
                             "/model.safetensors: is a FIFO, expected a regular file")));
  const std::string rm = dir + "/rm";
  std::filesystem::create_directories(rm);
  fifos.push_back(rm + "/config.json");
  ASSERT_EQ(::mkfifo(fifos.back().c_str(), 0600), 0);
  const JobSpec rewarded = Parse(kBase, {"reward.model=" + rm});
  EXPECT_THAT(
      std::string(
          WithoutBlocking<absl::Status>([&] { return ValidateFiles(rewarded); }, fifos).message()),
      HasSubstr(absl::StrCat("reward.model: expected a config.json file, got a FIFO: ", rm,
                             "/config.json")));
  // A preference file, read by offline dpo.
  const std::string pairs = fifo("pairs.jsonl");
  const JobSpec offline = Parse(kBase, {"recipe=dpo", "data.preference_files=[" + pairs + "]"});
  EXPECT_THAT(
      std::string(
          WithoutBlocking<absl::Status>([&] { return ValidateFiles(offline); }, fifos).message()),
      HasSubstr(absl::StrCat("data.preference_files: expected a file, got a FIFO: ", pairs)));
}

// model.init: DIR with a model.config whose shapes are not those of DIR's weights is refused
// before anything starts, naming the tensors and the config keys that differ (it used to surface
// only when the actors loaded the weights, after their restarts, with the job started).
TEST(JobSpecFiles, AnInitDirectoryWhoseWeightsDoNotFitModelConfigIsRefused) {
  const std::string dir = TempDir("init_shapes");
  WriteCheckpoint(dir + "/ckpt", ModelConfigJson(32, 2));
  WriteFile(dir + "/ckpt/tokenizer.json", "{}");
  WriteFile(dir + "/same.json", ModelConfigJson(32, 2));
  WriteFile(dir + "/wide.json", ModelConfigJson(64, 2));
  const std::string yaml =
      absl::StrCat("name: t\nmodel: {init: ", dir, "/ckpt, config: ", dir,
                   "/wide.json}\ndata: {task: arithmetic}\n", "trainer: {total_steps: 10}\n");
  const absl::Status s = ValidateFiles(Parse(yaml));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(s.message()),
      StartsWith(absl::StrCat("job.yaml:2:", 30 + dir.size(), ": model.config: model.config (", dir,
                              "/wide.json) does not fit the weights in ", dir,
                              "/ckpt: lm_head.weight is [40, 32] in the checkpoint, [40, "
                              "64] for the config; ")));
  EXPECT_THAT(std::string(s.message()), HasSubstr("... and "));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat("(", dir,
                                     "/ckpt/config.json vs model.config: hidden_size 32 vs 64, "
                                     "intermediate_size 64 vs 128)")));
  // The same shapes fit (whatever else the config changes); so does the directory's own config.
  EXPECT_TRUE(ValidateFiles(Parse(yaml, {"model.config=" + dir + "/same.json"})).ok());
  EXPECT_TRUE(ValidateFiles(Parse(yaml, {"model.config="})).ok());
  // A directory whose own config.json does not describe its weights.
  WriteFile(dir + "/ckpt/config.json", ModelConfigJson(32, 3));
  EXPECT_THAT(std::string(ValidateFiles(Parse(yaml, {"model.config="})).message()),
              HasSubstr(absl::StrCat("model.init: ", dir,
                                     "/ckpt/config.json does not fit the "
                                     "weights in ",
                                     dir,
                                     "/ckpt: model.layers.2.input_layernorm.weight is missing "
                                     "from the checkpoint")));
}

TEST(JobSpecFiles, ARewardModelWhoseWeightsDoNotFitItsConfigIsRefused) {
  const std::string dir = TempDir("rm_shapes");
  WriteCheckpoint(dir + "/rm", ModelConfigJson(32, 2));
  EXPECT_TRUE(ValidateFiles(Parse(kBase, {"model.config=", "model.init=" + dir + "/rm",
                                          "reward.model=" + dir + "/rm"}))
                  .ok());
  WriteFile(dir + "/rm/config.json", ModelConfigJson(32, 2, /*vocab=*/50));
  EXPECT_THAT(std::string(ValidateFiles(Parse(kBase, {"reward.model=" + dir + "/rm"})).message()),
              HasSubstr(absl::StrCat("reward.model: ", dir,
                                     "/rm/config.json does not fit the weights in ", dir,
                                     "/rm: model.embed_tokens.weight is [40, 32] in the "
                                     "checkpoint, [50, 32] for the config")));
  EXPECT_THAT(
      std::string(ValidateFiles(Parse(kBase, {"reward.model=" + dir + "/nothing"})).message()),
      HasSubstr(absl::StrCat("reward.model: not found: ", dir, "/nothing")));
}

// A GPU reservation the job would never use is refused, naming the key and why; a user's actor
// type keeps it (its own code may use the GPU).
TEST(JobSpecDevices, AGpuForAnActorThatComputesOnTheCpuIsRefused) {
  const std::string yaml = kBase + std::string(R"(actors:
  trainer: {resources: {CPU: 1, GPU: 1}}
  replay_buffer: {resources: {GPU: 1}}
  reward: {type: MyReward, library: libmy.so, resources: {GPU: 1}}
  critic: {resources: {GPU: 1}}
)");
  const JobSpec spec = Parse(yaml);
  const absl::Status s = CheckDevices(spec, {.libtorch_cuda = false});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()),
            "job.yaml:6:38: actors.trainer.resources.GPU: this troupe's LibTorch was built "
            "without CUDA, so Trainer computes on the CPU; the GPU would be reserved and never "
            "used (remove GPU, or set it to 0)\n"
            "job.yaml:7:36: actors.replay_buffer.resources.GPU: ReplayBuffer holds no model and "
            "computes on no device; the GPU would be reserved and never used (remove GPU, or set "
            "it to 0)");
  EXPECT_THAT(std::string(CheckDevices(spec, {.libtorch_cuda = true}).message()),
              HasSubstr("actors.trainer.resources.GPU: Trainer computes on the CPU: placing "
                        "troupe's model actors on the GPU they reserve is not implemented yet"));
  // The reward role's model actors count as model actors.
  const JobSpec judged = Parse(kBase, {"reward.model=rm", "actors.reward.resources={GPU: 1}"});
  EXPECT_THAT(std::string(CheckDevices(judged, {}).message()),
              HasSubstr("so RewardModel computes on the CPU"));
  EXPECT_TRUE(CheckDevices(Parse(kBase), {}).ok());
}

}  // namespace
}  // namespace troupe::recipes
