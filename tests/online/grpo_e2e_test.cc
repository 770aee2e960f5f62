// End-to-end GRPO jobs on an embedded cluster: real worker processes (the troupe binary hosts the
// RL actors), a tiny model, a few steps. Checks what the issue asks of the vertical slice: the
// sample accounting adds up, weight versions only grow per worker, staleness stays within the
// bound, a synchronous run resumed from a checkpoint reproduces the uninterrupted run's losses, and
// killing a restartable actor with kill -9 mid-run costs at most a retry: a rollout worker (also
// one that comes back just before an evaluation), a reward server or the reference under a call,
// the checkpointer mid-write. No sample and no checkpoint is lost. The replay buffer killed
// mid-run is restored by the driver; the groups it held are generated again, and counted.
//
// To kill an actor *under a call* deterministically, the test freezes its process (SIGSTOP) at a
// step boundary, so the driver's next call to it hangs in flight, and kills it (SIGKILL) a moment
// later.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "actors/replay_buffer.h"
#include "actors/rollout_worker.h"
#include "base/testing/temp_dir.h"
#include "gtest/gtest.h"
#include "metrics/metric_catalog.h"
#include "models/tokenizers/char_tokenizer.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_spec.h"
#include "recipes/online/grpo_recipe.h"
#include "recipes/rl/run_state.h"
#include "runtime/cluster/embedded/embedded_cluster.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;

void Log(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

// This binary's temporary directory (removed when it exits).
const test::TempDir& Tmp() {
  static const test::TempDir dir("grpo_e2e_test");
  return dir;
}

// An empty directory `name` under Tmp().
std::string TestDir(const std::string& name) {
  const std::string dir = Tmp().Path(name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

using ::troupe::test::ReadFile;

// One SFT warm start shared by the tests that do not check SFT itself (kept across tests).
std::string SharedSftDir() { return Tmp().Path("shared-sft"); }

// A job small enough for a few seconds a step on 2 cores.
JobSpec SmallJob(const std::string& dir, int64_t max_staleness, int64_t steps,
                 const std::string& sft_dir = "") {
  std::string yaml = absl::StrCat(R"(
name: e2e
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 40, seed: 3,
       train_batch_size: 4, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: )",
                                  sft_dir.empty() ? dir + "/sft" : sft_dir, R"(}
algorithm: {adv_estimator: grpo, n: 4, kl: {coef: 0.01, type: k3}}
async: {max_staleness: )",
                                  max_staleness, R"(}
trainer: {total_steps: )",
                                  steps, R"(, seed: 7, lr: 3.0e-4, eval_every: 0}
actors:
  rollout: {replicas: 2, resources: {CPU: 0.25}, max_restarts: 2}
  reward: {replicas: 1, resources: {CPU: 0.25}, max_restarts: 2}
  reference: {replicas: 1, resources: {CPU: 0.25}, max_restarts: 2}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
  checkpointer: {every_steps: 2, keep: 5, max_restarts: 2, dir: )",
                                  dir, R"(/ckpt}
logging: {dir: )",
                                  dir, R"(, tensorboard: false}
)");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "e2e.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

// Field 19 of /proc/PID/stat: the process's nice value (-100 if unreadable).
int NiceOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;  // one line
  std::getline(in, stat);
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -100;
  std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 2), ' ');
  return fields.size() > 16 ? std::stoi(fields[16]) : -100;  // fields[0] is field 3
}

class GrpoEndToEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    std::error_code ec;
    const fs::path troupe = fs::canonical("cli/troupe", ec);
    ASSERT_FALSE(ec) << "cli/troupe (the worker binary) is not in the runfiles";
    auto c = EmbeddedCluster::Start(
        {.state_dir = TestDir(absl::StrCat(
             ::testing::UnitTest::GetInstance()->current_test_info()->name(), "-cluster")),
         .resources_json = R"({"CPU": 2})",
         .worker_binary = troupe.string()});
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
  }

  void ExpectAccountingAddsUp(const RunResult& r) {
    const proto::ReplayStats& s = r.accounting;
    EXPECT_EQ(s.added(), s.used() + s.dropped_stale() + s.buffered())
        << "added " << s.added() << " used " << s.used() << " dropped " << s.dropped_stale()
        << " buffered " << s.buffered();
    EXPECT_EQ(s.duplicates(), 0);
    EXPECT_GT(s.used(), 0);
  }

  void ExpectVersionsNeverGoDown(const RunResult& r) {
    ASSERT_FALSE(r.worker_versions.empty());
    for (const auto& [worker, versions] : r.worker_versions) {
      for (size_t i = 1; i < versions.size(); ++i) {
        ASSERT_LE(versions[i - 1], versions[i]) << worker << " sample " << i;
      }
    }
  }

  // Every sample the workers generated was used, dropped as stale or is buffered.
  void ExpectNoSampleLost(const RunResult& r) {
    const proto::ReplayStats& s = r.accounting;
    EXPECT_EQ(r.samples_lost, 0);
    EXPECT_EQ(r.samples_generated, s.used() + s.dropped_stale() + s.buffered())
        << "generated " << r.samples_generated << " used " << s.used() << " dropped "
        << s.dropped_stale() << " buffered " << s.buffered();
  }

  // The pid of the job's actor called `name` (e.g. "j/reward-0").
  pid_t PidOf(const std::string& name) {
    absl::StatusOr<UntypedActorHandle> h = cluster_->cluster().GetActorByName(name);
    EXPECT_TRUE(h.ok()) << name << ": " << h.status();
    if (!h.ok()) return -1;
    absl::StatusOr<proto::ActorInfo> info = cluster_->cluster().GetActorInfo(h->id());
    EXPECT_TRUE(info.ok() && info->pid() > 0) << name;
    return info.ok() ? static_cast<pid_t>(info->pid()) : -1;
  }

  // Freezes the actor's process now, so the driver's next call to it stays in flight, and kills
  // it `after` later (on another thread; joined by the fixture).
  void FreezeThenKill(const std::string& name, std::chrono::milliseconds after) {
    const pid_t pid = PidOf(name);
    ASSERT_GT(pid, 0);
    ASSERT_EQ(::kill(pid, SIGSTOP), 0);
    killers_.emplace_back([pid, after] {
      std::this_thread::sleep_for(after);
      ::kill(pid, SIGKILL);
    });
  }

  void TearDown() override {
    for (std::thread& t : killers_) t.join();
  }

  std::unique_ptr<EmbeddedCluster> cluster_;
  std::vector<std::thread> killers_;
};

