#include "tasks/arithmetic/arithmetic_task.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/splitmix64.h"
#include "nlohmann/json.hpp"

namespace troupe::tasks {

absl::StatusOr<ArithmeticTask> ArithmeticTask::Create(const ArithmeticTaskOptions& options) {
  auto error = [](absl::string_view field, int64_t value, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("arithmetic task: ", field, " = ", value, " ", why));
  };
  if (options.digits < 1 || options.digits > 3) {
    return error("digits", options.digits, "must lie in [1, 3]");
  }
  if (options.num_heldout <= 0) return error("num_heldout", options.num_heldout, "must be > 0");
  if (options.num_train < 0) return error("num_train", options.num_train, "must be >= 0");
  if (!(options.dropped_carry_rate >= 0 && options.dropped_carry_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("arithmetic task: dropped_carry_rate = ", options.dropped_carry_rate,
                     " must lie in [0, 1]"));
  }

  ArithmeticTask task(options);
  int64_t high = 1;
  for (int64_t d = 0; d < options.digits; ++d) high *= 10;
  task.high_ = high;
  task.low_ = options.digits == 1 ? 0 : high / 10;
  task.range_ = high - task.low_;
  const int64_t total = task.range_ * task.range_;
  if (options.num_heldout >= total) {
    return error("num_heldout", options.num_heldout,
                 absl::StrCat("leaves no training problem among the ", total));
  }
  if (options.num_heldout + options.num_train > total) {
    return error("num_train", options.num_train,
                 absl::StrCat("+ num_heldout exceeds the ", total, " problems"));
  }
  if (task.options_.num_train == 0) task.options_.num_train = total - options.num_heldout;

  task.order_.resize(total);
  for (int64_t i = 0; i < total; ++i) task.order_[i] = static_cast<uint32_t>(i);
  uint64_t state = options.seed;
  for (int64_t i = total - 1; i > 0; --i) {
    // Multiply-shift range reduction: bias below 2^-40 for these sizes.
    const int64_t j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(SplitMix64Next(state)) * static_cast<uint64_t>(i + 1)) >>
        64);
    std::swap(task.order_[i], task.order_[j]);
  }
  return task;
}

absl::StatusOr<ArithmeticTask> ArithmeticTask::FromJson(absl::string_view json,
                                                        absl::string_view source) {
  auto error = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", why));
  };
  nlohmann::json root = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return error("not a JSON object");
  if (!root.contains("task") || root["task"] != "addition") {
    return error("key 'task' must be \"addition\"");
  }
  ArithmeticTaskOptions options;
  for (auto [key, field] : {std::pair<const char*, int64_t*>{"digits", &options.digits},
                            {"num_train", &options.num_train},
                            {"num_heldout", &options.num_heldout}}) {
    if (!root.contains(key) || !root[key].is_number_integer()) {
      return error(absl::StrCat("key '", key, "' must be an integer"));
    }
    *field = root[key].get<int64_t>();
  }
  if (!root.contains("seed") || !root["seed"].is_number_unsigned()) {
    return error("key 'seed' must be a non-negative integer");
  }
  options.seed = root["seed"].get<uint64_t>();
  if (root.contains("dropped_carry_rate")) {
    if (!root["dropped_carry_rate"].is_number()) {
      return error("key 'dropped_carry_rate' must be a number");
    }
    options.dropped_carry_rate = root["dropped_carry_rate"].get<double>();
  }
  absl::StatusOr<ArithmeticTask> task = Create(options);
  if (!task.ok()) return error(task.status().message());
  return task;
}

std::string ArithmeticTask::ToJson() const {
  nlohmann::json root = {{"task", "addition"},
                         {"digits", options_.digits},
                         {"num_train", options_.num_train},
                         {"num_heldout", options_.num_heldout},
                         {"seed", options_.seed},
                         {"dropped_carry_rate", options_.dropped_carry_rate}};
  return root.dump(2) + "\n";
}

int64_t ArithmeticTask::size(TaskSplit split) const {
  switch (split) {
    case TaskSplit::kHeldout:
      return options_.num_heldout;
    case TaskSplit::kTrain:
      return options_.num_train;
    case TaskSplit::kPool:
      return num_problems() - options_.num_heldout - options_.num_train;
  }
  return 0;
}

ArithmeticProblem ArithmeticTask::Problem(TaskSplit split, int64_t i) const {
  int64_t offset = 0;
  if (split == TaskSplit::kTrain) offset = options_.num_heldout;
  if (split == TaskSplit::kPool) offset = options_.num_heldout + options_.num_train;
  return ProblemAt(order_.at(offset + i), split == TaskSplit::kTrain);
}

std::vector<ArithmeticProblem> ArithmeticTask::Problems(TaskSplit split) const {
  std::vector<ArithmeticProblem> problems;
  problems.reserve(size(split));
  for (int64_t i = 0; i < size(split); ++i) problems.push_back(Problem(split, i));
  return problems;
}

ArithmeticProblem ArithmeticTask::ProblemAt(int64_t index, bool careless) const {
  ArithmeticProblem problem;
  problem.a = low_ + index / range_;
  problem.b = low_ + index % range_;
  problem.prompt = absl::StrCat(problem.a, "+", problem.b, "=");
  problem.answer = absl::StrCat(problem.a + problem.b);
  problem.target = problem.answer;
  if (careless && options_.dropped_carry_rate > 0 && Overflows(problem)) {
    // A fixed coin per problem (seed, index): the same problem always gets the same target.
    uint64_t state = options_.seed ^ (static_cast<uint64_t>(index) * 0xd1b54a32d192ed03ULL);
    const double coin = static_cast<double>(SplitMix64Next(state) >> 11) * 0x1.0p-53;
    if (coin < options_.dropped_carry_rate) {
      problem.target = absl::StrFormat("%0*d", options_.digits, (problem.a + problem.b) - high_);
    }
  }
  return problem;
}

bool ArithmeticTask::Overflows(const ArithmeticProblem& problem) const {
  return problem.a + problem.b >= high_;
}

bool ArithmeticTask::IsCorrect(const ArithmeticProblem& problem, absl::string_view completion) {
  return completion == problem.answer;
}

}  // namespace troupe::tasks
