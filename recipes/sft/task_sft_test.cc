#include "recipes/sft/task_sft.h"

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/tokenizer.h"
#include "models/transformer.h"
#include "nlohmann/json.hpp"
#include "recipes/sft/sft_recipe.h"
#include "recipes/sft/sft_test_util.h"
#include "rollout/generation_engine.h"
#include "tasks/arithmetic/arithmetic_task.h"
#include "tasks/task.h"

namespace troupe::recipes {

using tasks::ArithmeticProblem;
using tasks::ArithmeticTask;
using tasks::TaskSplit;
namespace {

using ::testing::HasSubstr;

// The task the tests train on, by name (the recipe names none).
constexpr char kTask[] = "arithmetic";

struct TaskSftOptions {
  tasks::TaskConfig task;
  SftOptions sft;
};

// 1-digit addition on a very small model: a few seconds of work at most.
TaskSftOptions SmallOptions() {
  TaskSftOptions a;
  a.task.params = {{"digits", 1}, {"num_train", 0}};
  a.task.heldout_size = 20;
  a.task.seed = 2;
  SftOptions& o = a.sft;
  o = TinySftOptions();
  o.model.vocab_size = 15;
  o.model.num_hidden_layers = 1;
  o.steps = 60;
  o.warmup_steps = 5;
  o.eval_every = 20;
  o.eval_slots = 8;
  o.log_every = 20;
  o.seed = 3;
  return a;
}

std::vector<std::string> Lines(const TaskSftOptions& options, absl::StatusOr<SftResult>* result) {
  std::vector<std::string> lines;
  *result = RunTaskSft(kTask, options.task, options.sft, CollectLines(&lines));
  return lines;
}

TEST(RunTaskSft, TrainsEvaluatesAndLogsProgressOnTheCurve) {
  absl::StatusOr<SftResult> result;
  std::vector<std::string> lines = Lines(SmallOptions(), &result);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->curve.size(), 3u);
  EXPECT_EQ(result->curve[0].step, 20);
  EXPECT_EQ(result->curve[2].step, 60);
  EXPECT_EQ(result->steps, 60);
  EXPECT_LT(result->curve[2].train_loss, result->curve[0].train_loss);
  EXPECT_EQ(result->final_accuracy, result->curve[2].accuracy);
  EXPECT_GT(result->tokens_per_second, 0);
  EXPECT_EQ(result->pass_at_k, -1);
  int progress = 0;
  int evals = 0;
  for (const std::string& line : lines) {
    if (line.rfind("step ", 0) == 0) {
      ++progress;
      EXPECT_THAT(line, HasSubstr("loss"));
      EXPECT_THAT(line, HasSubstr("tok/s"));
      EXPECT_THAT(line, HasSubstr("ETA"));
    }
    if (line.rfind("eval step ", 0) == 0) ++evals;
  }
  EXPECT_EQ(progress, 3);
  EXPECT_EQ(evals, 3);
  EXPECT_EQ(result->examples.size(), 6u);
  EXPECT_THAT(result->examples[0], HasSubstr("+"));
}

TEST(RunTaskSft, SameSeedGivesTheSameCurve) {
  TaskSftOptions options = SmallOptions();
  options.sft.steps = 20;
  absl::StatusOr<SftResult> a;
  absl::StatusOr<SftResult> b;
  Lines(options, &a);
  Lines(options, &b);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->curve[0].train_loss, b->curve[0].train_loss);
  EXPECT_EQ(a->curve[0].accuracy, b->curve[0].accuracy);
}

TEST(RunTaskSft, StopsAtTheTargetAccuracy) {
  TaskSftOptions options = SmallOptions();
  options.sft.target_accuracy = 0.0;  // any accuracy reaches it
  absl::StatusOr<SftResult> result;
  Lines(options, &result);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(result->reached_target);
  EXPECT_EQ(result->steps, 20);
  EXPECT_EQ(result->curve.size(), 1u);
}

