// Benchmark: the runtime's overhead on one synchronous GRPO step. The same step — generate
// `batch` prompts x n samples, score them, reference log-probs, a GRPO update, new weights into
// the generator — is run
//   (a) on actors: the GRPO driver on an embedded cluster, each actor in its own worker process
//       (1 rollout worker, reward server, reference, trainer, replay buffer, checkpointer), calls
//       over gRPC, weights over the Gloo collective;
//   (b) in one process without the runtime: the same actor classes called as plain objects,
//       samples handed over in memory, weights copied in place;
// with the same SFT start, seeds and thread count (1), in the same run. Each of `rounds` rounds
// runs both (a fresh cluster and fresh objects, `steps` steps each, the first `warmup` not
// counted), in the order ab, ba, ab, ... so that load changes on this shared machine hit both.
// Reports the median step time of each over all rounds and the ratio (actors / single process;
// target <= 1.05), and each round's ratio.
//
//   bazel build //bench:grpo_step_overhead //cli:troupe &&
//     bazel-bin/bench/grpo_step_overhead --sft_dir=runs/grpo-arith/sft [--steps=12] [--batch=32]
//       [--rounds=4]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "actors/reference.h"
#include "actors/reward_server.h"
#include "actors/rollout_worker.h"
#include "actors/trainer.h"
#include "actors/trainer_core.h"
#include "base/malloc_tuning.h"
#include "base/status_macros.h"
#include "models/compute_threads.h"
#include "models/tokenizers/tokenizer.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/online/grpo_recipe.h"
#include "recipes/online/online_config.h"
#include "runtime/cluster/embedded/embedded_cluster.h"
#include "tasks/arithmetic/arithmetic_task.h"

namespace troupe::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string sft_dir = "runs/grpo-arith/sft";
  int steps = 12;
  int rounds = 4;
  int warmup = 2;
  int batch = 32;
  int n = 8;
  std::string worker_binary;  // default: bazel-bin/cli/troupe beside this binary's workspace
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::string JobYaml(const Flags& f, const std::string& dir) {
  return absl::StrCat(R"(
name: overhead
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 0, dropped_carry_rate: 0.7, heldout_size: 100,
       seed: 1, train_batch_size: )",
                      f.batch, R"(, max_prompt_length: 8, max_response_length: 4}
sft: {dir: )",
                      f.sft_dir, R"(}
algorithm: {adv_estimator: grpo, n: )",
                      f.n, R"(, kl: {coef: 0.001, type: k3}}
async: {max_staleness: 0}
trainer: {total_steps: )",
                      f.steps, R"(, seed: 1, lr: 3.0e-4, eval_every: 0}
actors:
  rollout: {replicas: 1, resources: {CPU: 0.5}}
  reward: {replicas: 1, resources: {CPU: 0.25}}
  reference: {replicas: 1, resources: {CPU: 0.25}}
  trainer: {replicas: 1, resources: {CPU: 0.5}}
  checkpointer: {every_steps: 0}
logging: {dir: )",
                      dir, R"(, tensorboard: false}
)");
}

// (a) On actors: per-step wall times reported by the driver.
absl::StatusOr<std::vector<double>> RunOnActors(const Flags& f, const recipes::JobSpec& spec) {
  TROUPE_ASSIGN_OR_RETURN(auto cluster,
                          EmbeddedCluster::Start({.state_dir = spec.logging.dir + "/cluster",
                                                  .resources_json = R"({"CPU": 2})",
                                                  .worker_binary = f.worker_binary}));
  std::vector<double> times;
  recipes::RunOptions o;
  o.job_id = "overhead";
  o.on_step = [&](int64_t, const std::map<std::string, double>& m) {
    times.push_back(m.at("timing_s/step"));
    auto get = [&m](const char* key) {
      auto it = m.find(key);
      return it == m.end() ? 0.0 : it->second;
    };
    std::fprintf(stderr,
                 "actors: step %zu/%d  %.3fs (generate %.3f, reference %.3f, update %.3f, "
                 "publish %.3f)\n",
                 times.size(), f.steps, times.back(), get("timing_s/gen"), get("timing_s/ref"),
                 get("timing_s/update_actor"), get("timing_s/update_weights"));
  };
  TROUPE_RETURN_IF_ERROR(recipes::RunGrpo(spec, cluster->cluster(), o).status());
  std::fprintf(stderr, "\n");
  return std::vector<double>(times.begin() + std::min<size_t>(f.warmup, times.size()), times.end());
}