TEST_F(GrpoEndToEnd, SynchronousRunResumedFromACheckpointReproducesTheLosses) {
  const std::string base = TestDir("sync");
  std::map<int64_t, double> full, resumed;
  auto recorder = [](std::map<int64_t, double>* out) {
    return [out](int64_t step, const std::map<std::string, double>& m) {
      (*out)[step] = m.at("actor/loss");
    };
  };
  // Uninterrupted: 4 steps.
  JobSpec a = SmallJob(base + "/a", /*max_staleness=*/0, /*steps=*/4);
  absl::StatusOr<RunResult> ra =
      RunGrpo(a, cluster_->cluster(), {.log = Log, .job_id = "a", .on_step = recorder(&full)});
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_EQ(ra->steps, 4);
  ExpectAccountingAddsUp(*ra);
  EXPECT_EQ(ra->accounting.dropped_stale(), 0);  // on-policy: nothing is ever stale
  EXPECT_EQ(ra->max_staleness_seen, 0);
  ExpectVersionsNeverGoDown(*ra);

  // Interrupted after 2 steps (checkpoint at step 2), then resumed to 4, from the same SFT start.
  JobSpec b = SmallJob(base + "/b", 0, 4, base + "/a/sft");
  absl::StatusOr<RunResult> rb1 =
      RunGrpo(b, cluster_->cluster(),
              {.log = Log, .job_id = "b1", .stop_after_steps = 2, .on_step = recorder(&resumed)});
  ASSERT_TRUE(rb1.ok()) << rb1.status();
  EXPECT_EQ(rb1->steps, 2);
  ASSERT_TRUE(fs::exists(base + "/b/ckpt/step_00000002/model.safetensors"));
  absl::StatusOr<RunResult> rb2 =
      RunGrpo(b, cluster_->cluster(),
              {.resume = true, .log = Log, .job_id = "b2", .on_step = recorder(&resumed)});
  ASSERT_TRUE(rb2.ok()) << rb2.status();
  EXPECT_EQ(rb2->steps, 4);
  ASSERT_EQ(full.size(), 4u);
  ASSERT_EQ(resumed.size(), 4u);
  for (const auto& [step, loss] : full) {
    EXPECT_DOUBLE_EQ(resumed[step], loss) << "step " << step;
  }

  // Two reference replicas, each computing half of every batch's log-probs: the same losses, up
  // to float rounding (a forward pass over half the rows rounds differently).
  JobSpec c = SmallJob(base + "/c", 0, 4, base + "/a/sft");
  c.actors.reference.replicas = 2;
  std::map<int64_t, double> split;
  bool two = false;
  absl::StatusOr<RunResult> rc = RunGrpo(
      c, cluster_->cluster(),
      {.log =
           [&two](const std::string& line) {
             two |= absl::StrContains(line, "starting actors: 2 rollout, 1 reward, 2 reference");
             Log(line);
           },
       .job_id = "c",
       .on_step = recorder(&split)});
  ASSERT_TRUE(rc.ok()) << rc.status();
  EXPECT_TRUE(two);
  ASSERT_EQ(split.size(), 4u);
  for (const auto& [step, loss] : full) {
    EXPECT_NEAR(split[step], loss, 1e-5 * std::max(1e-3, std::abs(loss))) << "step " << step;
  }
}

// Every record of a run's metrics.jsonl holds flat numbers (or "NaN"-like strings) under names
// the metric catalog documents, and the step records carry verl's core names.
void ExpectFlatCatalogedMetrics(const std::string& path) {
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << path;
  int steps = 0;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(record.is_object()) << line;
    for (auto it = record.begin(); it != record.end(); ++it) {
      if (it.key() == "step" || it.key() == "time") continue;
      EXPECT_TRUE(it->is_number() || it->is_string()) << it.key() << " is not flat: " << line;
      EXPECT_NE(metrics::FindMetric(it.key()), nullptr)
          << it.key() << " is not in metrics/metric_catalog.cc";
    }
    if (!record.contains("actor/loss")) continue;
    ++steps;
    for (const char* key :
         {"actor/pg_loss", "actor/entropy", "actor/pg_clipfrac", "actor/ppo_kl", "actor/grad_norm",
          "critic/score/mean", "critic/score/max", "critic/score/min", "critic/advantages/mean",
          "response_length/mean", "response_length/max", "response_length/clip_ratio",
          "timing_s/step", "timing_s/gen", "timing_s/ref", "perf/throughput", "perf/max_memory_gb",
          "rollout/staleness_mean"}) {
      EXPECT_TRUE(record.contains(key)) << key << " missing from " << line;
    }
    EXPECT_GT(record["perf/max_memory_gb"].get<double>(), 0.01) << line;
  }
  EXPECT_GT(steps, 0) << path << " has no step record";
}

