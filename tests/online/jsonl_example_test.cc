// examples/grpo_jsonl.yaml in miniature, through the same commands a user runs: the arithmetic
// problems written as chat-message JSONL (examples/make_arith_jsonl.py), a BPE tokenizer trained
// on them (`troupe tokenizer train`, which writes the ChatML template), then `troupe run` of the
// example job with small budgets: the SFT warm start reads sft.train_files and is judged by the
// math reward on data.val_files, the RL prompts are rendered with the tokenizer's template, and
// GRPO runs and evaluates. A chat template that does not parse is refused before anything is
// written under logging.dir, naming the file and line. (The learning figure of the full example
// is a benchmark: bench/RESULTS.md.)
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/online/resume_harness.h"

namespace troupe::tests {
namespace {

namespace fs = std::filesystem;

// Runs `command` with its output in `log`; (exit code, output).
std::pair<int, std::string> RunShell(const std::string& command, const std::string& log) {
  const int status = std::system(absl::StrCat(command, " > ", log, " 2>&1").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(log)};
}

TEST(JsonlExample, SftThenGrpoFromJsonlFilesWithATrainedTokenizerAndItsChatTemplate) {
  const std::string dir = FreshTestDir("jsonl-example");
  const std::string data = dir + "/data", tok = dir + "/tok";
  auto [py_rc, py_out] =
      RunShell(absl::StrCat("python3 examples/make_arith_jsonl.py --out ", data, " --heldout 40"),
               dir + "/data.log");
  ASSERT_EQ(py_rc, 0) << py_out;
  auto [tok_rc, tok_out] =
      RunShell(absl::StrCat(kTroupe, " tokenizer train --vocab-size 300 --out ", tok, " ", data,
                            "/corpus.txt"),
               dir + "/tok.log");
  ASSERT_EQ(tok_rc, 0) << tok_out;
  ASSERT_NE(ReadFile(tok + "/tokenizer_config.json").find("<|im_start|>assistant"),
            std::string::npos);

  const std::vector<std::string> overrides = {"model.tokenizer=" + tok + "/tokenizer.json",
                                              "data.train_files=[" + data + "/train.jsonl]",
                                              "data.val_files=[" + data + "/val.jsonl]",
                                              "data.heldout_size=40",
                                              "sft.train_files=[" + data + "/sft.jsonl]",
                                              "sft.steps=40",
                                              "sft.warmup_steps=5",
                                              "sft.eval_every=40",
                                              "trainer.total_steps=4",
                                              "trainer.warmup_steps=1",
                                              "trainer.eval_every=2",
                                              "actors.checkpointer.every_steps=2",
                                              "logging.dir=" + dir + "/run",
                                              "logging.tensorboard=false"};
  const std::string run = absl::StrCat(
      kTroupe, " run examples/grpo_jsonl.yaml --dashboard-port -1 ", absl::StrJoin(overrides, " "));
  auto [rc, out] = RunShell(run, dir + "/run.log");
  ASSERT_EQ(rc, 0) << out;
  // The SFT stage: the JSONL records, evaluated on the validation file by the job's reward.
  EXPECT_NE(out.find("sft.jsonl: 8060 train / 40 held-out records"), std::string::npos) << out;
  EXPECT_NE(out.find("SFT done: held-out accuracy"), std::string::npos) << out;
  // Its checkpoint carries the tokenizer with the template, as GRPO's policy directory.
  const nlohmann::json sft_config = ReadJson(dir + "/run/sft/tokenizer_config.json");
  EXPECT_EQ(sft_config["chat_template"], ReadJson(tok + "/tokenizer_config.json")["chat_template"]);
  // The RL prompts are rendered with the tokenizer's ChatML template.
  EXPECT_NE(out.find("data: chat messages rendered with " + tok + "/tokenizer_config.json"),
            std::string::npos)
      << out;
  // The closing summary says where the checkpoints are and how long the job took.
  EXPECT_NE(out.find("  checkpoints: " + dir + "/run/ckpt (newest: " + dir + "/run/ckpt/step_"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  wall time: "), std::string::npos) << out;
  const nlohmann::json summary = ReadJson(dir + "/run/summary.json");
  SCOPED_TRACE(summary.dump(2));
  EXPECT_EQ(summary["steps"], 4);
  EXPECT_EQ(summary["samples_lost"], 0);
  EXPECT_EQ(summary["prompts_filtered"], 0);  // every prompt fits data.max_prompt_length
  // Held-out evaluations ran (before, during and after), each of the 40 validation prompts.
  std::ifstream metrics(dir + "/run/metrics.jsonl");
  int evaluations = 0;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json m = nlohmann::json::parse(line, nullptr, false);
    if (m.is_object() && m.contains("val/accuracy")) ++evaluations;
  }
  EXPECT_GE(evaluations, 2);

  // A template that does not parse: refused before the run writes anything, naming file:line.
  std::ofstream(dir + "/bad.jinja") << "{{ bos_token }}\n{% for m in messages %}{{ m.content }}";
  auto [bad_rc, bad_out] = RunShell(
      absl::StrCat(run, " data.chat_template=", dir, "/bad.jinja logging.dir=", dir, "/run2"),
      dir + "/bad.log");
  EXPECT_NE(bad_rc, 0) << bad_out;
  EXPECT_NE(bad_out.find("data.chat_template"), std::string::npos) << bad_out;
  EXPECT_NE(bad_out.find("bad.jinja"), std::string::npos) << bad_out;
  EXPECT_NE(bad_out.find(":2: "), std::string::npos) << bad_out;
  EXPECT_FALSE(fs::exists(dir + "/run2")) << bad_out;

  // An SFT record without its response: refused naming FILE:LINE, before anything is written.
  fs::copy_file(data + "/sft.jsonl", dir + "/sft_bad.jsonl");
  std::ofstream(dir + "/sft_bad.jsonl", std::ios::app)
      << R"({"prompt": [{"role": "user", "content": "1+1="}]})"
      << "\n";
  auto [sft_rc, sft_out] = RunShell(
      absl::StrCat(run, " sft.train_files=[", dir, "/sft_bad.jsonl] logging.dir=", dir, "/run3"),
      dir + "/sft_bad.log");
  EXPECT_NE(sft_rc, 0) << sft_out;
  EXPECT_NE(sft_out.find("sft.train_files: " + dir + "/sft_bad.jsonl:8061: no key 'response'"),
            std::string::npos)
      << sft_out;
  EXPECT_FALSE(fs::exists(dir + "/run3")) << sft_out;
}

}  // namespace
}  // namespace troupe::tests
