// Benchmark (fault tolerance): kill -9 of one restartable actor at a random moment of a short
// asynchronous GRPO job (PPO for the critic), many times per actor kind, and count what survived.
//
// Each trial runs a fresh job (tiny model, shared SFT start, 12 steps, an evaluation and a
// checkpoint every 2 steps, the rollout, reward, reference and checkpointer kinds with
// max_restarts 2, the replay buffer and the critic with their defaults) on one embedded cluster
// and kills one actor of the kind under test with SIGKILL, at a step chosen at random and a
// random delay (0-400 ms) after it, so kills land during generation, scoring, reference
// log-probs, the critic's values and updates, evaluations and checkpoint writes. Kinds: rollout,
// reward, reference, checkpointer, replay (the replay buffer), critic (recipe ppo with
// adv_estimator gae: the job adds a critic). A trial counts as
//   survived       the job ended OK with all its steps,
//   lossless       ... and no sample was lost (generated = used + stale + buffered + filtered +
//                  discarded, the last being the samples a killed replay buffer held, whose
//                  prompts were generated again) and every checkpoint step is on disk with no
//                  scratch directory left behind.
// The JSON line also has the samples discarded with a killed replay buffer, the critic updates
// lost with a killed critic (restored from its newest checkpoint), and how many restarts of
// either the driver restored (one per kill that landed while the job ran).
// One JSON line per kind: {"bench":"grpo_chaos","metric":"kills_survived","kind":K,"value":S,
// "unit":"kills","trials":N,"lossless":L,...}, with a progress line per trial on stderr.
//
//   bazel build //bench:grpo_chaos_bench //cli:troupe &&
//     bazel-bin/bench/grpo_chaos_bench [--trials=6]
//                                      [--kinds=rollout,reward,reference,checkpointer,replay,critic]
//                                      [--seed=1] [--max_staleness=1]
//                                      [--worker_binary=bazel-bin/cli/troupe]
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/online/grpo_recipe.h"
#include "recipes/recipe.h"
#include "runtime/cluster/embedded/embedded_cluster.h"

