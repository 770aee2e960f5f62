// `troupe run` as a user runs it, for what it must refuse before any cluster or actor starts:
// nothing under the user's directories is deleted or overwritten unasked.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "tests/cluster/process.h"

namespace troupe::tests {
namespace {

namespace fs = std::filesystem;

constexpr char kTroupe[] = "cli/troupe";

// An empty directory `name` under this binary's temporary directory (removed when it exits).
std::string TestDir(const std::string& name) {
  static const test::TempDir root("run_command_test");
  const std::string dir = root.Path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void Write(const std::string& path, const std::string& text) { test::WriteFile(path, text); }

// The first line of `path`, "" if it cannot be read (a /proc file may be missing or closed to us).
std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
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

// The names in `dir` (not recursive), sorted.
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// A spec refusal like any other (exit code 2), before anything is written: logging.dir holds only
// what the user had there.
TEST(TroupeRun, LeavesADirectoryNamedClusterThatItDidNotMakeAlone) {
  const std::string dir = TestDir("user-cluster");
  const std::string job = Job(dir);
  Write(dir + "/out/cluster/src/f", "the user's file\n");
  auto [rc, out] = RunCommand({kTroupe, "run", job, "--dashboard-port", "-1"}, dir + "/run.out",
                              absl::Seconds(60));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "was not made by troupe run")) << out;
  EXPECT_EQ(test::ReadFile(dir + "/out/cluster/src/f"), "the user's file\n");
  EXPECT_EQ(Entries(dir + "/out"), std::vector<std::string>{"cluster"});
  EXPECT_EQ(Entries(dir + "/out/cluster"), std::vector<std::string>{"src"});
}

// A spec the machine cannot hold is refused before anything is written (no logging.dir, no
// driver.spans in it).
TEST(TroupeRun, ASpecRefusedAtTheResourceCheckWritesNothing) {
  const std::string dir = TestDir("too-big");
  const std::string job = Job(dir);
  auto [rc, out] = RunCommand(
      {kTroupe, "run", job, "actors.trainer.resources={CPU: 100000}", "--dashboard-port", "-1"},
      dir + "/run.out");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "actors.trainer.resources: fits on no node")) << out;
  EXPECT_FALSE(fs::exists(dir + "/out")) << "a refused run wrote under logging.dir";
}

// A GPU for a model actor is refused for what it is (the actor would compute on the CPU), before
// the resource check (which, on a machine without GPUs, would only say none is there).
TEST(TroupeRun, RefusesAGpuForAModelActorNamingTheKeyAndWhy) {
  const std::string dir = TestDir("gpu");
  const std::string job = Job(dir);
  auto [rc, out] = RunCommand({kTroupe, "run", job, "actors.trainer.resources={CPU: 0.1, GPU: 1}",
                               "--dashboard-port", "-1"},
                              dir + "/run.out");
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(absl::StrContains(
      out,
      "override actors.trainer.resources={CPU: 0.1, GPU: 1}: actors.trainer.resources.GPU: "
      "this troupe's LibTorch was built without CUDA, so Trainer computes on the CPU"))
      << out;
  EXPECT_FALSE(fs::exists(dir + "/out"));
}

// A FIFO named as a data file is refused as such at once: nothing opens it (a FIFO with no
// writer would block the reader forever).
TEST(TroupeRun, RefusesAFifoNamedAsADataFileWithoutWaitingOnIt) {
  const std::string dir = TestDir("fifo-data");
  const std::string fifo = dir + "/train.jsonl";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string job = dir + "/job.yaml";
  Write(job, absl::StrCat("name: fifo\nmodel: {config: examples/models/tiny.json, init: random}\n",
                          "data: {train_files: [", fifo,
                          "], max_prompt_length: 8, max_response_length: 4}\n",
                          "reward: {name: arithmetic}\ntrainer: {total_steps: 1}\n",
                          "logging: {dir: ", dir, "/out}\n"));
  const absl::Time start = absl::Now();
  auto [rc, out] = RunCommand({kTroupe, "run", job, "--dashboard-port", "-1"}, dir + "/run.out",
                              absl::Seconds(30));
  EXPECT_EQ(rc, 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "data.train_files: expected a file, got a FIFO: " + fifo))
      << out;
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_FALSE(fs::exists(dir + "/out"));
}

// A spec read from a FIFO (or a pipe: `troupe run <(...)`) waits for its writer, like `cat`; a
// SIGTERM meanwhile ends the run at once (it used to take a SIGKILL), with nothing written.
TEST(TroupeRun, ASigtermEndsARunStillReadingItsSpecAtOnce) {
  const std::string dir = TestDir("fifo-spec");
  const std::string fifo = dir + "/job.yaml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Process run = Process::Start({kTroupe, "run", fifo, "--dashboard-port", "-1"}, dir + "/run.out");
  // Until it waits in openat(2) on the FIFO (x86-64 syscall 257), past its start-up.
  const std::string syscall = absl::StrCat("/proc/", run.pid(), "/syscall");
  const bool waiting =
      WaitUntil([&] { return absl::StartsWith(FirstLine(syscall), "257 "); }, absl::Seconds(30));
  if (!waiting) absl::SleepFor(absl::Seconds(3));  // (no /proc/PID/syscall here)
  ASSERT_TRUE(run.Running()) << run.Output();
  run.Signal(SIGTERM);
  const std::optional<int> status = run.Wait(absl::Seconds(15));
  ASSERT_TRUE(status.has_value()) << "SIGTERM did not end a run waiting on its spec";
  ASSERT_TRUE(WIFEXITED(*status)) << *status;
  EXPECT_EQ(WEXITSTATUS(*status), 128 + SIGTERM) << run.Output();
  EXPECT_TRUE(absl::StrContains(run.Output(), "stopped by a signal before the job started"))
      << run.Output();
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
  EXPECT_EQ(test::ReadFile(dir + "/out/metrics.jsonl"), "{\"step\": 1}\n");
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