TEST_F(GrpoEndToEnd, AsynchronousRunStaysWithinTheStalenessBound) {
  const std::string dir = TestDir("async");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/1, /*steps=*/6);
  spec.logging.log_every = 4;
  // The roles beside the trainer's step run at a lower CPU priority; the trainer does not.
  std::map<std::string, int> nice;
  std::vector<double> reference_seconds;
  auto on_step = [&](int64_t, const std::map<std::string, double>& m) {
    for (const char* name : {"async/rollout-0", "async/reference", "async/trainer"}) {
      if (!nice.count(name)) nice[name] = NiceOf(PidOf(name));
    }
    reference_seconds.push_back(m.at("timing_s/ref"));
  };
  absl::StatusOr<RunResult> r =
      RunGrpo(spec, cluster_->cluster(), {.log = Log, .job_id = "async", .on_step = on_step});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 6);
  EXPECT_LE(r->max_staleness_seen, 1);
  ExpectAccountingAddsUp(*r);
  ExpectVersionsNeverGoDown(*r);
  EXPECT_TRUE(fs::exists(dir + "/summary.json"));
  // logging.log_every = 4: the steps' records are those of steps 4 and 6 (the last).
  std::ifstream in(dir + "/metrics.jsonl");
  std::vector<int> logged;
  for (std::string line; std::getline(in, line);) {
    if (!absl::StrContains(line, R"("actor/loss")")) continue;
    for (int step = 1; step <= 6; ++step) {
      if (absl::StrContains(line, absl::StrCat(R"({"step":)", step, ","))) logged.push_back(step);
    }
  }
  EXPECT_EQ(logged, (std::vector<int>{4, 6}));
  // Every step's reference log-probs took time (they are prefetched during the step before).
  ASSERT_EQ(reference_seconds.size(), 6u);
  for (double s : reference_seconds) EXPECT_GT(s, 0);
  ExpectFlatCatalogedMetrics(dir + "/metrics.jsonl");
  EXPECT_EQ(nice["async/rollout-0"], 10);
  EXPECT_EQ(nice["async/reference"], 10);
  EXPECT_EQ(nice["async/trainer"], 0);
}

// model.init: random, with model.tokenizer: a character tokenizer whose ids differ from the
// task's own. The run's policy (initial and checkpointed) uses it.
TEST_F(GrpoEndToEnd, ARandomInitStartsFromRandomWeightsWithoutAnSftStage) {
  const std::string dir = TestDir("random-init");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/1, /*steps=*/2);
  spec.model.init = ModelInit::kRandom;
  auto reversed = models::CharTokenizer::Create("=+9876543210");
  ASSERT_TRUE(reversed.ok());
  const std::string tokenizer_json = (*reversed)->ToJson();
  spec.model.tokenizer = dir + "/reversed.json";
  test::WriteFile(spec.model.tokenizer, tokenizer_json);
  bool said = false;
  absl::StatusOr<RunResult> r =
      RunGrpo(spec, cluster_->cluster(),
              {.log =
                   [&said](const std::string& line) {
                     said |= absl::StrContains(line, "initial policy: random weights (seed 7)");
                     Log(line);
                   },
               .job_id = "random"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 2);
  EXPECT_TRUE(said);
  EXPECT_TRUE(fs::exists(dir + "/init/model.safetensors"));
  EXPECT_EQ(ReadFile(dir + "/init/tokenizer.json"), tokenizer_json);
  EXPECT_EQ(ReadFile(dir + "/ckpt/step_00000002/tokenizer.json"), tokenizer_json);
  EXPECT_FALSE(fs::exists(dir + "/sft"));  // no SFT stage ran
  EXPECT_TRUE(r->sft_dir.empty());
  EXPECT_LT(r->initial_accuracy, 0.1);  // untrained weights barely ever add up right
  ExpectNoSampleLost(*r);
}

