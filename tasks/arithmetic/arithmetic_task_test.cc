#include "tasks/arithmetic/arithmetic_task.h"

#include <cstdio>
#include <set>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace troupe::tasks {
namespace {

using ::testing::HasSubstr;

ArithmeticTask MakeTask(const ArithmeticTaskOptions& options) {
  absl::StatusOr<ArithmeticTask> task = ArithmeticTask::Create(options);
  EXPECT_TRUE(task.ok()) << task.status();
  return *std::move(task);
}

std::set<std::pair<int64_t, int64_t>> Pairs(const ArithmeticTask& task, TaskSplit split) {
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (const ArithmeticProblem& p : task.Problems(split)) pairs.insert({p.a, p.b});
  return pairs;
}

TEST(ArithmeticTask, WritesPromptsAndAnswersAsPlainDecimalAddition) {
  ArithmeticTask task = MakeTask({.digits = 2, .num_train = 0, .num_heldout = 100, .seed = 1});
  for (const ArithmeticProblem& p : task.Problems(TaskSplit::kHeldout)) {
    EXPECT_GE(p.a, 10);
    EXPECT_LE(p.a, 99);
    EXPECT_GE(p.b, 10);
    EXPECT_LE(p.b, 99);
    EXPECT_EQ(p.prompt, std::to_string(p.a) + "+" + std::to_string(p.b) + "=");
    EXPECT_EQ(p.answer, std::to_string(p.a + p.b));
    EXPECT_EQ(p.prompt.find_first_not_of(std::string(ArithmeticTask::kAlphabet)),
              std::string::npos);
  }
  EXPECT_EQ(task.num_problems(), 90 * 90);
}

TEST(ArithmeticTask, SplitsAreDisjointAndCoverTheSpace) {
  ArithmeticTask task = MakeTask({.digits = 2, .num_train = 3000, .num_heldout = 500, .seed = 3});
  auto heldout = Pairs(task, TaskSplit::kHeldout);
  auto train = Pairs(task, TaskSplit::kTrain);
  auto pool = Pairs(task, TaskSplit::kPool);
  EXPECT_EQ(heldout.size(), 500u);
  EXPECT_EQ(train.size(), 3000u);
  EXPECT_EQ(pool.size(), 8100u - 3500u);
  std::set<std::pair<int64_t, int64_t>> all = heldout;
  all.insert(train.begin(), train.end());
  all.insert(pool.begin(), pool.end());
  EXPECT_EQ(all.size(), 8100u);  // no problem in two splits
}

TEST(ArithmeticTask, ZeroTrainSizeMeansEverythingNotHeldOut) {
  ArithmeticTask task = MakeTask({.digits = 1, .num_train = 0, .num_heldout = 20, .seed = 0});
  EXPECT_EQ(task.size(TaskSplit::kTrain), 80);
  EXPECT_EQ(task.size(TaskSplit::kPool), 0);
}

TEST(ArithmeticTask, TheSeedChoosesTheSplitDeterministically) {
  const ArithmeticTaskOptions options{.digits = 3, .num_train = 100, .num_heldout = 50, .seed = 9};
  EXPECT_EQ(Pairs(MakeTask(options), TaskSplit::kHeldout),
            Pairs(MakeTask(options), TaskSplit::kHeldout));
  ArithmeticTaskOptions other = options;
  other.seed = 10;
  EXPECT_NE(Pairs(MakeTask(options), TaskSplit::kHeldout),
            Pairs(MakeTask(other), TaskSplit::kHeldout));
  // Held-out problems are spread over the space, not the first rows of it.
  std::set<int64_t> first_operands;
  for (const auto& [a, b] : Pairs(MakeTask(options), TaskSplit::kHeldout)) {
    first_operands.insert(a);
  }
  EXPECT_GT(first_operands.size(), 40u);
}

TEST(ArithmeticTask, RoundTripsThroughJson) {
  ArithmeticTask task = MakeTask({.digits = 3, .num_train = 1500, .num_heldout = 500, .seed = 4});
  absl::StatusOr<ArithmeticTask> copy = ArithmeticTask::FromJson(task.ToJson(), "task.json");
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(Pairs(*copy, TaskSplit::kHeldout), Pairs(task, TaskSplit::kHeldout));
  EXPECT_EQ(Pairs(*copy, TaskSplit::kTrain), Pairs(task, TaskSplit::kTrain));
}

TEST(ArithmeticTask, RejectsBadOptionsAndJsonNamingTheField) {
  EXPECT_THAT(std::string(ArithmeticTask::Create({.digits = 4}).status().message()),
              HasSubstr("digits = 4"));
  EXPECT_THAT(
      std::string(ArithmeticTask::Create({.digits = 1, .num_heldout = 100}).status().message()),
      HasSubstr("num_heldout = 100"));
  EXPECT_THAT(std::string(ArithmeticTask::Create({.digits = 1, .num_train = 90, .num_heldout = 20})
                              .status()
                              .message()),
              HasSubstr("num_train = 90"));
  EXPECT_THAT(std::string(ArithmeticTask::FromJson("{\"task\": \"addition\", \"digits\": \"2\"}",
                                                   "ckpt/task.json")
                              .status()
                              .message()),
              HasSubstr("ckpt/task.json: key 'digits'"));
  EXPECT_THAT(std::string(ArithmeticTask::FromJson("[", "t.json").status().message()),
              HasSubstr("t.json: not a JSON object"));
}

TEST(ArithmeticTask, ACarelessTeacherDropsTheFinalCarryOfAShareOfTrainTargetsOnly) {
  ArithmeticTask task = MakeTask(
      {.digits = 2, .num_train = 0, .num_heldout = 500, .seed = 5, .dropped_carry_rate = 0.7});
  int64_t overflowing = 0;
  int64_t dropped = 0;
  for (const ArithmeticProblem& p : task.Problems(TaskSplit::kTrain)) {
    EXPECT_EQ(p.answer, std::to_string(p.a + p.b));
    if (!task.Overflows(p)) {
      EXPECT_EQ(p.target, p.answer) << p.prompt;
      continue;
    }
    ++overflowing;
    if (p.target != p.answer) {
      ++dropped;
      char expected[8];
      std::snprintf(expected, sizeof(expected), "%02d", static_cast<int>(p.a + p.b - 100));
      EXPECT_EQ(p.target, expected) << p.prompt;  // "93+21=" -> "14", "50+55=" -> "05"
    }
  }
  EXPECT_GT(overflowing, 4000);
  EXPECT_NEAR(static_cast<double>(dropped) / overflowing, 0.7, 0.03);
  for (const ArithmeticProblem& p : task.Problems(TaskSplit::kHeldout)) {
    EXPECT_EQ(p.target, p.answer);
  }
  // The same problem gets the same target every time.
  EXPECT_EQ(task.Problem(TaskSplit::kTrain, 17).target, task.Problem(TaskSplit::kTrain, 17).target);
  absl::StatusOr<ArithmeticTask> copy = ArithmeticTask::FromJson(task.ToJson(), "task.json");
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ(copy->options().dropped_carry_rate, 0.7);
  EXPECT_THAT(std::string(ArithmeticTask::Create({.dropped_carry_rate = 1.5}).status().message()),
              HasSubstr("dropped_carry_rate = 1.5"));
}

TEST(ArithmeticTask, IsCorrectIsExactMatch) {
  ArithmeticProblem p{23, 58, "23+58=", "81"};
  EXPECT_TRUE(ArithmeticTask::IsCorrect(p, "81"));
  EXPECT_FALSE(ArithmeticTask::IsCorrect(p, "081"));
  EXPECT_FALSE(ArithmeticTask::IsCorrect(p, "8"));
  EXPECT_FALSE(ArithmeticTask::IsCorrect(p, "81="));
}

}  // namespace
}  // namespace troupe::tasks
