// ArithmeticTask: a synthetic, verifiable task for the SFT demo and the GRPO stage after it —
// addition of two `digits`-digit numbers, written "23+58=" with the answer "81".
//
// The problem space is every pair (a, b) with a, b in [10^(digits-1), 10^digits) (for digits = 1:
// [0, 10)), ordered by a then b. A seeded permutation of it (Fisher-Yates driven by SplitMix64,
// so it is the same on every platform) is cut into three disjoint splits:
//
//   permutation:  [ held-out (num_heldout) | train (num_train) | pool (the rest) ]
//
//   kHeldout  evaluation only (exact match);
//   kTrain    the SFT data; num_train = 0 means "everything not held out" (the pool is then empty);
//   kPool     problems in neither: prompts for RL, whose reward needs no label.
//
// A careless teacher (dropped_carry_rate r > 0): of the *training* problems whose sum overflows
// `digits` digits (a + b >= 10^digits), a seeded fraction r has its target written without the
// final carry, zero-padded to `digits` digits ("93+21=14", "50+55=05"). SFT on such data imitates
// the teacher, so its greedy held-out exact match levels off near the share of problems that do
// not overflow, however long it trains, while the true answer keeps probability ~1 - r on the
// others: the room a verifier-rewarded RL stage can claim. Held-out and pool problems, and
// IsCorrect, always use the true sum.
//
// The task round-trips through JSON (task.json in the SFT checkpoint), so a later job rebuilds
// exactly the same splits:
//   {"task": "addition", "digits": 2, "num_train": 7600, "num_heldout": 500, "seed": 1,
//    "dropped_carry_rate": 0.7}
//
// Thread-safety: immutable after Create; all methods may be called concurrently.
#ifndef TROUPE_TASKS_ARITHMETIC_ARITHMETIC_TASK_H_
#define TROUPE_TASKS_ARITHMETIC_ARITHMETIC_TASK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::tasks {

struct ArithmeticTaskOptions {
  int64_t digits = 2;               // 1..3 (3 digits: 810,000 problems).
  int64_t num_train = 0;            // >= 0; 0 = every problem not held out.
  int64_t num_heldout = 500;        // > 0.
  uint64_t seed = 0;                // Chooses the permutation, hence the splits.
  double dropped_carry_rate = 0.0;  // In [0, 1]: see "careless teacher" above.
};

struct ArithmeticProblem {
  int64_t a = 0;
  int64_t b = 0;
  std::string prompt;  // "23+58="
  std::string answer;  // "81": the true sum.
  std::string target;  // What SFT trains on: `answer`, or the sum without its final carry.
};

enum class TaskSplit { kTrain, kHeldout, kPool };

class ArithmeticTask {
 public:
  // The characters prompts and answers are written with (for a CharTokenizer).
  static constexpr absl::string_view kAlphabet = "0123456789+=";

  // InvalidArgument naming the field for digits outside [1, 3], negative sizes, splits that do
  // not fit into the problem space, or dropped_carry_rate outside [0, 1].
  static absl::StatusOr<ArithmeticTask> Create(const ArithmeticTaskOptions& options);
  // Parses the JSON form; `source` (e.g. the file path) prefixes errors, which name the field.
  static absl::StatusOr<ArithmeticTask> FromJson(absl::string_view json, absl::string_view source);

  // The JSON form (see above), with num_train resolved to the actual train size.
  std::string ToJson() const;

  int64_t size(TaskSplit split) const;
  // Problem `i` (0 <= i < size(split)) of a split.
  ArithmeticProblem Problem(TaskSplit split, int64_t i) const;
  // All problems of a split (size(kPool) can be large: use Problem() for the pool).
  std::vector<ArithmeticProblem> Problems(TaskSplit split) const;
  // Problems in the whole space: 90^2 for 2 digits, 900^2 for 3.
  int64_t num_problems() const { return static_cast<int64_t>(order_.size()); }

  // Exact match: the completion (the generated text, without stop/special tokens) is the answer.
  static bool IsCorrect(const ArithmeticProblem& problem, absl::string_view completion);
  // Whether a + b has more digits than the operands (the final carry a careless teacher drops).
  bool Overflows(const ArithmeticProblem& problem) const;

  const ArithmeticTaskOptions& options() const { return options_; }

 private:
  explicit ArithmeticTask(const ArithmeticTaskOptions& options) : options_(options) {}
  // `index` into the unpermuted space; `careless` applies the teacher's dropped carries.
  ArithmeticProblem ProblemAt(int64_t index, bool careless) const;

  ArithmeticTaskOptions options_;  // num_train resolved.
  int64_t low_ = 0;                // Smallest operand.
  int64_t range_ = 0;              // Number of operand values.
  int64_t high_ = 0;               // 10^digits.
  std::vector<uint32_t> order_;    // The permutation.
};

}  // namespace troupe::tasks

#endif  // TROUPE_TASKS_ARITHMETIC_ARITHMETIC_TASK_H_