// DAPO's dynamic sampling on a real run: groups whose rewards are all equal are dropped and
// replaced by new prompts, and every sample is accounted for, the filtered ones included.
TEST_F(GrpoEndToEnd, DynamicSamplingDropsAllEqualGroupsAndAccountsForThem) {
  const std::string dir = TestDir("dapo");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/1, /*steps=*/3);
  // The 20-step SFT policy is right ~5% of the time: most groups of 4 are all wrong.
  spec.algorithm.filter_groups = {.enable = true, .max_num_gen_batches = 50};
  // Generation rounds of 8 prompts: Generate calls of up to 4 (8 / 2 workers) instead of 2.
  spec.data.gen_batch_size = 8;
  int64_t steps_seen = 0, steps_with_group_shares = 0;
  double most_none_correct = 0, most_prompts_per_call = 0;
  bool flagged = false;  // says it is not reproducible (docs/reproducibility.md)
  absl::StatusOr<RunResult> r =
      RunGrpo(spec, cluster_->cluster(),
              {.log =
                   [&flagged](const std::string& line) {
                     flagged |= absl::StrContains(
                         line, "not reproducible from its seeds: with algorithm.filter_groups");
                     Log(line);
                   },
               .job_id = "dapo",
               .on_step =
                   [&](int64_t, const std::map<std::string, double>& m) {
                     ++steps_seen;
                     EXPECT_EQ(m.count("samples/filtered"), 1u);
                     if (m.count("rollout/prompts_per_call") > 0) {
                       EXPECT_LE(m.at("rollout/prompts_per_call"), 4);
                       most_prompts_per_call =
                           std::max(most_prompts_per_call, m.at("rollout/prompts_per_call"));
                     }
                     // The shares of all-right and all-wrong groups among every group scored since
                     // the previous step (filtered ones included), when some were.
                     if (m.count("rollout/groups_none_correct") > 0) {
                       ++steps_with_group_shares;
                       const double all = m.at("rollout/groups_all_correct");
                       const double none = m.at("rollout/groups_none_correct");
                       EXPECT_GE(all, 0);
                       EXPECT_GE(none, 0);
                       EXPECT_LE(all + none, 1);
                       most_none_correct = std::max(most_none_correct, none);
                       EXPECT_GT(m.at("rollout/neg_logprob"), 0);
                     }
                     // Every trained group had rewards that differ, so its advantages are not all
                     // 0.
                     EXPECT_GT(m.at("critic/advantages/max") - m.at("critic/advantages/min"), 0);
                   }});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(flagged);
  EXPECT_EQ(r->steps, 3);
  EXPECT_EQ(steps_seen, 3);
  EXPECT_GT(r->groups_filtered, 0) << "the tiny SFT policy solves or fails some groups entirely";
  EXPECT_GT(steps_with_group_shares, 0);
  EXPECT_GT(most_none_correct, 0) << "the ~5% policy fails whole groups, which are counted";
  EXPECT_GT(most_prompts_per_call, 2) << "calls larger than train_batch_size / replicas";
  EXPECT_EQ(r->samples_filtered, r->groups_filtered * spec.algorithm.n);
  const proto::ReplayStats& s = r->accounting;
  EXPECT_EQ(r->samples_lost, 0);
  EXPECT_EQ(r->samples_generated,
            s.used() + s.dropped_stale() + s.buffered() + r->samples_filtered);
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir + "/summary.json"));
  EXPECT_EQ(summary["samples_filtered"], r->samples_filtered);
}

// reward.overlong_buffer on a real run: with data.max_response_length 4 and a buffer of 3, a
// response of L >= 2 tokens loses 0.5 · (L - 1) / 3 (at most 0.5), reported as reward/overlong.
TEST_F(GrpoEndToEnd, OverlongResponsesAreShapedAndReported) {
  const std::string dir = TestDir("overlong");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/0, /*steps=*/2);
  spec.reward.overlong_buffer = {.enable = true, .len = 3, .penalty_factor = 0.5};
  double lowest = 0;
  absl::StatusOr<RunResult> r =
      RunGrpo(spec, cluster_->cluster(),
              {.log = Log,
               .job_id = "overlong",
               .on_step = [&](int64_t, const std::map<std::string, double>& m) {
                 auto it = m.find("reward/overlong");
                 if (it != m.end()) lowest = std::min(lowest, it->second);
                 EXPECT_GE(m.at("critic/score/min"), -0.5);
               }});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_LT(lowest, 0) << "no response was shaped";
  EXPECT_GE(lowest, -0.5);
  ExpectNoSampleLost(*r);
}

