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

// A model.tokenizer that cannot write the task's prompts is refused by the recipe's spec check,
// with the key's location, before a cluster starts or anything is written under logging.dir.
TEST(TroupeRun, RefusesATokenizerThatCannotWriteTheTaskBeforeWritingAnything) {
  const std::string dir = TestDir("bad-tokenizer");
  const std::string job = Job(dir);
  // A character tokenizer without '=' (CharTokenizer's file form).
  Write(dir + "/tok.json",
        R"({"type": "char", "alphabet": "0123456789+", "special_tokens": ["<pad>", "<bos>", )"
        R"("<eos>"], "pad_token": "<pad>", "bos_token": "<bos>", "eos_token": "<eos>"})");
  auto [rc, out] = RunCommand({kTroupe, "run", job, "model.init=random",
                               absl::StrCat("model.tokenizer=", dir, "/tok.json")},
                              dir + "/run.out");
  EXPECT_NE(rc, 0) << out;
  EXPECT_TRUE(absl::StrContains(out, "cannot write the arithmetic task's character '='")) << out;
  EXPECT_FALSE(fs::exists(dir + "/out")) << "a refused run wrote under logging.dir";
}

}  // namespace
}  // namespace troupe::tests
