#include "tasks/arithmetic/arithmetic_sft.h"

#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "models/tokenizers/char_tokenizer.h"
#include "tasks/arithmetic/arithmetic.h"

namespace troupe::tasks {

int64_t ArithmeticSftExamples::num_train() const { return task_.size(TaskSplit::kTrain); }

data::SftExample ArithmeticSftExamples::Train(int64_t i) const {
  ArithmeticProblem problem = task_.Problem(TaskSplit::kTrain, i);
  return data::SftExample{std::move(problem.prompt), std::move(problem.target)};
}

std::vector<data::SftHeldOut> ArithmeticSftExamples::HeldOut() const {
  std::vector<data::SftHeldOut> heldout;
  for (ArithmeticProblem& problem : task_.Problems(TaskSplit::kHeldout)) {
    heldout.push_back(data::SftHeldOut{std::move(problem.prompt), std::move(problem.answer)});
  }
  return heldout;
}

std::string ArithmeticSftExamples::Describe() const {
  return absl::StrFormat("%d-digit addition, %d train / %d held-out problems (of %d)",
                         task_.options().digits, task_.size(TaskSplit::kTrain),
                         task_.size(TaskSplit::kHeldout), task_.num_problems());
}

absl::StatusOr<TaskSftData> MakeArithmeticSftData(const TaskConfig& config) {
  const ArithmeticTaskOptions options = ArithmeticOptionsFromConfig(config);
  TROUPE_ASSIGN_OR_RETURN(ArithmeticTask task, ArithmeticTask::Create(options));
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<models::CharTokenizer> tokenizer,
                          models::CharTokenizer::Create(ArithmeticTask::kAlphabet));
  const int64_t digits = options.digits;
  TaskSftData data;
  if (options.dropped_carry_rate > 0) {
    int64_t overflowing = 0;
    const std::vector<ArithmeticProblem> heldout = task.Problems(TaskSplit::kHeldout);
    for (const ArithmeticProblem& p : heldout) overflowing += task.Overflows(p);
    data.notes.push_back(absl::StrFormat(
        "careless teacher: %.0f%% of the train targets whose sum overflows %d digits drop the "
        "final carry; %.1f%% of the held-out problems overflow",
        100 * options.dropped_carry_rate, digits, 100.0 * overflowing / heldout.size()));
  }
  data.files.push_back({"task.json", task.ToJson()});
  data.examples = std::make_shared<ArithmeticSftExamples>(std::move(task));
  data.tokenizer = std::move(tokenizer);
  data.grader = data::ExactMatchGrader();  // ArithmeticTask::IsCorrect
  data.add_bos = true;
  data.skip_special_tokens = false;
  data.max_new_tokens = digits + 2;  // digits + 1 digits, <eos>
  data.max_seq_len = (2 * digits + 3) + (digits + 2);
  return data;
}

}  // namespace troupe::tasks
