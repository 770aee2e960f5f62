// examples/rm_arith.yaml in miniature, through the commands a user runs: preference pairs written
// by examples/make_arith_prefs.py (with its character tokenizer), then `troupe run` of the example
// job with a small budget. The saved reward model loads with models::LoadValueModel and scores the
// chosen answer above the rejected one on most training pairs; the held-out pair accuracy is
// reported (the summary lines, summary.json, metrics.jsonl). A record without its rejected answer
// stops the run before anything is written, naming FILE:LINE and the key. (The learning figure of
// the full example is a benchmark: bench/RESULTS.md.)
#include <ATen/ATen.h>
#include <torch/types.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "data/preference_pairs.h"
#include "gtest/gtest.h"
#include "models/tokenizers/tokenizer.h"
#include "models/transformer.h"
#include "nlohmann/json.hpp"
#include "recipes/rm/pair_loss.h"
#include "tasks/arithmetic/arithmetic_task.h"
#include "tests/online/resume_harness.h"

namespace troupe::tests {
namespace {

namespace fs = std::filesystem;
// Runs `command` with its output in `log`; (exit code, output).
std::pair<int, std::string> RunShell(const std::string& command, const std::string& log) {
  const int status = std::system(absl::StrCat(command, " > ", log, " 2>&1").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(log)};
}

std::string RunCommand(const std::string& data, const std::string& run,
                       const std::vector<std::string>& extra) {
  // The example starts from the arithmetic judge (examples/judge_arith.yaml, minutes to train);
  // the miniature starts from random weights of tiny.json (initializer_range 0.02, not
  // tiny_rm.json's 0.15) at a higher lr.
  std::vector<std::string> overrides = {"model.init=random",
                                        "model.config=examples/models/tiny.json",
                                        "trainer.lr=2.0e-3",
                                        "model.tokenizer=" + data + "/tokenizer.json",
                                        "data.train_files=[" + data + "/prefs_train.jsonl]",
                                        "data.val_files=[" + data + "/prefs_val.jsonl]",
                                        "trainer.total_steps=120",
                                        "trainer.warmup_steps=10",
                                        "trainer.eval_every=60",
                                        "data.train_batch_size=32",
                                        "logging.dir=" + run};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return absl::StrCat(kTroupe, " run examples/rm_arith.yaml --dashboard-port -1 ",
                      absl::StrJoin(overrides, " "));
}

TEST(RmExample, TrainsARewardModelThatPrefersTheCorrectSumAndReportsHeldOutPairAccuracy) {
  const std::string dir = FreshTestDir("rm-example");
  const std::string data = dir + "/data", run = dir + "/run";
  auto [py_rc, py_out] =
      RunShell(absl::StrCat("python3 examples/make_arith_prefs.py --out ", data,
                            " --heldout 100 --train 600 --rejected sample --pairs-per-problem 1"),
               dir + "/data.log");
  ASSERT_EQ(py_rc, 0) << py_out;
  auto [rc, out] = RunShell(RunCommand(data, run, {}), dir + "/run.log");
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("data: 600 train pairs"), std::string::npos) << out;
  EXPECT_NE(out.find("100 held-out pairs"), std::string::npos) << out;
  EXPECT_NE(out.find("held-out pair accuracy before training:"), std::string::npos) << out;
  EXPECT_NE(out.find("held-out pair accuracy after training:"), std::string::npos) << out;
  EXPECT_NE(out.find("reward model: " + run + "/rm"), std::string::npos) << out;

  // summary.json and metrics.jsonl carry the held-out pair accuracy: before, every 60 steps, after.
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(run + "/summary.json"));
  EXPECT_EQ(summary["steps"], 120);
  EXPECT_EQ(summary["val_pairs"], 100);
  ASSERT_EQ(summary["curve"].size(), 3u) << summary.dump(2);
  EXPECT_GE(summary["final_pair_accuracy"].get<double>(), 0.0);
  int val_lines = 0, train_lines = 0;
  for (absl::string_view line : absl::StrSplit(ReadFile(run + "/metrics.jsonl"), '\n')) {
    if (line.empty()) continue;
    const nlohmann::json record = nlohmann::json::parse(line);
    val_lines += record.contains("val/pair_accuracy");
    train_lines += record.contains("rm/loss") && record.contains("rm/accuracy");
  }
  EXPECT_EQ(val_lines, 3);
  EXPECT_EQ(train_lines, 120);

