// Benchmark: a judge serving requests that keep arriving from several callers (rollout workers),
// with continuous batching (actors/judge.h: JudgeCore on GenerationEngine::Serve, requests joining
// the running batch at every decode step) against the baseline of a reward actor that serves one
// request at a time (its mailbox): GenerationEngine::Generate over each request's samples, in
// arrival order. Same judge model (random weights of examples/models/tiny.json's sizes over the
// arithmetic judge's alphabet), same slots, same greedy replies, same arrival schedule: caller w
// sends its request r at (r · callers + w) · gap, without waiting for earlier replies.
//
//   bazel run -c opt //bench:judge_batching_bench -- [--callers 4] [--requests 6]
//       [--samples 16] [--gap_ms 5] [--max_new_tokens 4] [--slots 64] [--repeats 3]
//
// Output: JSON lines on stdout (medians over repeats, with min and max); progress on stderr. One
// untimed run of each server first (warm-up).
// "makespan" is the time from the first request to the last reply; "latency" a request's time from
// sending to its reply. Repeats alternate the order of the two servers.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "actors/judge.h"
#include "actors/policy_util.h"
#include "actors/tiny_policy.h"
#include "models/compute_threads.h"
#include "proto/actor_config.pb.h"
#include "rollout/generation_engine.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace actors = troupe::actors;
namespace proto = troupe::proto;
namespace rollout = troupe::rollout;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "judge_batching_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T OrDie(absl::StatusOr<T> value) {
  if (!value.ok()) Die(std::string(value.status().message()));
  return *std::move(value);
}

struct Options {
  int callers = 4;
  int requests = 6;
  int samples = 16;
  double gap_ms = 5;
  int max_new_tokens = 4;
  int slots = 64;
  int repeats = 3;
};

struct Outcome {
  double makespan = 0;
  double mean_latency = 0;
};

// Request i's samples: "a+b=c|" texts of random-looking sums (deterministic in i).
std::vector<std::pair<std::string, std::string>> RequestTexts(int i, int samples) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int s = 0; s < samples; ++s) {
    const int a = 10 + (i * 37 + s * 11) % 90, b = 10 + (i * 53 + s * 29) % 90;
    const int answer = a + b + (s % 3 == 0 ? 0 : (s % 2 == 0 ? 1 : -10));
    out.emplace_back(absl::StrCat(a, "+", b, "="), absl::StrCat(answer));
  }
  return out;
}

// When request i (caller i % callers, its (i / callers)-th) is sent, from the start.
Clock::duration SendTime(int i, const Options& o) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(o.gap_ms * i));
}

Outcome Summarize(Clock::time_point start, const std::vector<Clock::time_point>& sent,
                  const std::vector<Clock::time_point>& done) {
  Outcome out;
  for (size_t i = 0; i < done.size(); ++i) {
    out.makespan = std::max(out.makespan, std::chrono::duration<double>(done[i] - start).count());
    out.mean_latency += std::chrono::duration<double>(done[i] - sent[i]).count() / done.size();
  }
  return out;
}

