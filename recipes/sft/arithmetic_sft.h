// The SFT recipe on the synthetic arithmetic task (tasks/arithmetic/arithmetic_task.h): its
// supervised data as SftExamples, and RunArithmeticSft, the generic recipe (sft_recipe.h) with the
// task's character tokenizer and exact match.
//
//   RunArithmeticSft(options):
//     task = ArithmeticTask(options.task)
//     RunSft with
//       examples   ArithmeticSftExamples(task): train "23+58=" -> target "81" (a careless
//                  teacher's target when dropped_carry_rate > 0), held-out "23+58=" -> "81"
//       tokenizer  CharTokenizer(ArithmeticTask::kAlphabet): <pad>=0 <bos>=1 <eos>=2, "0-9+=";
//                  <bos> before every prompt
//       judge      exact match; special tokens kept in the decoded answer
//       lengths    digits + 2 new tokens (the answer's up to digits + 1 digits, <eos>), sequences
//                  of 3 * digits + 5 tokens (unless options.sft sets them)
//     and task.json (ArithmeticTask::ToJson) beside the checkpoint, so a later job rebuilds the
//     same splits.
//
// Thread-safety: as RunSft (one at a time per process); ArithmeticSftExamples is immutable.
#ifndef TROUPE_RECIPES_SFT_ARITHMETIC_SFT_H_
#define TROUPE_RECIPES_SFT_ARITHMETIC_SFT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recipes/sft/sft_examples.h"
#include "recipes/sft/sft_recipe.h"
#include "tasks/arithmetic/arithmetic_task.h"

namespace troupe::recipes {

// The task's train split (prompt, target) and held-out split (prompt, answer), in split order.
class ArithmeticSftExamples final : public SftExamples {
 public:
  explicit ArithmeticSftExamples(tasks::ArithmeticTask task) : task_(std::move(task)) {}

  int64_t num_train() const override;
  SftExample Train(int64_t i) const override;
  std::vector<SftHeldOut> HeldOut() const override;
  // "2-digit addition, 7600 train / 500 held-out problems (of 8100)".
  std::string Describe() const override;

  const tasks::ArithmeticTask& task() const { return task_; }

 private:
  tasks::ArithmeticTask task_;
};

struct ArithmeticSftOptions {
  tasks::ArithmeticTaskOptions task;
  // Training, evaluation and checkpoint options. max_new_tokens and max_seq_len: 0 = from
  // task.digits (see above).
  SftOptions sft;
};

// InvalidArgument naming the field (ValidateSftOptions, then the task's options).
absl::Status ValidateArithmeticSftOptions(const ArithmeticSftOptions& options);

// Runs the recipe as described above; errors as RunSft, and from writing task.json.
absl::StatusOr<SftResult> RunArithmeticSft(const ArithmeticSftOptions& options,
                                           const std::function<void(const std::string&)>& log);

}  // namespace troupe::recipes

#endif  // TROUPE_RECIPES_SFT_ARITHMETIC_SFT_H_
