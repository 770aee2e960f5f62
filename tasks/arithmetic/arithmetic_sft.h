// The arithmetic task's supervised data (tasks/arithmetic/arithmetic_task.h), registered as the
// task's make_sft_data (tasks/task.h), so the SFT recipe trains on it by the task's name
// (recipes/sft/task_sft.h) without naming the task:
//
//   examples   ArithmeticSftExamples(task): train "23+58=" -> target "81" (a careless teacher's
//              target when dropped_carry_rate > 0), held-out "23+58=" -> "81"
//   tokenizer  CharTokenizer(ArithmeticTask::kAlphabet): <pad>=0 <bos>=1 <eos>=2, "0-9+=";
//              <bos> before every prompt
//   grader     exact match (ArithmeticTask::IsCorrect); special tokens kept in the decoded answer
//   lengths    digits + 2 new tokens (the answer's up to digits + 1 digits, <eos>), sequences of
//              3 * digits + 5 tokens (unless the SFT options set them)
//   notes      with a careless teacher, the share of held-out problems whose sum overflows
//   files      task.json (ArithmeticTask::ToJson) beside the checkpoint, so a later job rebuilds
//              the same splits.
//
// Thread-safety: ArithmeticSftExamples is immutable; the function is pure.
#ifndef TROUPE_TASKS_ARITHMETIC_ARITHMETIC_SFT_H_
#define TROUPE_TASKS_ARITHMETIC_ARITHMETIC_SFT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/sft_examples.h"
#include "tasks/arithmetic/arithmetic_task.h"
#include "tasks/task.h"

namespace troupe::tasks {

// The task's train split (prompt, target) and held-out split (prompt, answer), in split order.
class ArithmeticSftExamples final : public data::SftExamples {
 public:
  explicit ArithmeticSftExamples(ArithmeticTask task) : task_(std::move(task)) {}

  int64_t num_train() const override;
  data::SftExample Train(int64_t i) const override;
  std::vector<data::SftHeldOut> HeldOut() const override;
  // "2-digit addition, 7600 train / 500 held-out problems (of 8100)".
  std::string Describe() const override;

  const ArithmeticTask& task() const { return task_; }

 private:
  ArithmeticTask task_;
};

// The supervised data of the file comment for `config` (params defaulted); the task's
// INVALID_ARGUMENT naming the option for a config it cannot serve ("digits = 7 ...").
absl::StatusOr<TaskSftData> MakeArithmeticSftData(const TaskConfig& config);

}  // namespace troupe::tasks

#endif  // TROUPE_TASKS_ARITHMETIC_ARITHMETIC_SFT_H_