// Continuous batching: a JudgeCore serving on its thread, the callers on theirs.
Outcome RunContinuous(const std::string& dir, const Options& o, double* mean_batch) {
  proto::JudgeConfig config;
  config.set_model_dir(dir);
  config.set_template_("{prompt}{response}|");
  (*config.mutable_verdicts())["Y"] = 1.0;
  (*config.mutable_verdicts())["N"] = 0.0;
  config.set_max_new_tokens(o.max_new_tokens);
  config.set_slots(o.slots);
  std::unique_ptr<actors::JudgeCore> core = OrDie(actors::JudgeCore::Create(config));
  std::atomic<bool> stop{false};
  std::thread server([&] { (void)core->Serve([&] { return stop.load(); }); });
  const int total = o.callers * o.requests;
  std::vector<Clock::time_point> sent(total), done(total);
  std::atomic<int> finished{0};
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> callers;
  for (int w = 0; w < o.callers; ++w) {
    callers.emplace_back([&, w] {
      for (int r = 0; r < o.requests; ++r) {
        const int i = r * o.callers + w;
        std::this_thread::sleep_until(start + SendTime(i, o));
        proto::ScoreRequest req;
        proto::SampleGroup* g = req.add_groups();
        for (const auto& [prompt, response] : RequestTexts(i, o.samples)) {
          proto::Sample* s = g->add_samples();
          s->set_prompt_text(prompt);
          s->set_response_text(response);
        }
        sent[i] = Clock::now();
        core->Score(req).OnComplete([&, i](absl::StatusOr<proto::ScoreReply> reply) {
          if (!reply.ok()) Die(std::string(reply.status().message()));
          done[i] = Clock::now();
          finished.fetch_add(1);
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  while (finished.load() < total) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  stop = true;
  server.join();
  const actors::JudgeStats st = core->stats();
  *mean_batch = st.decode_steps > 0 ? 1.0 * st.tokens / st.decode_steps : 0;
  return Summarize(start, sent, done);
}

// The baseline: one request at a time, in arrival order (a mailbox), each its own Generate call.
Outcome RunOneAtATime(const std::string& dir, const Options& o, double* mean_batch) {
  actors::PolicyModel judge = OrDie(actors::LoadPolicy(dir));
  judge.model->eval();
  rollout::GenerationEngineOptions eo;
  eo.num_slots = o.slots;
  eo.max_seq_len = judge.model->config().max_position_embeddings;
  std::unique_ptr<rollout::GenerationEngine> engine =
      OrDie(rollout::GenerationEngine::Create(judge.model.ptr(), eo));
  rollout::SamplingParams params;
  params.temperature = 0;
  params.max_new_tokens = o.max_new_tokens;
  params.stop_token_ids = judge.stop_token_ids;
  const int total = o.callers * o.requests;
  std::vector<Clock::time_point> sent(total), done(total);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < total; ++i) {
    std::this_thread::sleep_until(start + SendTime(i, o));  // no-op once behind
    sent[i] = start + SendTime(i, o);  // when it arrived, however long it then waits
    std::vector<std::vector<int32_t>> prompts;
    for (const auto& [prompt, response] : RequestTexts(i, o.samples)) {
      std::vector<int32_t> ids = {*judge.tokenizer->bos_id()};
      std::vector<int32_t> text = OrDie(judge.tokenizer->Encode(prompt + response + "|"));
      ids.insert(ids.end(), text.begin(), text.end());
      prompts.push_back(std::move(ids));
    }
    OrDie(engine->Generate(prompts, params));
    done[i] = Clock::now();
  }
  const rollout::GenerationStats& st = engine->stats();
  *mean_batch = st.steps > 0 ? 1.0 * st.generated_tokens / st.steps : 0;
  return Summarize(start, sent, done);
}

struct Spread {
  double median, min, max;
};
Spread SpreadOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// ratio: baseline / value for times (the speed-up), value / baseline for the batch size.
void Print(const std::string& metric, const Spread& value, const std::string& unit,
           const Spread& baseline, bool higher_is_better, const Options& o) {
  std::printf(
      "{\"bench\": \"judge_batching\", \"metric\": \"%s\", \"value\": %.4f, \"unit\": \"%s\", "
      "\"min\": %.4f, \"max\": %.4f, \"baseline\": \"one request at a time (Generate per "
      "request)\", \"baseline_value\": %.4f, \"ratio\": %.3f, \"callers\": %d, \"requests\": %d, "
      "\"samples\": %d, \"gap_ms\": %g, \"slots\": %d, \"repeats\": %d}\n",
      metric.c_str(), value.median, unit.c_str(), value.min, value.max, baseline.median,
      higher_is_better ? value.median / baseline.median : baseline.median / value.median, o.callers,
      o.requests, o.samples, o.gap_ms, o.slots, o.repeats);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Judge serving: continuous batching against one request at a time"};
  app.add_option("--callers", o.callers, "callers (rollout workers) sending requests");
  app.add_option("--requests", o.requests, "requests per caller");
  app.add_option("--samples", o.samples, "samples per request");
  app.add_option("--gap_ms", o.gap_ms, "time between consecutive requests (all callers)");
  app.add_option("--max_new_tokens", o.max_new_tokens, "most tokens of a reply");
  app.add_option("--slots", o.slots, "KV-cache slots of either server");
  app.add_option("--repeats", o.repeats, "runs of each server (median reported)");
  CLI11_PARSE(app, argc, argv);
  if (o.callers < 1 || o.requests < 1 || o.samples < 1 || o.repeats < 1 || o.slots < 1) {
    Die("--callers, --requests, --samples, --slots and --repeats must be >= 1");
  }
  troupe::models::SetComputeThreads(1);
  const std::string dir =
      (std::filesystem::temp_directory_path() / "judge_batching_bench_model").string();
  std::filesystem::remove_all(dir);
  if (absl::Status s =
          actors::WriteRandomPolicy(dir, actors::TinyModelConfig(), /*seed=*/1, "0123456789+=|YN");
      !s.ok()) {
    Die(std::string(s.message()));
  }
  std::vector<double> cont_span, cont_lat, base_span, base_lat, cont_batch, base_batch;
  {  // Warm-up, not counted: LibTorch's first forwards allocate and pick kernels.
    double unused = 0;
    RunContinuous(dir, o, &unused);
    RunOneAtATime(dir, o, &unused);
  }
  const auto t0 = Clock::now();
  for (int rep = 0; rep < o.repeats; ++rep) {
    for (int arm = 0; arm < 2; ++arm) {
      const bool continuous = (arm == 0) == (rep % 2 == 0);
      double batch = 0;
      const Outcome out =
          continuous ? RunContinuous(dir, o, &batch) : RunOneAtATime(dir, o, &batch);
      (continuous ? cont_span : base_span).push_back(out.makespan);
      (continuous ? cont_lat : base_lat).push_back(out.mean_latency);
      (continuous ? cont_batch : base_batch).push_back(batch);
      const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
      const int runs = rep * 2 + arm + 1, all = o.repeats * 2;
      std::fprintf(stderr,
                   "judge_batching_bench: run %d/%d (%s): makespan %.3fs, mean latency %.3fs, "
                   "mean batch %.1f; ETA %.0fs\n",
                   runs, all, continuous ? "continuous" : "one at a time", out.makespan,
                   out.mean_latency, batch, elapsed / runs * (all - runs));
    }
  }
  Print("makespan", SpreadOf(cont_span), "s", SpreadOf(base_span), false, o);
  Print("mean_latency", SpreadOf(cont_lat), "s", SpreadOf(base_lat), false, o);
  Print("mean_batch", SpreadOf(cont_batch), "samples", SpreadOf(base_batch), true, o);
  std::filesystem::remove_all(dir);
  return 0;
}
