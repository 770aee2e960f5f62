#include "recipes/rl/task_prompts.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace troupe::recipes {
namespace {

class TaskPrompts : public PromptDataset {
 public:
  TaskPrompts(std::unique_ptr<tasks::TaskProblems> problems,
              std::shared_ptr<const models::Tokenizer> tokenizer)
      : problems_(std::move(problems)), tokenizer_(std::move(tokenizer)) {}

  absl::StatusOr<proto::Prompt> Get(int64_t index) const override {
    return Encode(problems_->Train(index % problems_->num_train()));
  }
  int64_t size() const override { return problems_->num_train(); }
  absl::StatusOr<std::vector<proto::Prompt>> HeldOut() const override {
    std::vector<proto::Prompt> out;
    for (const tasks::TaskProblem& problem : problems_->HeldOut()) {
      TROUPE_ASSIGN_OR_RETURN(proto::Prompt p, Encode(problem));
      p.set_prompt_id(static_cast<int64_t>(out.size()));
      out.push_back(std::move(p));
    }
    return out;
  }

 private:
  absl::StatusOr<proto::Prompt> Encode(const tasks::TaskProblem& problem) const {
    proto::Prompt p;
    p.set_text(problem.prompt);
    p.set_reference_answer(problem.reference_answer);
    p.add_tokens(tokenizer_->bos_id().value_or(1));
    TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer_->Encode(problem.prompt));
    for (int32_t t : ids) p.add_tokens(t);
    return p;
  }

  std::unique_ptr<tasks::TaskProblems> problems_;
  std::shared_ptr<const models::Tokenizer> tokenizer_;
};

}  // namespace

tasks::TaskConfig TaskConfigOf(const JobSpec& spec) {
  tasks::TaskConfig config;
  config.params = spec.data.task_params;
  config.heldout_size = spec.data.heldout_size;
  config.seed = static_cast<uint64_t>(spec.data.seed);
  return config;
}

absl::StatusOr<std::unique_ptr<PromptDataset>> MakeTaskPrompts(
    const JobSpec& spec, std::shared_ptr<const models::Tokenizer> tokenizer) {
  absl::StatusOr<std::unique_ptr<tasks::TaskProblems>> problems =
      tasks::MakeTaskProblems(spec.data.task, TaskConfigOf(spec));
  if (absl::IsNotFound(problems.status()) || absl::IsFailedPrecondition(problems.status())) {
    return absl::InvalidArgumentError(
        absl::StrCat("data.task: the RL recipes cannot run it: ", problems.status().message()));
  }
  if (!problems.ok()) return problems.status();
  return std::unique_ptr<PromptDataset>(
      std::make_unique<TaskPrompts>(std::move(*problems), std::move(tokenizer)));
}

}  // namespace troupe::recipes
