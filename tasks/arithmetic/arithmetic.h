// The arithmetic task, registered as "arithmetic": addition of two `digits`-digit numbers,
// "23+58=" → "81" (the problems and splits: arithmetic_task.h). Its job spec keys under `data:`:
//
//   key                 type    default  meaning
//   digits              int     2        operand digits, in [1, 3]
//   num_train           int     0        SFT training problems; 0 = every problem not held out
//   dropped_carry_rate  number  0.0      share of carrying SFT targets a careless teacher wrote
//
// (data.seed and data.heldout_size, common to all tasks, choose its splits.)
//
// RL prompts are the problems in neither split if there are any, else the SFT problems themselves
// (the verifier checks the true answer, whatever the SFT targets said); held-out prompts are the
// held-out split. The verifier (reward "arithmetic") gives 1 for the exact answer plus
// format_weight (config key, default 0.1, >= 0) if the response is a well-formed number that
// ended with the stop token, so the policy learns to stop.
//
// Thread-safety: the functions below are pure.
#ifndef TROUPE_TASKS_ARITHMETIC_ARITHMETIC_H_
#define TROUPE_TASKS_ARITHMETIC_ARITHMETIC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reward/reward_function.h"
#include "tasks/arithmetic/arithmetic_task.h"
#include "tasks/task.h"

namespace troupe::tasks {

// The name the task is registered under.
inline constexpr char kArithmeticTaskName[] = "arithmetic";

// The task's definition (params, alphabet, problems, verifier) as it is registered.
TaskDefinition ArithmeticTaskDefinition();

// The ArithmeticTask options of a TaskConfig (its params already defaulted, as the job spec and
// MakeTaskProblems resolve them): the SFT recipe trains on the same splits the RL prompts use.
ArithmeticTaskOptions ArithmeticOptionsFromConfig(const TaskConfig& config);

// The verifier; INVALID_ARGUMENT for a config key other than format_weight or a bad value.
absl::StatusOr<std::unique_ptr<reward::RewardFunction>> MakeArithmeticReward(
    const nlohmann::json& config);

}  // namespace troupe::tasks

#endif  // TROUPE_TASKS_ARITHMETIC_ARITHMETIC_H_