// (b) One process, no runtime: the actors' cores (and the reward server) as plain objects.
absl::StatusOr<std::vector<double>> RunInProcess(const Flags& f, const recipes::JobSpec& spec) {
  auto ctx = [](const std::string& type, nlohmann::json config) {
    return ActorContext(nullptr, type, type, type, std::move(config), 0, nullptr);
  };
  models::SetComputeThreads(1);  // as the recipe's workers do (ActorSpec.compute_threads)
  proto::RolloutWorkerConfig rollout_config;
  rollout_config.set_model_dir(f.sft_dir);
  rollout_config.set_num_slots(f.batch * f.n);
  rollout_config.set_max_seq_len(14);
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<actors::RolloutWorkerCore> rollout,
                          actors::RolloutWorkerCore::Create(rollout_config, "rollout"));
  TROUPE_ASSIGN_OR_RETURN(
      std::unique_ptr<actors::RewardServer> reward,
      actors::RewardServer::Create(ctx("RewardServer", {{"task", "arithmetic"}})));
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<actors::ReferenceCore> reference,
                          actors::ReferenceCore::Create(recipes::OnlineReferenceConfig(f.sft_dir)));
  // The trainer the recipe would configure (no checkpointer: nothing calls Checkpoint).
  TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<actors::TrainerCore> trainer,
                          actors::TrainerCore::Create(
                              recipes::OnlineTrainerConfig(spec, f.sft_dir, "", "checkpointer")));
  tasks::ArithmeticTaskOptions to;
  to.digits = 2;
  to.num_train = 0;
  to.dropped_carry_rate = 0.7;
  to.num_heldout = 100;
  to.seed = 1;
  TROUPE_ASSIGN_OR_RETURN(tasks::ArithmeticTask task, tasks::ArithmeticTask::Create(to));
  TROUPE_ASSIGN_OR_RETURN(auto tokenizer, models::LoadTokenizer(f.sft_dir + "/tokenizer.json"));
  std::vector<double> times;
  int64_t cursor = 0;
  for (int step = 0; step < f.steps; ++step) {
    const auto start = Clock::now();
    proto::GenerateRequest gen;
    for (int i = 0; i < f.batch; ++i, ++cursor) {
      tasks::ArithmeticProblem p = task.Problem(tasks::TaskSplit::kTrain, cursor);
      proto::Prompt* prompt = gen.add_prompts();
      prompt->set_prompt_id(cursor);
      prompt->set_reference_answer(p.answer);
      prompt->add_tokens(tokenizer->bos_id().value_or(1));
      TROUPE_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer->Encode(p.prompt));
      for (int32_t t : ids) prompt->add_tokens(t);
    }
    gen.set_n(f.n);
    gen.set_temperature(1);
    gen.set_max_new_tokens(4);
    gen.set_seed(static_cast<uint64_t>(step) + 1);
    TROUPE_ASSIGN_OR_RETURN(proto::GenerateReply samples, rollout->Generate(gen));
    const double gen_s = std::chrono::duration<double>(Clock::now() - start).count();
    proto::ScoreRequest sr;
    *sr.mutable_groups() = std::move(*samples.mutable_groups());
    TROUPE_ASSIGN_OR_RETURN(proto::ScoreReply scored, reward->Score(sr));
    proto::LogprobRequest lr;
    for (const auto& g : scored.groups()) {
      for (const auto& s : g.samples()) *lr.add_samples() = s;
    }
    const auto ref_start = Clock::now();
    TROUPE_ASSIGN_OR_RETURN(proto::LogprobReply ref, reference->Logprobs(lr));
    const double ref_s = std::chrono::duration<double>(Clock::now() - ref_start).count();
    proto::TrainStepRequest tr;
    *tr.mutable_groups() = std::move(*scored.mutable_groups());
    *tr.mutable_ref_logprobs() = std::move(*ref.mutable_logprobs());
    tr.set_step(step);
    const auto train_start = Clock::now();
    TROUPE_ASSIGN_OR_RETURN(proto::TrainStepReply reply, trainer->Update(tr));
    const double train_s = std::chrono::duration<double>(Clock::now() - train_start).count();
    const auto load_start = Clock::now();
    TROUPE_RETURN_IF_ERROR(
        rollout->QueueWeights(trainer->CurrentWeights(), reply.weight_version()));
    const double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
    times.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    std::fprintf(stderr,
                 "single process: step %zu/%d  %.3fs (generate %.3f, reference %.3f, update %.3f, "
                 "load weights %.3f)\n",
                 times.size(), f.steps, times.back(), gen_s, ref_s, train_s, load_s);
  }
  std::fprintf(stderr, "\n");
  return std::vector<double>(times.begin() + std::min<size_t>(f.warmup, times.size()), times.end());
}