TEST_F(GrpoEndToEnd, KillingARolloutWorkerMidRunDoesNotStopTheJob) {
  const std::string dir = TestDir("kill");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/1, /*steps=*/8);
  Cluster& cluster = cluster_->cluster();
  bool killed = false;
  std::string killed_id;
  RunOptions options;
  options.job_id = "kill";
  options.log = Log;
  options.on_step = [&](int64_t step, const std::map<std::string, double>&) {
    if (step != 2 || killed) return;
    auto worker = cluster.GetActor<actors::RolloutWorker>("kill/rollout-0");
    ASSERT_TRUE(worker.ok()) << worker.status();
    killed_id = worker->id();
    auto info = cluster.GetActorInfo(worker->id());
    ASSERT_TRUE(info.ok() && info->pid() > 0);
    ASSERT_EQ(::kill(static_cast<pid_t>(info->pid()), SIGKILL), 0);
    killed = true;
  };
  absl::StatusOr<RunResult> r = RunGrpo(spec, cluster, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(killed);
  EXPECT_EQ(r->steps, 8);
  EXPECT_GE(r->weight_group_epochs, 2) << "the weight group was not re-formed after the kill";
  ExpectAccountingAddsUp(*r);
  ExpectVersionsNeverGoDown(*r);
  // The job's actors end with it; the head still knows the killed worker came back once.
  auto info = cluster.GetActorInfo(killed_id);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GE(info->num_restarts(), 1);
}

TEST_F(GrpoEndToEnd, ARewardServerKilledUnderAScoreCallLosesNoSample) {
  const std::string dir = TestDir("reward-kill");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/1, /*steps=*/6, SharedSftDir());
  RunOptions options{.log = Log, .job_id = "rk"};
  options.on_step = [&](int64_t step, const std::map<std::string, double>&) {
    if (step == 2) FreezeThenKill("rk/reward-0", std::chrono::milliseconds(1500));
  };
  absl::StatusOr<RunResult> r = RunGrpo(spec, cluster_->cluster(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 6);
  EXPECT_GE(r->call_retries, 1) << "no Score call was in flight when the reward server died";
  ExpectNoSampleLost(*r);
  ExpectAccountingAddsUp(*r);
}

TEST_F(GrpoEndToEnd, TheReferenceKilledUnderALogprobsCallCostsARetry) {
  const std::string dir = TestDir("reference-kill");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/1, /*steps=*/5, SharedSftDir());
  RunOptions options{.log = Log, .job_id = "ref"};
  options.on_step = [&](int64_t step, const std::map<std::string, double>&) {
    if (step == 2) FreezeThenKill("ref/reference", std::chrono::milliseconds(1500));
  };
  absl::StatusOr<RunResult> r = RunGrpo(spec, cluster_->cluster(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 5);
  EXPECT_GE(r->call_retries, 1);
  ExpectNoSampleLost(*r);
}

TEST_F(GrpoEndToEnd, TheCheckpointerKilledMidWriteLosesNoCheckpoint) {
  const std::string dir = TestDir("checkpointer-kill");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/1, /*steps=*/6, SharedSftDir());
  RunOptions options{.log = Log, .job_id = "ck"};
  // on_step runs before the step's checkpoint is handed over: the write of step 2 is in flight
  // to a frozen checkpointer when it dies.
  options.on_step = [&](int64_t step, const std::map<std::string, double>&) {
    if (step == 2) FreezeThenKill("ck/checkpointer", std::chrono::milliseconds(1500));
  };
  absl::StatusOr<RunResult> r = RunGrpo(spec, cluster_->cluster(), options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 6);
  EXPECT_GE(r->checkpoint_retries, 1);
  EXPECT_TRUE(r->checkpoint_failures.empty());
  EXPECT_EQ(r->checkpoints_written, 3);
  for (const char* step : {"step_00000002", "step_00000004", "step_00000006"}) {
    EXPECT_TRUE(fs::exists(absl::StrCat(dir, "/ckpt/", step, "/model.safetensors"))) << step;
  }
  for (const auto& e : fs::directory_iterator(dir + "/ckpt")) {
    EXPECT_NE(e.path().filename().string()[0], '.') << "scratch left behind: " << e.path();
  }
}