namespace troupe::bench {
namespace {

namespace fs = std::filesystem;

struct Flags {
  int trials = 6;
  std::vector<std::string> kinds = {"rollout",      "reward", "reference",
                                    "checkpointer", "replay", "critic"};
  uint64_t seed = 1;
  int steps = 12;
  int max_staleness = 1;  // async.max_staleness (2: more groups wait in the replay buffer)
  std::string worker_binary = "bazel-bin/cli/troupe";
};

std::string JobYaml(const std::string& dir, const std::string& sft_dir, int steps,
                    int max_staleness, bool ppo) {
  return absl::StrCat(
      ppo ? "recipe: ppo\n" : "", R"(
name: chaos
model: {config: examples/models/tiny.json, init: sft}
data: {task: arithmetic, digits: 2, num_train: 500, heldout_size: 40, seed: 3,
       train_batch_size: 8, max_prompt_length: 8, max_response_length: 4}
sft: {steps: 20, batch_size: 16, warmup_steps: 5, eval_every: 20, dir: )",
      sft_dir, R"(}
algorithm: {adv_estimator: )",
      ppo ? "gae" : "grpo", R"(, n: 4, kl: {coef: 0.01, type: k3}}
async: {max_staleness: )",
      max_staleness, R"(}
trainer: {total_steps: )",
      steps, R"(, seed: 7, lr: 3.0e-4, eval_every: 2}
actors:
  rollout: {replicas: 2, resources: {CPU: 0.25}, max_restarts: 2}
  reward: {replicas: 1, resources: {CPU: 0.25}, max_restarts: 2}
  reference: {replicas: 1, resources: {CPU: 0.25}, max_restarts: 2}
  trainer: {replicas: 1, resources: {CPU: 0.25}}
)",
      ppo ? "  critic: {replicas: 1, resources: {CPU: 0.25}, config: {lr: 1.0e-3}}\n" : "",
      R"(  checkpointer: {every_steps: 2, keep: 10, max_restarts: 2, dir: )", dir, R"(/ckpt}
logging: {dir: )",
      dir, R"(, tensorboard: false}
)");
}

// The actor of `kind` a trial kills (the first replica).
std::string Victim(const std::string& job, const std::string& kind) {
  if (kind == "rollout") return job + "/rollout-0";
  if (kind == "reward") return job + "/reward-0";
  if (kind == "replay") return job + "/replay";
  return absl::StrCat(job, "/", kind);
}

struct Trial {
  bool survived = false;
  bool lossless = false;
  bool killed = false;
  int64_t samples_lost = 0;
  int64_t samples_discarded = 0;
  int64_t critic_updates_lost = 0;
  int64_t restarts_restored = 0;  // replay buffer or critic restarts the driver restored
  int missing_checkpoints = 0;
  int scratch_left = 0;
  std::string error;
  double seconds = 0;
};

Trial RunTrial(Cluster& cluster, const Flags& f, const std::string& kind, int index,
               const std::string& base, std::mt19937_64& rng) {
  Trial t;
  const std::string dir = absl::StrCat(base, "/", kind, "-", index);
  fs::remove_all(dir);
  absl::StatusOr<recipes::JobSpec> spec = recipes::ParseJobSpec(
      JobYaml(dir, base + "/sft", f.steps, f.max_staleness, kind == "critic"), "chaos.yaml");
  if (!spec.ok()) {
    t.error = spec.status().ToString();
    return t;
  }
  const std::string job = absl::StrCat("chaos-", kind, "-", index);
  const int kill_step = std::uniform_int_distribution<int>(1, f.steps - 3)(rng);
  const int delay_ms = std::uniform_int_distribution<int>(0, 400)(rng);
  std::vector<std::thread> killers;
  recipes::RunOptions o;
  o.job_id = job;
  o.on_step = [&](int64_t step, const std::map<std::string, double>&) {
    if (step != kill_step) return;
    absl::StatusOr<UntypedActorHandle> h = cluster.GetActorByName(Victim(job, kind));
    if (!h.ok()) return;
    absl::StatusOr<proto::ActorInfo> info = cluster.GetActorInfo(h->id());
    if (!info.ok() || info->pid() <= 0) return;
    const pid_t pid = static_cast<pid_t>(info->pid());
    killers.emplace_back([pid, delay_ms, &t] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      t.killed = ::kill(pid, SIGKILL) == 0;
    });
  };
  const absl::Time start = absl::Now();
  absl::StatusOr<recipes::RunResult> r = recipes::RunRecipe(*spec, cluster, o);
  t.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (std::thread& k : killers) k.join();
  if (!r.ok()) {
    t.error = r.status().ToString();
    return t;
  }
  t.survived = r->steps == f.steps;
  const proto::ReplayStats& a = r->accounting;
  t.samples_discarded = r->samples_discarded;
  t.critic_updates_lost = r->critic_updates_lost;
  t.restarts_restored = r->replay_buffer_restarts + r->critic_restarts;
  t.samples_lost = r->samples_generated - (a.used() + a.dropped_stale() + a.buffered() +
                                           r->samples_filtered + r->samples_discarded);
  for (int step = 2; step <= f.steps; step += 2) {
    char name[64];
    std::snprintf(name, sizeof(name), "/ckpt/step_%08d/model.safetensors", step);
    t.missing_checkpoints += !fs::exists(dir + name);
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir + "/ckpt", ec)) {
    t.scratch_left += e.path().filename().string()[0] == '.';
  }
  for (const auto& e : fs::directory_iterator(dir + "/ckpt/critic", ec)) {  // recipe ppo's
    t.scratch_left += e.path().filename().string().find(".tmp-") != std::string::npos;
  }
  t.lossless =
      t.survived && t.samples_lost == 0 && t.missing_checkpoints == 0 && t.scratch_left == 0;
  if (!t.lossless && std::getenv("CHAOS_KEEP") != nullptr) return t;
  fs::remove_all(dir, ec);
  return t;
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = absl::StrCat("--", name, "=");
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("trials")) {
      f.trials = std::atoi(v);
    } else if (const char* v = value("kinds")) {
      f.kinds = absl::StrSplit(v, ',');
    } else if (const char* v = value("seed")) {
      f.seed = std::strtoull(v, nullptr, 10);
    } else if (const char* v = value("max_staleness")) {
      f.max_staleness = std::atoi(v);
    } else if (const char* v = value("worker_binary")) {
      f.worker_binary = v;
    } else {
      std::fprintf(stderr,
                   "usage: grpo_chaos_bench [--trials=N] [--kinds=rollout,reward,reference,"
                   "checkpointer,replay,critic] [--seed=S] [--max_staleness=1] "
                   "[--worker_binary=P]\n");
      return 2;
    }
  }
  for (const std::string& kind : f.kinds) {
    if (kind != "rollout" && kind != "reward" && kind != "reference" && kind != "checkpointer" &&
        kind != "replay" && kind != "critic") {
      std::fprintf(stderr,
                   "grpo_chaos_bench: unknown kind '%s' (rollout, reward, reference, "
                   "checkpointer, replay, critic)\n",
                   kind.c_str());
      return 2;
    }
  }
  if (f.max_staleness < 1) {
    std::fprintf(stderr, "grpo_chaos_bench: --max_staleness must be at least 1 (asynchronous)\n");
    return 2;
  }
  if (f.trials < 1) {
    std::fprintf(stderr, "grpo_chaos_bench: --trials must be at least 1\n");
    return 2;
  }
  f.worker_binary = fs::absolute(f.worker_binary).string();
  const std::string base = fs::temp_directory_path().string() + "/troupe-chaos-bench";
  fs::remove_all(base);
  absl::StatusOr<std::unique_ptr<EmbeddedCluster>> cluster =
      EmbeddedCluster::Start({.state_dir = base + "/cluster",
                              .resources_json = R"({"CPU": 2})",
                              .worker_binary = f.worker_binary});
  if (!cluster.ok()) {
    std::fprintf(stderr, "grpo_chaos_bench: %s\n", cluster.status().ToString().c_str());
    return 1;
  }
  std::mt19937_64 rng(f.seed);
  const int total = f.trials * static_cast<int>(f.kinds.size());
  int done = 0;
  const absl::Time start = absl::Now();
  for (const std::string& kind : f.kinds) {
    int survived = 0, lossless = 0, killed = 0;
    int64_t lost = 0, discarded = 0, critic_lost = 0, restored = 0;
    int missing = 0;
    std::vector<std::string> errors;
    for (int i = 0; i < f.trials; ++i) {
      Trial t = RunTrial((*cluster)->cluster(), f, kind, i, base, rng);
      survived += t.survived;
      lossless += t.lossless;
      killed += t.killed;
      lost += t.samples_lost;
      discarded += t.samples_discarded;
      critic_lost += t.critic_updates_lost;
      restored += t.restarts_restored;
      missing += t.missing_checkpoints;
      if (!t.error.empty()) errors.push_back(t.error);
      ++done;
      const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
      std::fprintf(stderr, "[%d/%d] %s #%d: %s%s (%.0fs; %.2f trials/min, ETA %.0fs)%s%s\n", done,
                   total, kind.c_str(), i, t.survived ? "survived" : "FAILED",
                   t.survived && !t.lossless ? " with a loss" : "", t.seconds,
                   60.0 * done / elapsed, elapsed / done * (total - done),
                   t.error.empty() ? "" : ": ", t.error.substr(0, 200).c_str());
    }
    std::string first_error = errors.empty() ? "" : errors.front().substr(0, 160);
    for (char& c : first_error) {
      if (c == '"' || c == '\\' || c < ' ') c = ' ';
    }
    std::printf(
        "{\"bench\":\"grpo_chaos\",\"metric\":\"kills_survived\",\"kind\":\"%s\",\"value\":%d,"
        "\"unit\":\"kills\",\"trials\":%d,\"kills_delivered\":%d,\"lossless\":%d,"
        "\"samples_lost\":%lld,\"samples_discarded\":%lld,\"critic_updates_lost\":%lld,"
        "\"restarts_restored\":%lld,\"checkpoints_missing\":%d,\"first_error\":\"%s\"}\n",
        kind.c_str(), survived, f.trials, killed, lossless, static_cast<long long>(lost),
        static_cast<long long>(discarded), static_cast<long long>(critic_lost),
        static_cast<long long>(restored), missing, first_error.c_str());
    std::fflush(stdout);
  }
  if (std::getenv("CHAOS_KEEP") == nullptr) fs::remove_all(base);
  return 0;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) { return troupe::bench::Main(argc, argv); }
