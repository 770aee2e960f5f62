#include "recipes/sft/arithmetic_sft.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/atomic_file.h"
#include "base/status_macros.h"
#include "models/tokenizers/char_tokenizer.h"

namespace troupe::recipes {

using tasks::ArithmeticProblem;
using tasks::ArithmeticTask;
using tasks::TaskSplit;

int64_t ArithmeticSftExamples::num_train() const { return task_.size(TaskSplit::kTrain); }

SftExample ArithmeticSftExamples::Train(int64_t i) const {
  ArithmeticProblem problem = task_.Problem(TaskSplit::kTrain, i);
  return SftExample{std::move(problem.prompt), std::move(problem.target)};
}

std::vector<SftHeldOut> ArithmeticSftExamples::HeldOut() const {
  std::vector<SftHeldOut> heldout;
  for (ArithmeticProblem& problem : task_.Problems(TaskSplit::kHeldout)) {
    heldout.push_back(SftHeldOut{std::move(problem.prompt), std::move(problem.answer)});
  }
  return heldout;
}

std::string ArithmeticSftExamples::Describe() const {
  return absl::StrFormat("%d-digit addition, %d train / %d held-out problems (of %d)",
                         task_.options().digits, task_.size(TaskSplit::kTrain),
                         task_.size(TaskSplit::kHeldout), task_.num_problems());
}

absl::Status ValidateArithmeticSftOptions(const ArithmeticSftOptions& options) {
  TROUPE_RETURN_IF_ERROR(ValidateSftOptions(options.sft));
  return ArithmeticTask::Create(options.task).status();
}

absl::StatusOr<SftResult> RunArithmeticSft(const ArithmeticSftOptions& options,
                                           const std::function<void(const std::string&)>& log) {
  TROUPE_RETURN_IF_ERROR(ValidateArithmeticSftOptions(options));
  TROUPE_ASSIGN_OR_RETURN(ArithmeticTask task, ArithmeticTask::Create(options.task));
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::CharTokenizer> tokenizer,
                          models::CharTokenizer::Create(ArithmeticTask::kAlphabet));
  const int64_t digits = options.task.digits;
  if (options.task.dropped_carry_rate > 0) {
    int64_t overflowing = 0;
    const std::vector<ArithmeticProblem> heldout = task.Problems(TaskSplit::kHeldout);
    for (const ArithmeticProblem& p : heldout) overflowing += task.Overflows(p);
    log(absl::StrFormat(
        "careless teacher: %.0f%% of the train targets whose sum overflows %d digits drop the "
        "final carry; %.1f%% of the held-out problems overflow",
        100 * options.task.dropped_carry_rate, digits, 100.0 * overflowing / heldout.size()));
  }
  auto examples = std::make_shared<ArithmeticSftExamples>(task);
  SftInputs inputs;
  inputs.examples = examples;
  inputs.tokenizer = std::move(tokenizer);
  inputs.judge = ExactMatchJudge();  // ArithmeticTask::IsCorrect
  inputs.add_bos = true;
  inputs.skip_special_tokens = false;
  SftOptions sft = options.sft;
  if (sft.max_new_tokens == 0) sft.max_new_tokens = digits + 2;  // digits + 1 digits, <eos>
  if (sft.max_seq_len == 0) sft.max_seq_len = (2 * digits + 3) + (digits + 2);
  TROUPE_ASSIGN_OR_RETURN(SftResult result, RunSft(inputs, sft, log));
  if (!sft.out_dir.empty()) {
    TROUPE_RETURN_IF_ERROR(
        WriteFileAtomically(absl::StrCat(sft.out_dir, "/task.json"), task.ToJson()));
  }
  return result;
}

}  // namespace troupe::recipes
