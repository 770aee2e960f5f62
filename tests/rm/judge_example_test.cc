// examples/make_arith_judge.py, the arithmetic judge's SFT records (examples/judge_arith.yaml):
// every problem is one of the built-in arithmetic task's training problems for the split of
// examples/grpo_arith.yaml (data.seed 1, data.heldout_size 500), so no RL held-out problem is in
// either file; judge_val.jsonl's problems are not in judge_train.jsonl; every reply is the true
// sum, "=" and the right verdict ("Y" exactly when the answer is the sum; the verdict alone with
// --verdict-only); the held-out records are balanced; and the wrong answers include the kinds a
// policy writes (the dropped carry, no answer, a leading zero).
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tasks/arithmetic/arithmetic_task.h"
#include "tests/online/resume_harness.h"

namespace troupe::tests {
namespace {

void CheckRecords(bool verdict_only) {
  const std::string dir = FreshTestDir(verdict_only ? "judge-verdict-only" : "judge-split");
  const int rc = std::system(absl::StrCat("python3 examples/make_arith_judge.py --out ", dir,
                                          "/data", verdict_only ? " --verdict-only --sums 3" : "",
                                          " > ", dir, "/data.log 2>&1")
                                 .c_str());
  ASSERT_EQ(rc, 0) << ReadFile(dir + "/data.log");
  absl::StatusOr<tasks::ArithmeticTask> task =
      tasks::ArithmeticTask::Create({.digits = 2, .num_train = 0, .num_heldout = 500, .seed = 1});
  ASSERT_TRUE(task.ok()) << task.status();
  std::set<std::string> rl_heldout, rl_train;
  for (const tasks::ArithmeticProblem& p : task->Problems(tasks::TaskSplit::kHeldout)) {
    rl_heldout.insert(p.prompt);
  }
  for (const tasks::ArithmeticProblem& p : task->Problems(tasks::TaskSplit::kTrain)) {
    rl_train.insert(p.prompt);
  }
  ASSERT_EQ(rl_train.size(), 7600u);

  std::set<std::string> problems[2];
  int verdicts[2][2] = {{0, 0}, {0, 0}};  // [file][Y, N]
  int empty_answers = 0, leading_zeros = 0, dropped_carries = 0, sum_records = 0;
  for (int k = 0; k < 2; ++k) {
    const std::string path = dir + (k == 0 ? "/data/judge_train.jsonl" : "/data/judge_val.jsonl");
    int line_no = 0;
    for (absl::string_view line : absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty())) {
      ++line_no;
      const std::string where = absl::StrCat(path, ":", line_no);
      const nlohmann::json r = nlohmann::json::parse(line);
      const std::string prompt = r.at("prompt"), response = r.at("response");
      const size_t eq = prompt.find('=');
      ASSERT_NE(eq, std::string::npos) << where;
      const std::string problem = prompt.substr(0, eq + 1);  // "23+58="
      EXPECT_EQ(rl_heldout.count(problem), 0u) << where << ": an RL held-out problem";
      EXPECT_EQ(rl_train.count(problem), 1u) << where;
      problems[k].insert(problem);
      const std::vector<std::string> ab = absl::StrSplit(problem.substr(0, eq), '+');
      ASSERT_EQ(ab.size(), 2u) << where;
      const int sum = std::stoi(ab[0]) + std::stoi(ab[1]);
      if (prompt.size() == eq + 1) {  // a record of the sum itself (--sums)
        EXPECT_EQ(k, 0) << where << ": held-out records are verdicts only";
        ++sum_records;
        EXPECT_EQ(response, std::to_string(sum)) << where;
        continue;
      }
      ASSERT_EQ(prompt.back(), '|') << where;
      const std::string answer = prompt.substr(eq + 1, prompt.size() - eq - 2);
      const bool right = answer == std::to_string(sum);
      const std::string verdict = right ? "Y" : "N";
      EXPECT_EQ(response, verdict_only ? verdict : absl::StrCat(sum, "=", verdict)) << where;
      ++verdicts[k][right ? 0 : 1];
      if (!right) {
        if (answer.empty()) ++empty_answers;
        if (answer.size() > 1 && answer[0] == '0') ++leading_zeros;
        if (sum >= 100 && answer == std::to_string(sum).substr(1)) ++dropped_carries;
      }
    }
  }
  EXPECT_EQ(problems[0].size(), 7100u);
  EXPECT_EQ(problems[1].size(), 500u);
  for (const std::string& p : problems[1]) EXPECT_EQ(problems[0].count(p), 0u) << p;
  EXPECT_EQ(verdicts[0][0], verdicts[0][1]);  // as many right answers as wrong ones
  EXPECT_EQ(verdicts[1][0], 250);
  EXPECT_EQ(verdicts[1][1], 250);
  EXPECT_GT(empty_answers, 0);
  EXPECT_GT(leading_zeros, 0);
  EXPECT_GT(dropped_carries, 100);
  EXPECT_EQ(sum_records, verdict_only ? 3 * 7100 : 0);
}

TEST(JudgeExample, RecordsAreTheArithmeticTasksTrainProblemsWithRightVerdicts) {
  CheckRecords(/*verdict_only=*/false);
}

TEST(JudgeExample, VerdictOnlyRecordsAndSumRecordsToo) { CheckRecords(/*verdict_only=*/true); }

}  // namespace
}  // namespace troupe::tests