// The replay buffer (its default max_restarts) killed twice: first between calls at the first step
// boundary where it holds groups (the driver is blocked in on_step, so what it holds then is what
// is lost), then frozen under a call and killed two steps later. Each time it restarts, the
// driver restores its accounting from its record of it and generates the groups it held again.
// The run finishes every step and every sample is accounted for: generated = used + stale +
// buffered + discarded (the samples the dead buffer held).
TEST_F(GrpoEndToEnd, TheReplayBufferKilledMidRunIsRestoredAndWhatItHeldIsGeneratedAgain) {
  const std::string dir = TestDir("replay-kill");
  // Two batches of groups ahead of training: the buffer holds some at a step boundary.
  JobSpec spec = SmallJob(dir, /*max_staleness=*/2, /*steps=*/8, SharedSftDir());
  EXPECT_EQ(spec.actors.replay_buffer.max_restarts, 3) << "restartable by default";
  Cluster& cluster = cluster_->cluster();
  int64_t killed_at = 0, held = 0;
  RunOptions options{.log = Log, .job_id = "rb"};
  options.on_step = [&](int64_t step, const std::map<std::string, double>&) {
    if (killed_at > 0) {
      if (step == killed_at + 2) FreezeThenKill("rb/replay", std::chrono::milliseconds(1500));
      return;
    }
    absl::StatusOr<ActorHandle<actors::ReplayBuffer>> buffer =
        cluster.GetActor<actors::ReplayBuffer>("rb/replay");
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    absl::StatusOr<proto::ReplayStats> stats =
        buffer->Call(&actors::ReplayBuffer::Stats, proto::Empty()).Get();
    ASSERT_TRUE(stats.ok()) << stats.status();
    if (stats->buffered() == 0 || step > 5) return;
    held = stats->buffered();
    killed_at = step;
    ASSERT_EQ(::kill(PidOf("rb/replay"), SIGKILL), 0);
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    for (;;) {  // back before the driver goes on (its next call then finds the new instance)
      absl::StatusOr<proto::ActorInfo> info = cluster.GetActorInfo(buffer->id(), absl::Seconds(5));
      if (info.ok() && info->state() == proto::ALIVE && info->num_restarts() >= 1) break;
      ASSERT_LT(absl::Now(), deadline) << "the replay buffer did not come back";
      absl::SleepFor(absl::Milliseconds(100));
    }
  };
  absl::StatusOr<RunResult> r = RunGrpo(spec, cluster, options);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GT(killed_at, 0) << "the buffer held no group at steps 1-5";
  EXPECT_EQ(r->steps, 8);
  EXPECT_EQ(r->replay_buffer_restarts, 2);
  EXPECT_GE(r->samples_discarded, held) << "the first kill lost the " << held << " samples held";
  EXPECT_EQ(r->samples_discarded % 4, 0) << "whole groups of n = 4";
  EXPECT_GE(r->prompts_regenerated, r->samples_discarded / 4);
  const proto::ReplayStats& s = r->accounting;
  EXPECT_EQ(s.added(), s.used() + s.dropped_stale() + s.buffered());
  EXPECT_EQ(r->samples_lost, 0);
  EXPECT_EQ(r->samples_generated,
            s.used() + s.dropped_stale() + s.buffered() + r->samples_discarded)
      << "generated " << r->samples_generated << " used " << s.used() << " dropped "
      << s.dropped_stale() << " buffered " << s.buffered() << " discarded " << r->samples_discarded;
  // Every prompt drawn has its group in the buffer's accounting once (the lost ones again).
  EXPECT_EQ(s.added(), 4 * r->prompts_drawn);
  EXPECT_EQ(s.duplicates(), 0);
  const nlohmann::json summary = nlohmann::json::parse(ReadFile(dir + "/summary.json"));
  EXPECT_EQ(summary["status"], "succeeded");
  EXPECT_EQ(summary["samples_discarded"], r->samples_discarded);
  EXPECT_EQ(summary["replay_buffer_restarts"], 2);
  EXPECT_EQ(summary["samples_lost"], 0);
}

