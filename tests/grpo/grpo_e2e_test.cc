// End-to-end GRPO jobs on an embedded cluster: real worker processes (the troupe binary hosts the
// RL actors), a tiny model, a few steps. Checks what the issue asks of the vertical slice: the
// sample accounting adds up, weight versions only grow per worker, staleness stays within the
// bound, a synchronous run resumed from a checkpoint reproduces the uninterrupted run's losses, and
// killing a rollout worker with kill -9 mid-run does not stop the job.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "actors/rollout_worker.h"
#include "gtest/gtest.h"
#include "recipes/grpo/grpo_driver.h"
#include "recipes/job_spec/job_spec.h"
#include "runtime/cluster/embedded_cluster.h"

namespace troupe::recipes {
namespace {

namespace fs = std::filesystem;

void Log(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

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
  reward: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
  checkpointer: {every_steps: 2, keep: 5, dir: )",
                                  dir, R"(/ckpt}
logging: {dir: )",
                                  dir, R"(, tensorboard: false}
)");
  absl::StatusOr<JobSpec> spec = ParseJobSpec(yaml, "e2e.yaml");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
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

  void ExpectAccountingAddsUp(const GrpoResult& r) {
    const proto::ReplayStats& s = r.accounting;
    EXPECT_EQ(s.added(), s.used() + s.dropped_stale() + s.buffered())
        << "added " << s.added() << " used " << s.used() << " dropped " << s.dropped_stale()
        << " buffered " << s.buffered();
    EXPECT_EQ(s.duplicates(), 0);
    EXPECT_GT(s.used(), 0);
  }

  void ExpectVersionsNeverGoDown(const GrpoResult& r) {
    ASSERT_FALSE(r.worker_versions.empty());
    for (const auto& [worker, versions] : r.worker_versions) {
      for (size_t i = 1; i < versions.size(); ++i) {
        ASSERT_LE(versions[i - 1], versions[i]) << worker << " sample " << i;
      }
    }
  }

  std::unique_ptr<EmbeddedCluster> cluster_;
};

TEST_F(GrpoEndToEnd, SynchronousRunResumedFromACheckpointReproducesTheLosses) {
  const std::string base = TestDir("sync");
  std::map<int64_t, double> full, resumed;
  auto recorder = [](std::map<int64_t, double>* out) {
    return [out](int64_t step, const std::map<std::string, double>& m) {
      (*out)[step] = m.at("train/loss");
    };
  };
  // Uninterrupted: 4 steps.
  JobSpec a = SmallJob(base + "/a", /*max_staleness=*/0, /*steps=*/4);
  absl::StatusOr<GrpoResult> ra =
      RunGrpo(a, cluster_->cluster(), {.log = Log, .job_id = "a", .on_step = recorder(&full)});
  ASSERT_TRUE(ra.ok()) << ra.status();
  EXPECT_EQ(ra->steps, 4);
  ExpectAccountingAddsUp(*ra);
  EXPECT_EQ(ra->accounting.dropped_stale(), 0);  // on-policy: nothing is ever stale
  EXPECT_EQ(ra->max_staleness_seen, 0);
  ExpectVersionsNeverGoDown(*ra);

  // Interrupted after 2 steps (checkpoint at step 2), then resumed to 4, from the same SFT start.
  JobSpec b = SmallJob(base + "/b", 0, 4, base + "/a/sft");
  absl::StatusOr<GrpoResult> rb1 =
      RunGrpo(b, cluster_->cluster(),
              {.log = Log, .job_id = "b1", .stop_after_steps = 2, .on_step = recorder(&resumed)});
  ASSERT_TRUE(rb1.ok()) << rb1.status();
  EXPECT_EQ(rb1->steps, 2);
  ASSERT_TRUE(fs::exists(base + "/b/ckpt/step_00000002/model.safetensors"));
  absl::StatusOr<GrpoResult> rb2 =
      RunGrpo(b, cluster_->cluster(),
              {.resume = true, .log = Log, .job_id = "b2", .on_step = recorder(&resumed)});
  ASSERT_TRUE(rb2.ok()) << rb2.status();
  EXPECT_EQ(rb2->steps, 4);
  ASSERT_EQ(full.size(), 4u);
  ASSERT_EQ(resumed.size(), 4u);
  for (const auto& [step, loss] : full) {
    EXPECT_DOUBLE_EQ(resumed[step], loss) << "step " << step;
  }
}

TEST_F(GrpoEndToEnd, AsynchronousRunStaysWithinTheStalenessBound) {
  const std::string dir = TestDir("async");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/1, /*steps=*/6);
  absl::StatusOr<GrpoResult> r =
      RunGrpo(spec, cluster_->cluster(), {.log = Log, .job_id = "async"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->steps, 6);
  EXPECT_LE(r->max_staleness_seen, 1);
  ExpectAccountingAddsUp(*r);
  ExpectVersionsNeverGoDown(*r);
  EXPECT_TRUE(fs::exists(dir + "/metrics.jsonl"));
  EXPECT_TRUE(fs::exists(dir + "/summary.json"));
}

TEST_F(GrpoEndToEnd, KillingARolloutWorkerMidRunDoesNotStopTheJob) {
  const std::string dir = TestDir("kill");
  JobSpec spec = SmallJob(dir, /*max_staleness=*/1, /*steps=*/8);
  Cluster& cluster = cluster_->cluster();
  bool killed = false;
  std::string killed_id;
  GrpoRunOptions options;
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
  absl::StatusOr<GrpoResult> r = RunGrpo(spec, cluster, options);
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

}  // namespace
}  // namespace troupe::recipes
