#include "recipes/rl/task_prompts.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/tokenizers/char_tokenizer.h"
#include "recipes/job_spec/job_spec.h"
#include "tasks/arithmetic/arithmetic_task.h"
#include "tasks/task.h"

namespace troupe::recipes {
namespace {

using ::testing::HasSubstr;

JobSpec Spec(const std::vector<std::string>& overrides) {
  absl::StatusOr<JobSpec> spec = ParseJobSpec(R"(name: t
model: {config: m.json, init: random}
data: {task: arithmetic, digits: 2, num_train: 300, heldout_size: 40, seed: 5}
trainer: {total_steps: 1}
)",
                                              "job.yaml", overrides);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::shared_ptr<const models::Tokenizer> Tokenizer() {
  return std::shared_ptr<const models::Tokenizer>(
      *models::CharTokenizer::Create(tasks::ArithmeticTask::kAlphabet));
}

// The prompts the RL recipes got before tasks were registered: the task's pool (or, without one,
// its SFT problems) in order, held-out split numbered 0, 1, ...; tokens BOS + characters.
TEST(TaskPrompts, ArithmeticPromptsAreTheTasksPoolAndHeldOutSplit) {
  std::shared_ptr<const models::Tokenizer> tok = Tokenizer();
  absl::StatusOr<std::unique_ptr<data::PromptDataset>> prompts = MakeTaskPrompts(Spec({}), tok);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  absl::StatusOr<tasks::ArithmeticTask> task =
      tasks::ArithmeticTask::Create({.digits = 2, .num_train = 300, .num_heldout = 40, .seed = 5});
  ASSERT_TRUE(task.ok());
  const int64_t pool = task->size(tasks::TaskSplit::kPool);
  ASSERT_EQ((*prompts)->size(), pool);
  for (int64_t i : {int64_t{0}, int64_t{3}, pool - 1, pool + 2}) {
    absl::StatusOr<proto::Prompt> p = (*prompts)->Get(i);
    ASSERT_TRUE(p.ok());
    const tasks::ArithmeticProblem expected = task->Problem(tasks::TaskSplit::kPool, i % pool);
    EXPECT_EQ(p->text(), expected.prompt);
    EXPECT_EQ(p->reference_answer(), expected.answer);
    std::vector<int32_t> tokens = {*tok->bos_id()};
    absl::StatusOr<std::vector<int32_t>> chars = tok->Encode(expected.prompt);
    ASSERT_TRUE(chars.ok());
    tokens.insert(tokens.end(), chars->begin(), chars->end());
    EXPECT_EQ(std::vector<int32_t>(p->tokens().begin(), p->tokens().end()), tokens);
  }
  absl::StatusOr<std::vector<proto::Prompt>> heldout = (*prompts)->HeldOut();
  ASSERT_TRUE(heldout.ok());
  ASSERT_EQ(heldout->size(), 40u);
  for (size_t i = 0; i < heldout->size(); ++i) {
    EXPECT_EQ((*heldout)[i].prompt_id(), static_cast<int64_t>(i));
    EXPECT_EQ((*heldout)[i].text(), task->Problem(tasks::TaskSplit::kHeldout, i).prompt);
  }
}

TEST(TaskPrompts, WithoutAPoolTheTrainingProblemsAreThePrompts) {
  absl::StatusOr<std::unique_ptr<data::PromptDataset>> prompts =
      MakeTaskPrompts(Spec({"data.num_train=0"}), Tokenizer());
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  EXPECT_EQ((*prompts)->size(), 90 * 90 - 40);
}

TEST(TaskPrompts, ATaskWithoutPromptsIsRefusedNamingDataTask) {
  tasks::TaskDefinition spec_only;
  spec_only.name = "prompts_spec_only_test";
  ASSERT_TRUE(tasks::RegisterTask(spec_only).ok());
  JobSpec spec = Spec({});
  spec.data.task = "prompts_spec_only_test";
  absl::Status s = MakeTaskPrompts(spec, Tokenizer()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("data.task: the RL recipes cannot run it"));
}

}  // namespace
}  // namespace troupe::recipes