TEST(RunTaskSft, SavesACheckpointThatReloadsAndReproducesTheReportedAccuracy) {
  TaskSftOptions options = SmallOptions();
  options.sft.out_dir = TempDir("sft_ckpt");
  options.sft.pass_at_k = 2;
  absl::StatusOr<SftResult> result;
  Lines(options, &result);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_GE(result->pass_at_k, 0.0);

  absl::StatusOr<models::CausalLM> model = models::LoadCausalLM(options.sft.out_dir);
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer =
      models::LoadTokenizer(options.sft.out_dir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*model)->config().vocab_size, (*tokenizer)->vocab_size());
  EXPECT_EQ((*model)->config().eos_token_ids, std::vector<int64_t>{*(*tokenizer)->eos_id()});
  absl::StatusOr<ArithmeticTask> task =
      ArithmeticTask::FromJson(ReadAll(options.sft.out_dir + "/task.json"), "task.json");
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->size(TaskSplit::kHeldout), 20);
  nlohmann::json metrics =
      nlohmann::json::parse(ReadAll(options.sft.out_dir + "/sft_metrics.json"));
  EXPECT_EQ(metrics["curve"].size(), result->curve.size());
  EXPECT_EQ(metrics["pass_at_k"]["k"], 2);

  // Greedy exact match of the reloaded model on the held-out split equals the reported one.
  absl::StatusOr<std::unique_ptr<rollout::GenerationEngine>> engine =
      rollout::GenerationEngine::Create(model->ptr(), {.num_slots = 4, .max_seq_len = 16});
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<std::vector<int32_t>> prompts;
  std::vector<ArithmeticProblem> problems = task->Problems(TaskSplit::kHeldout);
  for (const ArithmeticProblem& p : problems) {
    absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(p.prompt);
    ASSERT_TRUE(ids.ok());
    ids->insert(ids->begin(), *(*tokenizer)->bos_id());
    prompts.push_back(*ids);
  }
  rollout::SamplingParams greedy;
  greedy.temperature = 0;
  greedy.max_new_tokens = 3;
  greedy.stop_token_ids = {*(*tokenizer)->eos_id()};
  absl::StatusOr<std::vector<rollout::GeneratedSample>> samples =
      (*engine)->Generate(prompts, greedy);
  ASSERT_TRUE(samples.ok()) << samples.status();
  int correct = 0;
  for (const rollout::GeneratedSample& s : *samples) {
    if (s.finish_reason != rollout::FinishReason::kStop) continue;
    std::vector<int32_t> answer(s.tokens.begin(), s.tokens.end() - 1);
    absl::StatusOr<std::string> text = (*tokenizer)->Decode(answer);
    ASSERT_TRUE(text.ok());
    correct += ArithmeticTask::IsCorrect(problems[s.prompt_index], *text);
  }
  EXPECT_DOUBLE_EQ(correct / 20.0, result->final_accuracy);
}

TEST(RunTaskSft, RejectsBadOptionsNamingTheField) {
  TaskSftOptions steps = SmallOptions();
  steps.sft.steps = 0;
  EXPECT_THAT(std::string(ValidateTaskSft(kTask, steps.task, steps.sft).message()),
              HasSubstr("steps = 0"));
  TaskSftOptions target = SmallOptions();
  target.sft.target_accuracy = 1.5;
  EXPECT_THAT(std::string(ValidateTaskSft(kTask, target.task, target.sft).message()),
              HasSubstr("target_accuracy"));
  TaskSftOptions digits = SmallOptions();
  digits.task.params["digits"] = 7;
  EXPECT_THAT(std::string(ValidateTaskSft(kTask, digits.task, digits.sft).message()),
              HasSubstr("digits = 7"));
  TaskSftOptions heads = SmallOptions();
  heads.sft.model.hidden_size = 30;  // not divisible by 4 heads
  EXPECT_THAT(std::string(ValidateTaskSft(kTask, heads.task, heads.sft).message()),
              HasSubstr("sft options: model"));
  TaskSftOptions out = SmallOptions();
  out.sft.out_dir = "/nonexistent-parent/ckpt";
  EXPECT_THAT(std::string(ValidateTaskSft(kTask, out.task, out.sft).message()),
              HasSubstr("needs an existing parent directory '/nonexistent-parent'"));
  absl::StatusOr<SftResult> result;
  Lines(steps, &result);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace troupe::recipes
