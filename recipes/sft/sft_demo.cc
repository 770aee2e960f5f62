// sft_demo: supervised fine-tuning of the tiny Llama-style model on synthetic addition, with
// held-out exact match measured by greedy generation (rollout::GenerationEngine), and an SFT
// checkpoint for the GRPO stage: the SFT recipe on the arithmetic task's supervised data
// (recipes/sft/task_sft.h, tasks/arithmetic/arithmetic_sft.h), the task named by this program.
//
//   bazel run //recipes/sft:sft_demo -- [--preset easy|plateau] [--steps N] [--seed S] [--out DIR]
//
// Presets (every value can be overridden by its flag):
//   easy     2-digit addition, all 7,600 non-held-out problems as training data; stops at 98%
//            held-out exact match (about 2 minutes on this 2-core machine).
//   plateau  the same problems taught by a careless teacher: of the training answers that need
//            three digits, 70% are written without the final carry ("93+21=14"). SFT imitates
//            the teacher, so its greedy held-out exact match levels off near the 40% of problems
//            whose sum stays below 100, however long it trains, while the true answer keeps ~30%
//            probability on the others: pass@8 at temperature 1 shows the headroom a
//            verifier-rewarded RL stage (GRPO) can claim. Its checkpoint (--out) is where that
//            stage starts.
// Progress lines go to stderr; the accuracy curve and a few generated answers to stdout.
// Relative paths are taken from the workspace root under `bazel run`, else the current directory.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/model_config.h"
#include "recipes/sft/task_sft.h"
#include "tasks/task.h"

namespace {

std::string Resolve(const std::string& path) {
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  if (path.empty() || path[0] == '/' || workspace == nullptr) return path;
  return absl::StrCat(workspace, "/", path);
}

// The task this demo trains on (its --digits, --train_examples and --dropped_carry_rate are the
// task's params).
constexpr char kTask[] = "arithmetic";

int Fail(const std::string& message) {
  std::fprintf(stderr, "sft_demo: %s\n", message.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"SFT of the tiny model on synthetic addition (see recipes/sft/sft_recipe.h)"};
  std::string preset = "easy";
  std::string model_config = "examples/models/tiny.json";
  troupe::recipes::SftOptions o;
  int64_t digits = 2;
  int64_t num_train = 0;
  int64_t num_heldout = 500;
  uint64_t task_seed = 0;
  double dropped_carry_rate = 0.0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t layers = 0;
  app.add_option("--preset", preset, "easy (2-digit, full data) or plateau (3-digit, little data)")
      ->check(CLI::IsMember({"easy", "plateau"}));
  app.add_option("--model_config", model_config, "HF config.json of the architecture")
      ->capture_default_str();
  app.add_option("--steps", o.steps, "Step budget");
  app.add_option("--seed", o.seed, "Seed of the model init and the batches");
  app.add_option("--out", o.out_dir, "Checkpoint directory to write (parent must exist)");
  app.add_option("--digits", digits, "Operand digits (1..3)");
  app.add_option("--train_examples", num_train, "Training problems (0 = all not held out)");
  app.add_option("--heldout", num_heldout, "Held-out problems");
  app.add_option("--task_seed", task_seed, "Seed of the train / held-out split");
  app.add_option("--dropped_carry_rate", dropped_carry_rate,
                 "Share of overflowing training answers written without the final carry");
  app.add_option("--batch_size", o.batch_size, "Sequences per step");
  app.add_option("--lr", o.learning_rate, "Peak learning rate");
  app.add_option("--warmup_steps", o.warmup_steps, "Linear warm-up steps");
  app.add_option("--weight_decay", o.weight_decay, "AdamW weight decay");
  app.add_option("--eval_every", o.eval_every, "Steps between held-out evaluations");
  app.add_option("--eval_size", o.eval_size, "Held-out problems per evaluation");
  app.add_option("--target_accuracy", o.target_accuracy, "Stop at this held-out exact match");
  app.add_option("--pass_at_k", o.pass_at_k, "Final pass@k at temperature 1 (0 = skip)");
  app.add_option("--threads", o.threads, "LibTorch + OpenBLAS threads (0 = their defaults)");
  app.add_option("--hidden_size", hidden_size, "Override the config's hidden_size");
  app.add_option("--intermediate_size", intermediate_size, "Override intermediate_size");
  app.add_option("--layers", layers, "Override num_hidden_layers");
  CLI11_PARSE(app, argc, argv);

  // Preset values for every flag the user did not give.
  auto unset = [&](const char* flag) { return app.count(flag) == 0; };
  const bool easy = preset == "easy";
  if (unset("--steps")) o.steps = easy ? 1500 : 1600;
  if (unset("--batch_size")) o.batch_size = 128;
  if (unset("--digits")) digits = 2;
  if (unset("--train_examples")) num_train = 0;
  if (unset("--heldout")) num_heldout = 500;
  if (unset("--dropped_carry_rate")) dropped_carry_rate = easy ? 0.0 : 0.7;
  if (unset("--lr")) o.learning_rate = 5e-3;
  if (unset("--eval_every")) o.eval_every = 100;
  if (unset("--target_accuracy")) o.target_accuracy = easy ? 0.98 : 1.0;
  if (unset("--pass_at_k")) o.pass_at_k = 8;

  absl::StatusOr<troupe::models::ModelConfig> config =
      troupe::models::LoadModelConfig(Resolve(model_config));
  if (!config.ok()) return Fail(std::string(config.status().message()));
  if (hidden_size > 0) config->hidden_size = hidden_size;
  if (intermediate_size > 0) config->intermediate_size = intermediate_size;
  if (layers > 0) config->num_hidden_layers = layers;
  o.model = *config;
  o.out_dir = Resolve(o.out_dir);
  troupe::tasks::TaskConfig task;
  task.params = {
      {"digits", digits}, {"num_train", num_train}, {"dropped_carry_rate", dropped_carry_rate}};
  task.heldout_size = num_heldout;
  task.seed = task_seed;
  if (absl::Status valid = troupe::recipes::ValidateTaskSft(kTask, task, o); !valid.ok()) {
    return Fail(std::string(valid.message()));
  }

  absl::StatusOr<troupe::recipes::SftResult> result =
      troupe::recipes::RunTaskSft(kTask, task, o, [](const std::string& line) {
        std::fprintf(stderr, "%s\n", line.c_str());
        std::fflush(stderr);
      });
  if (!result.ok()) return Fail(std::string(result.status().message()));

  std::printf("preset %s: %lld steps, held-out exact match %.1f%%%s, %.0f train tokens/s\n",
              preset.c_str(), static_cast<long long>(result->steps), 100 * result->final_accuracy,
              result->reached_target ? " (target reached)" : "", result->tokens_per_second);
  std::printf(
      "curve (step, mean train loss since the last eval, held-out exact match, seconds):\n");
  for (const troupe::recipes::EvalPoint& p : result->curve) {
    std::printf("  %6lld  %.4f  %5.1f%%  %6.1f\n", static_cast<long long>(p.step), p.train_loss,
                100 * p.accuracy, p.seconds);
  }
  if (result->pass_at_k >= 0) {
    std::printf("held-out pass@%lld at temperature 1: %.1f%%\n",
                static_cast<long long>(o.pass_at_k), 100 * result->pass_at_k);
  }
  std::printf("generated answers (greedy):\n");
  for (const std::string& line : result->examples) std::printf("  %s\n", line.c_str());
  if (!o.out_dir.empty()) std::printf("checkpoint: %s\n", o.out_dir.c_str());
  return 0;
}
