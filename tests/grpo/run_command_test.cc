// `troupe run` as a user runs it, for what it must refuse before any cluster or actor starts:
// nothing under the user's directories is deleted or overwritten unasked.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
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

void Write(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A valid job whose outputs all go under `dir` (no cluster is started by these tests).
std::string Job(const std::string& dir) {
  const std::string path = dir + "/job.yaml";
  Write(path, absl::StrCat(R"(name: refuse
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 5, warmup_steps: 1, dir: )",
                           dir, R"(/sft}
algorithm: {n: 2}
trainer: {total_steps: 2}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.1}}
  reference: {resources: {CPU: 0.1}}
  trainer: {resources: {CPU: 0.1}}
  checkpointer: {dir: )",
                           dir, R"(/out/ckpt}
logging: {dir: )",
                           dir, R"(/out}
)"));
  return path;
}

TEST(TroupeRun, LeavesADirectoryNamedClusterThatItDidNotMakeAlone) {
  const std::string dir = TestDir("user-cluster");
  const std::string job = Job(dir);
  Write(dir + "/out/cluster/src/f", "the user's file\n");
  auto [rc, out] = RunCommand({kTroupe, "run", job, "--dashboard-port", "-1"}, dir + "/run.out",
                              absl::Seconds(60));
  EXPECT_EQ(rc, 1) << out;
  EXPECT_TRUE(absl::StrContains(out, "was not made by troupe run")) << out;
  EXPECT_EQ(Read(dir + "/out/cluster/src/f"), "the user's file\n");
}

TEST(TroupeRun, RefusesAnEarlierRunsOutputsWithoutResumeOrOverwrite) {
  const std::string dir = TestDir("earlier-run");
  const std::string job = Job(dir);
  Write(dir + "/out/metrics.jsonl", "{\"step\": 1}\n");
  Write(dir + "/out/ckpt/step_00000001/meta.json", "{}\n");
  auto [rc, out] = RunCommand({kTroupe, "run", job}, dir + "/run.out");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "--resume")) << out;
  EXPECT_TRUE(absl::StrContains(out, "--overwrite")) << out;
  EXPECT_TRUE(absl::StrContains(out, "1 checkpoint(s)")) << out;
  EXPECT_EQ(Read(dir + "/out/metrics.jsonl"), "{\"step\": 1}\n");
  EXPECT_TRUE(fs::exists(dir + "/out/ckpt/step_00000001/meta.json"));
  EXPECT_FALSE(fs::exists(dir + "/out/cluster")) << "a refused run started a cluster";

  auto [rc2, both] =
      RunCommand({kTroupe, "run", job, "--resume", "--overwrite"}, dir + "/run2.out");
  EXPECT_EQ(rc2, 2) << both;
  EXPECT_TRUE(absl::StrContains(both, "pass one of them")) << both;
}

}  // namespace
}  // namespace troupe::tests
