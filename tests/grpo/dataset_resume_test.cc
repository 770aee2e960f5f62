// A GRPO job on a JSONL dataset (data.train_files, shuffled), killed with kill -9 after a few
// checkpoints and resumed with --resume: the checkpoint carries the dataset's identity with the
// prompt cursor, the resumed run uses every prompt once (drawn = added groups, no duplicate), and
// a resume after the file changed is refused, naming the file, before any actor starts.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/cluster/process.h"

namespace troupe::tests {
namespace {

namespace fs = std::filesystem;

constexpr char kTroupe[] = "cli/troupe";

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Checkpoints(const std::string& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    n += e.path().filename().string().rfind("step_", 0) == 0;
  }
  return n;
}

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
  const std::string dir = TestDir("dataset-resume");
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
  {
    Process run = Process::Start({kTroupe, "run", job, "--dashboard-port", "-1"}, dir + "/a.log");
    ASSERT_TRUE(WaitUntil([&] { return Checkpoints(dir + "/run/ckpt") >= 2 || !run.Running(); },
                          absl::Minutes(3)))
        << run.Output();
    ASSERT_TRUE(run.Running()) << "the first run ended before it was killed:\n" << run.Output();
    run.Signal(SIGKILL);
    ASSERT_TRUE(run.Wait(absl::Seconds(30)).has_value());
  }
  ASSERT_FALSE(fs::exists(dir + "/run/summary.json")) << "the run finished before the kill";
  std::string first;  // the earliest checkpoint
  for (const auto& e : fs::directory_iterator(dir + "/run/ckpt")) {
    const std::string leaf = e.path().filename().string();
    if (leaf.rfind("step_", 0) == 0 && (first.empty() || leaf < first)) first = leaf;
  }
  const nlohmann::json state =
      nlohmann::json::parse(Read(dir + "/run/ckpt/" + first + "/driver_state.json"));
  const nlohmann::json& prompts = state["recipe"]["prompts"];
  SCOPED_TRACE(prompts.dump());
  EXPECT_EQ(prompts["dataset"]["train"][0]["path"], dir + "/train.jsonl");
  EXPECT_EQ(prompts["dataset"]["train"][0]["size"], fs::file_size(dir + "/train.jsonl"));
  EXPECT_EQ(prompts["dataset"]["seed"], 5);
  EXPECT_EQ(prompts["dataset"]["shuffle"], true);
  // Synchronous steps of 4 prompts: nothing is out at a checkpoint.
  EXPECT_EQ(prompts["cursor"], state["step"].get<int64_t>() * 4);

  auto [rc, out] = RunCommand({kTroupe, "run", job, "--resume", "--dashboard-port", "-1"},
                              dir + "/b.log", absl::Minutes(3));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resuming from"), std::string::npos) << out;
  nlohmann::json s = nlohmann::json::parse(Read(dir + "/run/summary.json"));
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
  auto [rc2, out2] = RunCommand(
      {kTroupe, "run", job, "--resume", "--dashboard-port", "-1", "trainer.total_steps=12"},
      dir + "/c.log", absl::Minutes(2));
  EXPECT_NE(rc2, 0) << out2;
  EXPECT_NE(out2.find("the dataset changed since the checkpoint"), std::string::npos) << out2;
  EXPECT_NE(out2.find(dir + "/train.jsonl size: "), std::string::npos) << out2;
}

}  // namespace
}  // namespace troupe::tests
