// Benchmark: one GRPO update of the Trainer actor (actors/trainer.h), called as a plain object —
// batch building, advantages, forward/backward of the tiny model, the clipped policy loss, AdamW —
// on synthetic sample groups shaped like the arithmetic task's (a 7-token prompt, 1 to 4
// response tokens, rewards 0/1, random behaviour and reference log-probs). No weight group, so
// nothing is published. The trainer config keys that matter for cost are flags.
//
//   bazel build //bench:trainer_step_bench &&
//     bazel-bin/bench/trainer_step_bench [--steps 12] [--warmup 2] [--batch 32] [--n 8]
//       [--threads 1] [--kl_coef 0.001] [--entropy_coeff 0] [--off_policy none]
//       [--micro_batch_size 0]
//
// Output (stdout, one JSON object): {"bench":"trainer_step_bench","metric":"trainer_step_seconds",
// "value":<median wall time over the timed steps>,"unit":"s","min":..,"cpu_median":..,
// "steps_measured":..,<the flags>}. cpu_median is the calling thread's CPU time per step: with
// --threads 1 every LibTorch op runs on that thread, so it leaves out the time spent waiting for
// a core on a loaded machine and is the steadier figure to compare builds with. Progress on
// stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "actors/tiny_policy.h"
#include "actors/trainer.h"
#include "models/compute_threads.h"
#include "nlohmann/json.hpp"
#include "proto/rl.pb.h"
#include "runtime/actor.h"

namespace troupe::bench {
namespace {

using Clock = std::chrono::steady_clock;

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "trainer_step_bench: %s\n", what.c_str());
  std::exit(1);
}

// `batch` groups of `n` samples; token ids 3..14 are the alphabet's characters.
proto::TrainStepRequest MakeRequest(int batch, int n, int step, std::mt19937& rng) {
  std::uniform_int_distribution<int> token(3, 14), length(1, 4), coin(0, 1);
  std::uniform_real_distribution<float> logp(-3.0f, -0.01f);
  proto::TrainStepRequest req;
  req.set_step(step);
  for (int p = 0; p < batch; ++p) {
    proto::SampleGroup* g = req.add_groups();
    g->set_prompt_id(p);
    for (int i = 0; i < n; ++i) {
      proto::Sample* s = g->add_samples();
      s->set_prompt_id(p);
      s->set_sample_index(i);
      s->add_prompt_tokens(1);  // <bos>
      for (int t = 0; t < 6; ++t) s->add_prompt_tokens(token(rng));
      const int len = length(rng);
      proto::FloatList* ref = req.add_ref_logprobs();
      for (int t = 0; t < len; ++t) {
        s->add_response_tokens(t + 1 == len ? 2 : token(rng));  // ends with <eos>
        s->add_behaviour_logprobs(logp(rng));
        ref->add_values(logp(rng));
      }
      s->set_reward(static_cast<float>(coin(rng)));
    }
  }
  return req;
}

int Main(int argc, char** argv) {
  int steps = 12, warmup = 2, batch = 32, n = 8, threads = 1, micro_batch_size = 0;
  double kl_coef = 0.001, entropy_coeff = 0;
  std::string off_policy = "none";
  CLI::App app{"Trainer actor: seconds per GRPO update on the tiny model"};
  app.add_option("--steps", steps, "Timed steps")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "Untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--batch", batch, "Prompts (groups) per step")->check(CLI::PositiveNumber);
  app.add_option("--n", n, "Samples per prompt")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "LibTorch threads")->check(CLI::PositiveNumber);
  app.add_option("--kl_coef", kl_coef, "Trainer kl_coef");
  app.add_option("--entropy_coeff", entropy_coeff, "Trainer entropy_coeff");
  app.add_option("--off_policy", off_policy, "Trainer off_policy (none|truncate|mask)");
  app.add_option("--micro_batch_size", micro_batch_size, "Trainer micro_batch_size");
  CLI11_PARSE(app, argc, argv);

  const std::string dir =
      std::filesystem::temp_directory_path().string() + "/troupe-trainer-step-bench";
  std::filesystem::remove_all(dir);
  if (absl::Status s = actors::WriteRandomPolicy(dir, actors::TinyModelConfig(), /*seed=*/1);
      !s.ok()) {
    Die(s.ToString());
  }
  nlohmann::json config = {{"model_dir", dir},
                           {"lr", 1e-4},
                           {"seed", 1},
                           {"weight_decay", 0.0},
                           {"kl_coef", kl_coef},
                           {"entropy_coeff", entropy_coeff},
                           {"off_policy", "OFF_POLICY_" + absl::AsciiStrToUpper(off_policy)},
                           {"micro_batch_size", micro_batch_size}};
  models::SetComputeThreads(threads);
  absl::StatusOr<std::unique_ptr<actors::Trainer>> created = actors::Trainer::Create(
      ActorContext(nullptr, "Trainer", "Trainer", "Trainer", config, 0, nullptr));
  if (!created.ok()) Die(created.status().ToString());
  actors::Trainer& trainer = **created;
  std::mt19937 rng(7);
  std::vector<double> times, cpu_times;
  for (int step = 0; step < warmup + steps; ++step) {
    const proto::TrainStepRequest req = MakeRequest(batch, n, step, rng);
    const auto start = Clock::now();
    const double cpu_start = ThreadCpuSeconds();
    absl::StatusOr<proto::TrainStepReply> reply = trainer.Step(req);
    const double cpu = ThreadCpuSeconds() - cpu_start;
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (!reply.ok()) Die(reply.status().ToString());
    std::fprintf(stderr, "step %d/%d  %.4fs (cpu %.4fs)  loss %.5f\n", step + 1, warmup + steps,
                 seconds, cpu, reply->metrics().at("actor/loss"));
    if (step >= warmup) {
      times.push_back(seconds);
      cpu_times.push_back(cpu);
    }
  }
  std::filesystem::remove_all(dir);
  std::printf("%s\n", nlohmann::json({{"bench", "trainer_step_bench"},
                                      {"metric", "trainer_step_seconds"},
                                      {"value", Median(times)},
                                      {"unit", "s"},
                                      {"min", *std::min_element(times.begin(), times.end())},
                                      {"cpu_median", Median(cpu_times)},
                                      {"steps_measured", times.size()},
                                      {"batch", batch},
                                      {"n", n},
                                      {"threads", threads},
                                      {"kl_coef", kl_coef},
                                      {"entropy_coeff", entropy_coeff},
                                      {"off_policy", off_policy},
                                      {"micro_batch_size", micro_batch_size}})
                          .dump()
                          .c_str());
  return 0;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) { return troupe::bench::Main(argc, argv); }
