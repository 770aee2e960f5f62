#include "tasks/arithmetic/arithmetic.h"

#include <cctype>
#include <limits>
#include <stdexcept>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "tasks/arithmetic/arithmetic_sft.h"

namespace troupe::tasks {
namespace {

// Exact match: 1 for the right number, plus a small reward for a clean format.
class ArithmeticReward final : public reward::RewardFunction {
 public:
  explicit ArithmeticReward(double format_weight) : format_weight_(format_weight) {}

  reward::RewardOutput Score(const reward::RewardInput& in) const override {
    if (in.reference_answer.empty()) {
      throw std::invalid_argument("arithmetic reward: the prompt has no reference answer");
    }
    bool digits_only = !in.response_text.empty();
    for (char c : in.response_text) digits_only &= std::isdigit(static_cast<unsigned char>(c)) != 0;
    const bool well_formed = digits_only && in.stopped;
    const double correct = in.response_text == in.reference_answer ? 1.0 : 0.0;
    reward::RewardOutput out;
    out.components["correct"] = correct;
    out.components["format"] = well_formed ? 1.0 : 0.0;
    out.reward = correct + format_weight_ * (well_formed ? 1.0 : 0.0);
    return out;
  }

 private:
  double format_weight_;
};

// RL prompts: the pool if there is one, else the SFT problems; held-out: the held-out split.
class ArithmeticProblems final : public TaskProblems {
 public:
  explicit ArithmeticProblems(ArithmeticTask task) : task_(std::move(task)) {
    split_ = task_.size(TaskSplit::kPool) > 0 ? TaskSplit::kPool : TaskSplit::kTrain;
  }

  int64_t num_train() const override { return task_.size(split_); }
  TaskProblem Train(int64_t i) const override { return ToTaskProblem(task_.Problem(split_, i)); }
  std::vector<TaskProblem> HeldOut() const override {
    std::vector<TaskProblem> out;
    for (const ArithmeticProblem& p : task_.Problems(TaskSplit::kHeldout)) {
      out.push_back(ToTaskProblem(p));
    }
    return out;
  }

 private:
  static TaskProblem ToTaskProblem(const ArithmeticProblem& p) { return {p.prompt, p.answer}; }

  ArithmeticTask task_;
  TaskSplit split_;
};

absl::StatusOr<std::unique_ptr<TaskProblems>> MakeArithmeticProblems(const TaskConfig& config) {
  TROUPE_ASSIGN_OR_RETURN(ArithmeticTask task,
                          ArithmeticTask::Create(ArithmeticOptionsFromConfig(config)));
  return std::unique_ptr<TaskProblems>(std::make_unique<ArithmeticProblems>(std::move(task)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<reward::RewardFunction>> MakeArithmeticReward(
    const nlohmann::json& config) {
  for (auto it = config.begin(); it != config.end(); ++it) {
    if (it.key() != "format_weight") {
      return absl::InvalidArgumentError(absl::StrCat("reward config: unknown key '", it.key(),
                                                     "' (arithmetic takes format_weight)"));
    }
  }
  const nlohmann::json& w = config.value("format_weight", nlohmann::json(0.1));
  if (!w.is_number() || w.get<double>() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reward config format_weight must be a number >= 0, got ", w.dump()));
  }
  return std::unique_ptr<reward::RewardFunction>(new ArithmeticReward(w.get<double>()));
}

ArithmeticTaskOptions ArithmeticOptionsFromConfig(const TaskConfig& config) {
  ArithmeticTaskOptions o;
  o.digits = config.params.value("digits", o.digits);
  o.num_train = config.params.value("num_train", o.num_train);
  o.dropped_carry_rate = config.params.value("dropped_carry_rate", o.dropped_carry_rate);
  o.num_heldout = config.heldout_size;
  o.seed = config.seed;
  return o;
}

TaskDefinition ArithmeticTaskDefinition() {
  TaskDefinition task;
  task.description = "addition of two digits-digit numbers, exact-match reward";
  task.supports_sft = true;
  task.params = {
      {"digits", TaskParam::Type::kInt, 2, 1, 3, "operand digits"},
      {"num_train", TaskParam::Type::kInt, 0, 0, std::numeric_limits<double>::infinity(),
       "SFT training problems; 0 = every problem not held out"},
      {"dropped_carry_rate", TaskParam::Type::kNumber, 0.0, 0.0, 1.0,
       "share of carrying SFT targets written by a careless teacher (carries dropped)"},
  };
  task.alphabet = std::string(ArithmeticTask::kAlphabet);
  task.make_problems = MakeArithmeticProblems;
  task.make_reward = MakeArithmeticReward;
  task.make_sft_data = MakeArithmeticSftData;
  return task;
}

TROUPE_REGISTER_TASK(kArithmeticTaskName, ArithmeticTaskDefinition);

}  // namespace troupe::tasks
