// Exact asynchronous resume: an asynchronous GRPO run (max staleness 2) killed with kill -9 as a
// whole (the `troupe run` process, its embedded cluster and every worker) mid-way, then resumed
// with --resume, neither skips nor repeats a prompt, and its sample accounting adds up over the
// two runs: the checkpoint carries the prompt cursor, the prompts that were out (generating or
// being scored), the replay buffer's groups and the counters. And it wastes no more than the
// same job run without the kill: no sample dropped as stale (the uninterrupted run drops none),
// and every prompt that was out or buffered at the checkpoint is trained on.
#include <cstdint>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "proto/rl.pb.h"
#include "tests/online/resume_harness.h"

namespace troupe::tests {
namespace {

// The prompt ids a checkpoint left untrained: those out (drawn again by a resumed run) and those
// of the groups in its replay buffer.
std::set<int64_t> UntrainedAt(const std::string& ckpt) {
  std::set<int64_t> ids;
  for (const auto& id : ReadJson(ckpt + "/driver_state.json")["recipe"]["prompts"]["again"]) {
    ids.insert(id.get<int64_t>());
  }
  proto::ReplayState replay;
  EXPECT_TRUE(replay.ParseFromString(ReadFile(ckpt + "/replay_buffer.pb"))) << ckpt;
  for (const proto::SampleGroup& g : replay.groups()) ids.insert(g.prompt_id());
  return ids;
}

// Runs the job (with `sampler` as its data.sampler) once to the end, then again killed after 3
// checkpoints and resumed, and checks the lineage's accounting against the uninterrupted run's;
// returns the test's directory.
std::string KillAndResume(const std::string& name, const std::string& sampler) {
  const std::string dir = FreshTestDir(name);
  const std::string job = dir + "/job.yaml";
  std::ofstream(job) << absl::StrCat(R"(name: resume
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 20, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4, sampler: )",
                                     sampler, R"(}
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
  // The same job uninterrupted (it also makes the SFT start the others reuse).
  auto [full_rc, full_out] =
      CompleteRun(job, dir + "/full.log", absl::Minutes(5), {"logging.dir=" + dir + "/full"});
  EXPECT_EQ(full_rc, 0) << full_out;
  if (full_rc != 0) return dir;
  const nlohmann::json full = ReadJson(dir + "/full/summary.json");
  // The first run, killed with SIGKILL once it has made a few checkpoints (the process and, by
  // their parent-death signal, every worker of its embedded cluster).
  EXPECT_TRUE(KillRunAfterCheckpoints(job, dir + "/run", dir + "/a.log", 3, absl::Minutes(4)));
  const int before = CheckpointNames(dir + "/run/ckpt").size();

  auto [rc, out] = ResumeRun(job, dir + "/b.log", absl::Minutes(5));
  EXPECT_EQ(rc, 0) << out;
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

  // No more waste than without the kill. The resumed run once counted the groups it found in the
  // replay buffer as not ahead of training and drew a full pipeline on top of them: the surplus
  // went stale (64 of 368 samples here, where the uninterrupted run dropped none).
  EXPECT_EQ(full["accounting"]["dropped_stale"], 0) << full.dump(2);
  EXPECT_LE(dropped, full["accounting"]["dropped_stale"].get<int64_t>());
  EXPECT_EQ(used, full["accounting"]["used"].get<int64_t>());
  // What is left untrained at the end is at most the pipeline (max staleness 2 x 4 prompts x 4
  // samples), as in the uninterrupted run.
  EXPECT_LE(buffered, 2 * 4 * 4);
  // Every prompt that was out or buffered at the checkpoint the run resumed from was trained on:
  // none of them was dropped (none was) or is left at the end (in the last checkpoint's replay
  // buffer or out when it was made).
  const size_t from = out.find("resuming from ");
  EXPECT_NE(from, std::string::npos) << out;
  if (from == std::string::npos) return dir;
  const std::string resumed_from = out.substr(from + 14, out.find(" (step", from) - (from + 14));
  const std::set<int64_t> at_resume = UntrainedAt(resumed_from);
  EXPECT_FALSE(at_resume.empty()) << resumed_from;
  const std::vector<std::string> after = CheckpointNames(dir + "/run/ckpt");
  if (after.empty()) return dir;  // (checked above: the run made checkpoints)
  const std::set<int64_t> at_end = UntrainedAt(dir + "/run/ckpt/" + after.back());
  for (int64_t id : at_resume) {
    EXPECT_EQ(at_end.count(id), 0u)
        << "prompt " << id << ", out or buffered at " << resumed_from << ", was never trained on";
  }
  return dir;
}

TEST(AsyncResume, AKilledRunResumedUsesEveryPromptOnceAndItsAccountingAddsUp) {
  KillAndResume("async-resume", "{type: sequential}");
}

// With prioritized sampling the checkpoint also carries the down-weighted prompts and the
// dataset index of every prompt that was out; the resumed run draws those same prompts again.
TEST(AsyncResume, APrioritizedRunResumesItsSamplerToo) {
  const std::string dir =
      KillAndResume("async-resume-prioritized", "{type: prioritized, uniform_weight: 0.2}");
  const std::vector<std::string> names = CheckpointNames(dir + "/run/ckpt");
  ASSERT_FALSE(names.empty());
  const nlohmann::json st =
      ReadJson(dir + "/run/ckpt/" + names.back() + "/driver_state.json")["recipe"]["prompts"];
  SCOPED_TRACE(st.dump());
  ASSERT_TRUE(st.contains("prioritized"));
  EXPECT_EQ(st["prioritized"]["again_index"].size(), st["again"].size());
  // 16 steps of 4 groups of a 20-step SFT policy: some groups came back all right or all wrong.
  EXPECT_FALSE(st["prioritized"]["down_weighted"].empty());
  // The share of down-weighted prompts is logged per step, in [0, 1].
  std::ifstream metrics(dir + "/run/metrics.jsonl");
  int logged = 0;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json m = nlohmann::json::parse(line);
    if (!m.contains("rollout/prompts_down_weighted")) continue;
    ++logged;
    EXPECT_GE(m["rollout/prompts_down_weighted"].get<double>(), 0.0);
    EXPECT_LE(m["rollout/prompts_down_weighted"].get<double>(), 1.0);
  }
  EXPECT_GT(logged, 0);
}

}  // namespace
}  // namespace troupe::tests