  // The saved directory is a reward model (*ForSequenceClassification, one label) with its
  // tokenizer, and it prefers the chosen answers of the training pairs well above chance.
  const nlohmann::json config = nlohmann::json::parse(ReadFile(run + "/rm/config.json"));
  EXPECT_EQ(config["architectures"][0], "LlamaForSequenceClassification");
  EXPECT_EQ(config["num_labels"], 1);
  absl::StatusOr<models::ValueModel> model = models::LoadValueModel(run + "/rm");
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<models::Tokenizer>> tokenizer = models::LoadTokenizer(run + "/rm");
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  absl::StatusOr<std::vector<data::PreferencePair>> pairs =
      data::LoadPreferencePairs({data + "/prefs_train.jsonl"}, {}, nullptr);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  absl::StatusOr<std::vector<data::EncodedPair>> encoded =
      data::EncodePairs(*pairs, **tokenizer, {.max_prompt_length = 8, .max_response_length = 4});
  ASSERT_TRUE(encoded.ok()) << encoded.status();
  torch::NoGradGuard no_grad;
  (*model)->eval();
  int correct = 0;
  for (const data::EncodedPair& pair : *encoded) {
    double reward[2];
    for (int k = 0; k < 2; ++k) {
      const std::vector<int64_t>& seq = k == 0 ? pair.chosen : pair.rejected;
      const at::Tensor ids = at::tensor(seq, at::kLong).unsqueeze(0);
      absl::StatusOr<at::Tensor> values = (*model)->Forward(ids, at::ones_like(ids));
      ASSERT_TRUE(values.ok()) << values.status();
      reward[k] = (*values)[0][static_cast<int64_t>(seq.size()) - 1].item<double>();
    }
    correct += reward[0] > reward[1];
  }
  const double accuracy = static_cast<double>(correct) / encoded->size();
  // Chance is 0.5; "the longer answer wins" alone gets about 0.75 of these pairs.
  EXPECT_GT(accuracy, 0.65) << correct << "/" << encoded->size();
}

// The pairs' problems are the built-in arithmetic task's training problems for the split that
// examples/grpo_arith.yaml uses (data.seed 1, data.heldout_size 500, num_train 0): no RL held-out
// problem is in either file, prefs_val.jsonl's problems are not in prefs_train.jsonl, and every
// pair is the true sum against a wrong one.
TEST(RmExample, PreferencePairsAreDrawnFromTheArithmeticTasksTrainSplit) {
  const std::string dir = FreshTestDir("rm-split");
  auto [py_rc, py_out] = RunShell(
      absl::StrCat("python3 examples/make_arith_prefs.py --out ", dir, "/data"), dir + "/data.log");
  ASSERT_EQ(py_rc, 0) << py_out;
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
  ASSERT_EQ(rl_heldout.size(), 500u);
  ASSERT_EQ(rl_train.size(), 7600u);
  std::set<std::string> prompts[2];
  for (int k = 0; k < 2; ++k) {
    absl::StatusOr<std::vector<data::PreferencePair>> pairs = data::LoadPreferencePairs(
        {dir + (k == 0 ? "/data/prefs_train.jsonl" : "/data/prefs_val.jsonl")}, {}, nullptr);
    ASSERT_TRUE(pairs.ok()) << pairs.status();
    for (const data::PreferencePair& pair : *pairs) {
      EXPECT_EQ(rl_heldout.count(pair.prompt), 0u) << pair.where << ": an RL held-out problem";
      EXPECT_EQ(rl_train.count(pair.prompt), 1u) << pair.where;
      const std::vector<std::string> ab = absl::StrSplit(pair.prompt.substr(0, 5), '+');
      ASSERT_EQ(ab.size(), 2u) << pair.where;
      EXPECT_EQ(pair.chosen, std::to_string(std::stoi(ab[0]) + std::stoi(ab[1]))) << pair.where;
      EXPECT_NE(pair.rejected, pair.chosen) << pair.where;
      prompts[k].insert(pair.prompt);
    }
  }
  EXPECT_EQ(prompts[0].size(), 7100u);
  EXPECT_EQ(prompts[1].size(), 500u);
  for (const std::string& prompt : prompts[1]) EXPECT_EQ(prompts[0].count(prompt), 0u) << prompt;
}

TEST(RmExample, ARecordWithoutItsRejectedAnswerStopsTheRunBeforeAnythingIsWritten) {
  const std::string dir = FreshTestDir("rm-bad-record");
  const std::string data = dir + "/data", run = dir + "/run";
  auto [py_rc, py_out] = RunShell(
      absl::StrCat("python3 examples/make_arith_prefs.py --out ", data, " --heldout 20 --train 50"),
      dir + "/data.log");
  ASSERT_EQ(py_rc, 0) << py_out;
  {
    std::ofstream append(data + "/prefs_train.jsonl", std::ios::app);
    append << R"({"prompt": "12+30=", "chosen": "42"})"
           << "\n";
  }
  const std::string text = ReadFile(data + "/prefs_train.jsonl");
  const int lines = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  auto [rc, out] = RunShell(RunCommand(data, run, {}), dir + "/run.log");
  EXPECT_NE(rc, 0) << out;
  EXPECT_NE(out.find(absl::StrCat(data, "/prefs_train.jsonl:", lines, ": no key 'rejected'")),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(run + "/rm")) << out;
  EXPECT_FALSE(fs::exists(run + "/metrics.jsonl")) << out;
  EXPECT_FALSE(fs::exists(run + "/summary.json")) << out;
}

}  // namespace
}  // namespace troupe::tests