TEST_F(GrpoEndToEnd, ARolloutWorkerThatRestartsJustBeforeTheEvaluationIsRegrouped) {
  const std::string dir = TestDir("eval-kill");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/0, /*steps=*/3, SharedSftDir());
  Cluster& cluster = cluster_->cluster();
  RunOptions options{.log = Log, .job_id = "ev"};
  // After the last step the run evaluates; rollout-0 dies and is back (outside the weight group)
  // by then, without the driver having called it since.
  options.on_step = [&](int64_t step, const std::map<std::string, double>&) {
    if (step != 3) return;
    absl::StatusOr<UntypedActorHandle> h = cluster.GetActorByName("ev/rollout-0");
    ASSERT_TRUE(h.ok()) << h.status();
    ASSERT_EQ(::kill(PidOf("ev/rollout-0"), SIGKILL), 0);
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    for (;;) {
      absl::StatusOr<proto::ActorInfo> info = cluster.GetActorInfo(h->id(), absl::Seconds(5));
      if (info.ok() && info->state() == proto::ALIVE && info->num_restarts() >= 1) break;
      ASSERT_LT(absl::Now(), deadline) << "rollout-0 did not come back";
      absl::SleepFor(absl::Milliseconds(100));
    }
  };
  absl::StatusOr<RunResult> r = RunGrpo(spec, cluster, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 3);
  EXPECT_GE(r->final_accuracy, 0);
  ExpectNoSampleLost(*r);
}

TEST_F(GrpoEndToEnd, AFreshRunRefusesAnEarlierRunsOutputsUnlessToldWhatToDo) {
  const std::string dir = TestDir("earlier");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/0, /*steps=*/2, SharedSftDir());
  absl::StatusOr<RunResult> first =
      RunGrpo(spec, cluster_->cluster(), {.log = Log, .job_id = "earlier-1"});
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(fs::exists(dir + "/ckpt/step_00000002"));
  EXPECT_FALSE(FindEarlierRun(spec).empty());

  absl::StatusOr<RunResult> again =
      RunGrpo(spec, cluster_->cluster(), {.log = Log, .job_id = "earlier-2"});
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
  EXPECT_NE(again.status().message().find("--overwrite"), std::string::npos) << again.status();
  EXPECT_TRUE(fs::exists(dir + "/ckpt/step_00000002")) << "a refused run removed a checkpoint";

  spec.trainer.total_steps = 1;
  spec.actors.checkpointer.every_steps = 1;
  absl::StatusOr<RunResult> replaced =
      RunGrpo(spec, cluster_->cluster(), {.overwrite = true, .log = Log, .job_id = "earlier-3"});
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_FALSE(fs::exists(dir + "/ckpt/step_00000002")) << "--overwrite kept the earlier run's";
  EXPECT_TRUE(fs::exists(dir + "/ckpt/step_00000001"));
  // Its metrics replaced the earlier run's: one initial evaluation, steps 1 and no step 2.
  std::ifstream in(dir + "/metrics.jsonl");
  int initial_evals = 0, step2 = 0;
  for (std::string line; std::getline(in, line);) {
    initial_evals +=
        absl::StrContains(line, R"("step":0,)") && absl::StrContains(line, R"("val/accuracy")");
    step2 += absl::StrContains(line, R"("step":2,)");
  }
  EXPECT_EQ(initial_evals, 1);
  EXPECT_EQ(step2, 0);
}

}  // namespace
}  // namespace troupe::recipes
