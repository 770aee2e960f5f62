// Exact asynchronous resume: an asynchronous GRPO run (max staleness 2) killed with kill -9 as a
// whole (the `troupe run` process, its embedded cluster and every worker) mid-way, then resumed
// with --resume, neither skips nor repeats a prompt, and its sample accounting adds up over the
// two runs: the checkpoint carries the prompt cursor, the prompts that were out (generating or
// being scored), the replay buffer's groups and the counters.
#include <cstdint>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/grpo/resume_harness.h"

namespace troupe::tests {
namespace {

TEST(AsyncResume, AKilledRunResumedUsesEveryPromptOnceAndItsAccountingAddsUp) {
  const std::string dir = FreshTestDir("async-resume");
  const std::string job = dir + "/job.yaml";
  std::ofstream(job) << absl::StrCat(R"(name: resume
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 20, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: )",
                                     dir, R"(/sft}
algorithm: {n: 4, kl: {coef: 0.01}}
async: {max_staleness: 2}
trainer: {total_steps: 16, seed: 7, lr: 3.0e-4}
actors:
  rollout: {replicas: 2, resources: {CPU: 0.25}}
  reward: {resources: {CPU: 0.1}}
  reference: {resources: {CPU: 0.25}}
  trainer: {resources: {CPU: 0.25}}
  checkpointer: {every_steps: 2, keep: 0}
logging: {dir: )",
                                     dir, R"(/run, tensorboard: false}
)");
  // The first run, killed with SIGKILL once it has made a few checkpoints (the process and, by
  // their parent-death signal, every worker of its embedded cluster).
  ASSERT_TRUE(KillRunAfterCheckpoints(job, dir + "/run", dir + "/a.log", 3, absl::Minutes(4)));
  const int before = CheckpointNames(dir + "/run/ckpt").size();

  auto [rc, out] = ResumeRun(job, dir + "/b.log", absl::Minutes(5));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("resuming from"), std::string::npos) << out;

  nlohmann::json s = ReadJson(dir + "/run/summary.json");
  SCOPED_TRACE(s.dump(2));
  EXPECT_EQ(s["steps"], 16);
  EXPECT_EQ(s["total_steps"], 16);
  EXPECT_EQ(s["ended"], "completed");
  EXPECT_GE(before, 3);
  const nlohmann::json& a = s["accounting"];
  const int64_t added = a["added"], used = a["used"], dropped = a["dropped_stale"],
                buffered = a["buffered"];
  // Every sample generated in the lineage (the first run up to its checkpoint, then the resumed
  // run) was used, dropped as stale or is buffered.
  EXPECT_EQ(s["samples_generated"].get<int64_t>(), used + dropped + buffered);
  EXPECT_EQ(s["samples_lost"], 0);
  EXPECT_EQ(added, used + dropped + buffered);
  // Every prompt drawn reached the replay buffer exactly once: none skipped (drawn = added
  // groups), none repeated (no duplicate refused).
  EXPECT_EQ(a["duplicates"], 0);
  EXPECT_EQ(s["prompts_drawn"].get<int64_t>() * 4, added);
  EXPECT_GT(used, 0);
}

}  // namespace
}  // namespace troupe::tests
