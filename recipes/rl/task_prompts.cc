#include "recipes/rl/task_prompts.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "recipes/sft/arithmetic_task.h"

namespace troupe::recipes {
namespace {

class ArithmeticPrompts : public PromptDataset {
 public:
  ArithmeticPrompts(ArithmeticTask task, std::shared_ptr<const models::Tokenizer> tokenizer)
      : task_(std::move(task)), tokenizer_(std::move(tokenizer)) {
    split_ = task_.size(TaskSplit::kPool) > 0 ? TaskSplit::kPool : TaskSplit::kTrain;
  }

  absl::StatusOr<proto::Prompt> Get(int64_t index) const override {
    return Encode(task_.Problem(split_, index % task_.size(split_)));
  }
  int64_t size() const override { return task_.size(split_); }
  absl::StatusOr<std::vector<proto::Prompt>> HeldOut() const override {
    std::vector<proto::Prompt> out;
    for (const ArithmeticProblem& problem : task_.Problems(TaskSplit::kHeldout)) {
      TROUPE_ASSIGN_OR_RETURN(proto::Prompt p, Encode(problem));
      p.set_prompt_id(static_cast<int64_t>(out.size()));
      out.push_back(std::move(p));
    }
    return out;
  }

 private:
  absl::StatusOr<proto::Prompt> Encode(const ArithmeticProblem& problem) const {
    proto::Prompt p;
    p.set_text(problem.prompt);
    p.set_reference_answer(problem.answer);
    p.add_tokens(tokenizer_->bos_id().value_or(1));
    TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer_->Encode(problem.prompt));
    for (int32_t t : ids) p.add_tokens(t);
    return p;
  }

  ArithmeticTask task_;
  std::shared_ptr<const models::Tokenizer> tokenizer_;
  TaskSplit split_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PromptDataset>> MakeTaskPrompts(
    const JobSpec& spec, std::shared_ptr<const models::Tokenizer> tokenizer) {
  if (spec.data.task != "arithmetic") {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.task: the RL recipes run the arithmetic task, not '", spec.data.task, "'"));
  }
  ArithmeticTaskOptions o;
  o.digits = spec.data.task_params.value("digits", 2);
  o.num_train = spec.data.task_params.value("num_train", 0);
  o.dropped_carry_rate = spec.data.task_params.value("dropped_carry_rate", 0.0);
  o.num_heldout = spec.data.heldout_size;
  o.seed = static_cast<uint64_t>(spec.data.seed);
  TROUPE_ASSIGN_OR_RETURN(ArithmeticTask task, ArithmeticTask::Create(o));
  return std::unique_ptr<PromptDataset>(
      std::make_unique<ArithmeticPrompts>(std::move(task), std::move(tokenizer)));
}

}  // namespace troupe::recipes
