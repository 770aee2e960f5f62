// Benchmark: wall time for GRPO to reach a held-out accuracy, asynchronous (max_staleness = 2)
// against synchronous (0) — the same job (examples/grpo_arith.yaml), the same SFT start, the same
// cores, in the same run. Reports both times and the speedup (sync / async; target >= 1.8), plus
// both accuracy curves (held-out exact match every `eval_every` steps, with wall time), and a
// second line with the ceiling overlap can reach for this job here: the synchronous step time over
// the longest of its generate, reference and train parts, and the share of it the asynchronous
// run reached. --nice=N sets the rollout workers' and the reference's CPU niceness in both runs
// (RunOptions::off_critical_path_nice; --nice=0 is equal shares with the trainer).
//
//   bazel build //bench:rl_async_vs_sync //cli:troupe &&
//     bazel-bin/bench/rl_async_vs_sync --sft_dir=runs/grpo-arith/sft [--target=0.75] [--nice=N]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/online/grpo_recipe.h"
#include "recipes/recipe.h"
#include "runtime/cluster/embedded/embedded_cluster.h"

namespace troupe::bench {
namespace {

struct Flags {
  std::string job = "examples/grpo_arith.yaml";
  std::string sft_dir = "runs/grpo-arith/sft";
  double target = 0.75;
  int eval_every = 5;
  int max_steps = 150;
  int staleness = 2;
  std::string worker_binary;
  // RunOptions::off_critical_path_nice of both runs (the rollout workers' and the reference's
  // CPU niceness); -1 = the recipe's default.
  int nice = -1;
};

struct Run {
  double seconds_to_target = -1;  // -1: never reached
  int64_t steps_to_target = -1;
  std::vector<recipes::RlEvalPoint> curve;
  // Mean per-step wall time and its generate / train / reference parts (steps after the first
  // two). train_s is the trainer's step alone (the reference log-probs are computed before it,
  // or, asynchronously, beside the previous step).
  double step_s = 0, generate_s = 0, train_s = 0, reference_s = 0;
};

absl::StatusOr<Run> RunOnce(const Flags& f, int64_t staleness, const std::string& dir) {
  std::vector<std::string> overrides = {absl::StrCat("async.max_staleness=", staleness),
                                        absl::StrCat("trainer.eval_every=", f.eval_every),
                                        absl::StrCat("trainer.total_steps=", f.max_steps),
                                        absl::StrCat("sft.dir=", f.sft_dir),
                                        absl::StrCat("logging.dir=", dir),
                                        "actors.checkpointer.every_steps=0",
                                        "logging.tensorboard=false"};
  absl::StatusOr<recipes::JobSpec> spec = recipes::LoadJobSpec(f.job, overrides);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<std::unique_ptr<EmbeddedCluster>> cluster =
      EmbeddedCluster::Start({.state_dir = dir + "/cluster",
                              .resources_json = R"({"CPU": 2})",
                              .worker_binary = f.worker_binary});
  if (!cluster.ok()) return cluster.status();
  recipes::RunOptions o;
  o.job_id = absl::StrCat("bench-eta", staleness);
  o.stop_at_accuracy = f.target;
  if (f.nice >= 0) o.off_critical_path_nice = f.nice;
  double sums[4] = {0, 0, 0, 0};
  int64_t counted = 0;
  o.on_step = [&](int64_t step, const std::map<std::string, double>& m) {
    if (step <= 2) return;
    auto get = [&](const char* k) {
      auto it = m.find(k);
      return it == m.end() ? 0.0 : it->second;
    };
    sums[0] += get("timing_s/step");
    sums[1] += get("timing_s/gen");
    sums[2] += get("timing_s/train_call");
    sums[3] += get("timing_s/ref");
    ++counted;
  };
  o.log = [staleness](const std::string& line) {
    if (line.rfind("eval", 0) == 0)
      std::fprintf(stderr, "[eta=%lld] %s\n", static_cast<long long>(staleness), line.c_str());
  };
  // The recipe the job names (grpo, ppo or dpo: each an OnlineRecipe).
  absl::StatusOr<recipes::RunResult> r = recipes::RunRecipe(*spec, (*cluster)->cluster(), o);
  if (!r.ok()) return r.status();
  Run run;
  run.curve = r->curve;
  if (counted > 0) {
    run.step_s = sums[0] / counted;
    run.generate_s = sums[1] / counted;
    run.train_s = sums[2] / counted;
    run.reference_s = sums[3] / counted;
  }
  for (const recipes::RlEvalPoint& p : r->curve) {
    if (p.accuracy >= f.target) {
      run.seconds_to_target = p.seconds;
      run.steps_to_target = p.step;
      break;
    }
  }
  return run;
}

std::string CurveJson(const std::vector<recipes::RlEvalPoint>& curve) {
  std::string out = "[";
  for (size_t i = 0; i < curve.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", "[", curve[i].step, ",", curve[i].seconds, ",",
                    curve[i].accuracy, "]");
  }
  return out + "]";
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::string prefix = absl::StrCat("--", name, "=");
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("job")) {
      f.job = v;
    } else if (const char* v = value("sft_dir")) {
      f.sft_dir = v;
    } else if (const char* v = value("target")) {
      f.target = std::atof(v);
    } else if (const char* v = value("eval_every")) {
      f.eval_every = std::atoi(v);
    } else if (const char* v = value("max_steps")) {
      f.max_steps = std::atoi(v);
    } else if (const char* v = value("staleness")) {
      f.staleness = std::atoi(v);
    } else if (const char* v = value("worker_binary")) {
      f.worker_binary = v;
    } else if (const char* v = value("nice")) {
      f.nice = std::atoi(v);
    } else {
      std::fprintf(stderr,
                   "usage: rl_async_vs_sync [--job=Y] [--sft_dir=D] [--target=A] [--eval_every=K] "
                   "[--max_steps=N] [--staleness=E] [--worker_binary=P] [--nice=N]\n");
      return 2;
    }
  }
  if (!std::filesystem::exists(f.sft_dir + "/model.safetensors")) {
    std::fprintf(stderr, "rl_async_vs_sync: no SFT checkpoint in %s (run `make demo` first)\n",
                 f.sft_dir.c_str());
    return 2;
  }
  if (f.worker_binary.empty()) f.worker_binary = "bazel-bin/cli/troupe";
  f.worker_binary = std::filesystem::absolute(f.worker_binary).string();
  const std::string base =
      std::filesystem::temp_directory_path().string() + "/troupe-async-vs-sync";
  std::filesystem::remove_all(base);
  absl::StatusOr<Run> sync = RunOnce(f, 0, base + "/sync");
  if (!sync.ok()) {
    std::fprintf(stderr, "sync run: %s\n", sync.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<Run> async = RunOnce(f, f.staleness, base + "/async");
  if (!async.ok()) {
    std::fprintf(stderr, "async run: %s\n", async.status().ToString().c_str());
    return 1;
  }
  const bool both = sync->seconds_to_target > 0 && async->seconds_to_target > 0;
  std::printf(
      "{\"bench\":\"rl_async_vs_sync\",\"metric\":\"seconds_to_accuracy\",\"target_accuracy\":%.3f,"
      "\"value\":%.2f,\"unit\":\"s\",\"baseline\":\"sync_grpo\",\"baseline_value\":%.2f,"
      "\"ratio\":%.3f,\"async_steps\":%lld,\"sync_steps\":%lld,\"max_staleness\":%d,"
      "\"async_curve\":%s,\"sync_curve\":%s}\n",
      f.target, async->seconds_to_target, sync->seconds_to_target,
      both ? sync->seconds_to_target / async->seconds_to_target : 0.0,
      static_cast<long long>(async->steps_to_target), static_cast<long long>(sync->steps_to_target),
      f.staleness, CurveJson(async->curve).c_str(), CurveJson(sync->curve).c_str());
  // What overlap can give this job on these cores at best: a synchronous step is generate, then
  // the reference log-probs, then train; overlapped (the next batch's reference log-probs beside
  // the trainer's step, generation beside both), a step takes at least its longest part (the
  // cores are shared, so usually more). achieved = (sync step / async step) / ceiling.
  const double longest = std::max({sync->generate_s, sync->train_s, sync->reference_s});
  const double ceiling = longest > 0 ? sync->step_s / longest : 0.0;
  const double achieved_ratio = async->step_s > 0 ? sync->step_s / async->step_s : 0.0;
  std::printf(
      "{\"bench\":\"rl_async_vs_sync\",\"metric\":\"overlap_ceiling\",\"value\":%.3f,"
      "\"unit\":\"x\",\"sync_step_s\":%.4f,\"sync_generate_s\":%.4f,\"sync_train_s\":%.4f,"
      "\"sync_reference_s\":%.4f,\"async_step_s\":%.4f,\"async_train_s\":%.4f,"
      "\"step_ratio\":%.3f,\"share_of_ceiling\":%.3f,\"off_critical_path_nice\":%d}\n",
      ceiling, sync->step_s, sync->generate_s, sync->train_s, sync->reference_s, async->step_s,
      async->train_s, achieved_ratio, ceiling > 0 ? achieved_ratio / ceiling : 0.0,
      f.nice >= 0 ? f.nice : recipes::RunOptions().off_critical_path_nice);
  std::filesystem::remove_all(base);
  return both ? 0 : 1;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) { return troupe::bench::Main(argc, argv); }
