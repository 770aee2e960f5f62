// A GRPO job on a JSONL dataset (data.train_files, shuffled), killed with kill -9 after a few
// checkpoints and resumed with --resume: the checkpoint carries the dataset's identity with the
// prompt cursor, the resumed run uses every prompt once (drawn = added groups, no duplicate), and
// a resume after the file changed is refused, naming the file, before any actor starts.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/online/resume_harness.h"

namespace troupe::tests {
namespace {

namespace fs = std::filesystem;

// Two-digit additions as verl-shaped records: {"data_source", "prompt", "reward_model"}.
void WriteRecords(const std::string& path, int n, int salt) {
  std::ofstream out(path);
  for (int i = 0; i < n; ++i) {
    const int a = (i * 37 + salt) % 90 + 10, b = (i * 53 + 7 * salt) % 90 + 10;
    out << nlohmann::json({{"data_source", "arithmetic"},
                           {"prompt", absl::StrCat(a, "+", b, "=")},
                           {"reward_model", {{"ground_truth", std::to_string(a + b)}}},
                           {"extra_info", {{"index", i}}}})
               .dump()
        << "\n";
    if (i % 50 == 0) out << "\n";  // blank lines are skipped
  }
}

TEST(DatasetResume, AKilledDatasetRunResumesItsCursorAndRefusesChangedFiles) {
  const std::string dir = FreshTestDir("dataset-resume");
  WriteRecords(dir + "/train.jsonl", 300, 1);
  WriteRecords(dir + "/val.jsonl", 12, 2);
  std::ofstream(dir + "/tok.json") << R"({"type": "char", "alphabet": "0123456789+="})";
  const std::string job = dir + "/job.yaml";
  std::ofstream(job) << absl::StrCat("name: dataset-resume\n",
                                     "model: {config: examples/models/tiny.json, init: random, "
                                     "tokenizer: ",
                                     dir, "/tok.json}\ndata: {train_files: ", dir,
                                     "/train.jsonl, val_files: ", dir, R"(/val.jsonl,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4, seed: 5}
reward: {name: arithmetic}
algorithm: {n: 4, kl: {coef: 0}}
trainer: {total_steps: 10, seed: 7, lr: 3.0e-4}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.25}}
  reward: {resources: {CPU: 0.1}}
  reference: {replicas: 0}
  trainer: {resources: {CPU: 0.25}}
  checkpointer: {every_steps: 2, keep: 0}
logging: {dir: )",
                                     dir, R"(/run, tensorboard: false}
)");
  ASSERT_TRUE(KillRunAfterCheckpoints(job, dir + "/run", dir + "/a.log", 2, absl::Minutes(3)));
  const std::vector<std::string> checkpoints = CheckpointNames(dir + "/run/ckpt");
  ASSERT_FALSE(checkpoints.empty());
  const nlohmann::json state =  // the earliest checkpoint's
      ReadJson(dir + "/run/ckpt/" + checkpoints.front() + "/driver_state.json");
  const nlohmann::json& prompts = state["recipe"]["prompts"];
  SCOPED_TRACE(prompts.dump());
  EXPECT_EQ(prompts["dataset"]["train"][0]["path"], dir + "/train.jsonl");
  EXPECT_EQ(prompts["dataset"]["train"][0]["size"], fs::file_size(dir + "/train.jsonl"));
  EXPECT_EQ(prompts["dataset"]["seed"], 5);
  EXPECT_EQ(prompts["dataset"]["shuffle"], true);
  // Synchronous steps of 4 prompts: nothing is out at a checkpoint.
  EXPECT_EQ(prompts["cursor"], state["step"].get<int64_t>() * 4);

  auto [rc, out] = ResumeRun(job, dir + "/b.log", absl::Minutes(3));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resuming from"), std::string::npos) << out;
  nlohmann::json s = ReadJson(dir + "/run/summary.json");
  SCOPED_TRACE(s.dump(2));
  EXPECT_EQ(s["steps"], 10);
  const nlohmann::json& a = s["accounting"];
  EXPECT_EQ(a["duplicates"], 0);
  EXPECT_EQ(s["prompts_drawn"].get<int64_t>() * 4, a["added"].get<int64_t>());
  EXPECT_EQ(s["samples_lost"], 0);

  // The file changes: a resume would draw other records at the same cursor, so it is refused.
  std::ofstream(dir + "/train.jsonl", std::ios::app)
      << R"({"data_source": "arithmetic", "prompt": "1+1=", "reward_model": {"ground_truth": "2"}})"
      << "\n";
  auto [rc2, out2] = ResumeRun(job, dir + "/c.log", absl::Minutes(2), {"trainer.total_steps=12"});
  EXPECT_NE(rc2, 0) << out2;
  EXPECT_NE(out2.find("the dataset changed since the checkpoint"), std::string::npos) << out2;
  EXPECT_NE(out2.find(dir + "/train.jsonl size: "), std::string::npos) << out2;
}

}  // namespace
}  // namespace troupe::tests