int Main(int argc, char** argv) {
  // As in troupe's own processes (the workers of (a) call it too), so both sides match.
  RetainFreedMemory();
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = absl::StrCat("--", name, "=");
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("sft_dir")) {
      f.sft_dir = v;
    } else if (const char* v = value("steps")) {
      f.steps = std::atoi(v);
    } else if (const char* v = value("rounds")) {
      f.rounds = std::atoi(v);
    } else if (const char* v = value("batch")) {
      f.batch = std::atoi(v);
    } else if (const char* v = value("n")) {
      f.n = std::atoi(v);
    } else if (const char* v = value("worker_binary")) {
      f.worker_binary = v;
    } else {
      std::fprintf(stderr,
                   "usage: grpo_step_overhead [--sft_dir=D] [--steps=N] [--rounds=R] [--batch=B] "
                   "[--n=N] [--worker_binary=P]\n");
      return 2;
    }
  }
  if (!std::filesystem::exists(f.sft_dir + "/model.safetensors")) {
    std::fprintf(
        stderr,
        "grpo_step_overhead: no SFT checkpoint in %s (run `make demo` first, or pass --sft_dir)\n",
        f.sft_dir.c_str());
    return 2;
  }
  if (f.worker_binary.empty()) {
    f.worker_binary =
        std::filesystem::exists("bazel-bin/cli/troupe") ? "bazel-bin/cli/troupe" : "cli/troupe";
  }
  f.worker_binary = std::filesystem::absolute(f.worker_binary).string();
  const std::string dir =
      std::filesystem::temp_directory_path().string() + "/troupe-overhead-bench";
  std::filesystem::remove_all(dir);
  absl::StatusOr<recipes::JobSpec> spec = recipes::ParseJobSpec(JobYaml(f, dir), "overhead.yaml");
  if (!spec.ok()) {
    std::fprintf(stderr, "%s\n", spec.status().ToString().c_str());
    return 1;
  }
  if (f.steps <= f.warmup || f.rounds < 1) {
    std::fprintf(stderr, "grpo_step_overhead: need --steps > %d and --rounds >= 1\n", f.warmup);
    return 2;
  }
  std::vector<double> all_actors, all_single;
  std::string round_ratios;
  for (int round = 0; round < f.rounds; ++round) {
    std::fprintf(stderr, "round %d/%d\n", round + 1, f.rounds);
    std::vector<double> a, s;
    for (int k = 0; k < 2; ++k) {
      const bool single_now = (k == 0) == (round % 2 == 0);
      absl::StatusOr<std::vector<double>> t =
          single_now ? RunInProcess(f, *spec) : RunOnActors(f, *spec);
      if (!t.ok()) {
        std::fprintf(stderr, "%s: %s\n", single_now ? "single process" : "actors",
                     t.status().ToString().c_str());
        return 1;
      }
      (single_now ? s : a) = *t;
      std::filesystem::remove_all(dir);
    }
    absl::StrAppend(&round_ratios, round_ratios.empty() ? "" : ",",
                    absl::StrFormat("%.3f", Median(a) / Median(s)));
    all_actors.insert(all_actors.end(), a.begin(), a.end());
    all_single.insert(all_single.end(), s.begin(), s.end());
  }
  const double a = Median(all_actors), s = Median(all_single);
  std::printf(
      "{\"bench\":\"grpo_step_overhead\",\"metric\":\"sync_step_seconds\",\"value\":%.4f,\"unit\":"
      "\"s\","
      "\"baseline\":\"single_process_no_runtime\",\"baseline_value\":%.4f,\"ratio\":%.3f,"
      "\"target_ratio\":1.05,\"round_ratios\":[%s],\"batch\":%d,\"n\":%d,"
      "\"steps_measured\":%zu}\n",
      a, s, a / s, round_ratios.c_str(), f.batch, f.n, all_actors.size());
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) { return troupe::bench::Main(argc, argv); }
