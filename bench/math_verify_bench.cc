// Math answer verification: the math reward's verifier (reward/math/math_equivalence.h, exact
// comparison on GiNaC) against the text-normalising comparison it replaced
// (bench/math_text_baseline.h), in the same run, on the hand-labelled set
// reward/math/testdata/math_equivalence.tsv (default options of both: rel_tol 1e-6).
//
// Accuracy (deterministic): the share of verdicts that match the labels, with wrong answers
// accepted and right answers rejected counted apart, overall and per category. Speed, --runs
// times (default 5): verdicts/s over --passes passes of the set (default 20), the p50 / p99 / max
// latency of one verdict, and the new verifier's verdicts/s from 2 threads (its GiNaC part is
// serialised by a process-wide lock); then the median of the runs with min and max.
//
// Usage: math_verify_bench [--data PATH] [--runs N] [--passes N]
// Run from the workspace root (bazel-bin/bench/math_verify_bench) or with bazel run.
// Prints one JSON object per line: {"bench","metric","value","unit",...}, "baseline_value" and
// "ratio" for the text-normalising verifier measured in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/math_text_baseline.h"
#include "nlohmann/json.hpp"
#include "reward/math/labelled_answers.h"
#include "reward/math/math_equivalence.h"

namespace troupe::bench {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;
using reward::LabelledAnswer;

constexpr char kBench[] = "math_verify";
constexpr char kBaseline[] = "text_normalising";

bool NewVerdict(const LabelledAnswer& c) {
  return reward::CheckMathEquivalence(c.given, c.reference).equivalent();
}
bool OldVerdict(const LabelledAnswer& c) { return MathAnswersEqualText(c.given, c.reference); }

struct Accuracy {
  int right = 0;
  int wrong_accepted = 0;                                  // label 0, verdict 1
  int right_rejected = 0;                                  // label 1, verdict 0
  std::map<std::string, std::pair<int, int>> by_category;  // right, total
};

template <typename Verdict>
Accuracy Score(const std::vector<LabelledAnswer>& cases, Verdict verdict) {
  Accuracy a;
  for (const LabelledAnswer& c : cases) {
    const bool v = verdict(c);
    auto& [right, total] = a.by_category[c.category];
    ++total;
    if (v == c.equivalent) {
      ++a.right;
      ++right;
    } else if (v) {
      ++a.wrong_accepted;
    } else {
      ++a.right_rejected;
    }
  }
  return a;
}

struct Speed {
  double verdicts_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  double max_us = 0;
};

double Percentile(std::vector<double>& v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

template <typename Verdict>
Speed Time(const std::vector<LabelledAnswer>& cases, int passes, Verdict verdict) {
  std::vector<double> latencies;
  latencies.reserve(cases.size() * passes);
  int sink = 0;
  const Clock::time_point start = Clock::now();
  for (int p = 0; p < passes; ++p) {
    for (const LabelledAnswer& c : cases) {
      const Clock::time_point t = Clock::now();
      sink += verdict(c) ? 1 : 0;
      latencies.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t).count());
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (sink < 0) std::abort();  // keeps the verdicts observable
  Speed s;
  s.verdicts_per_s = latencies.size() / seconds;
  s.p50_us = Percentile(latencies, 0.50);
  s.p99_us = Percentile(latencies, 0.99);
  s.max_us = latencies.back();
  return s;
}

// Verdicts/s of the new verifier with `threads` threads each running `passes` passes.
double ThreadedRate(const std::vector<LabelledAnswer>& cases, int passes, int threads) {
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      int sink = 0;
      for (int p = 0; p < passes; ++p) {
        for (const LabelledAnswer& c : cases) sink += NewVerdict(c) ? 1 : 0;
      }
      if (sink < 0) std::abort();
    });
  }
  for (std::thread& w : workers) w.join();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return static_cast<double>(cases.size()) * passes * threads / seconds;
}

void Print(Json j) { std::printf("%s\n", j.dump().c_str()); }

Json Line(const std::string& metric, double value, const std::string& unit) {
  return Json{{"bench", kBench}, {"metric", metric}, {"value", value}, {"unit", unit}};
}

Json Compared(const std::string& metric, double value, double baseline_value,
              const std::string& unit) {
  Json j = Line(metric, value, unit);
  j["baseline"] = kBaseline;
  j["baseline_value"] = baseline_value;
  j["ratio"] = baseline_value != 0 ? value / baseline_value : 0.0;
  return j;
}

struct Spread {
  double median, min, max;
};
Spread SpreadOf(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

int Main(int argc, char** argv) {
  std::string data = "reward/math/testdata/math_equivalence.tsv";
  int runs = 5;
  int passes = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--data") {
      data = argv[i + 1];
    } else if (flag == "--runs") {
      runs = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--passes") {
      passes = std::max(1, std::atoi(argv[i + 1]));
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "usage: math_verify_bench [--data PATH] [--runs N] [--passes N]\n");
    return 2;
  }
  absl::StatusOr<std::vector<LabelledAnswer>> loaded = reward::LoadLabelledAnswers(data);
  if (!loaded.ok()) {
    std::fprintf(stderr, "math_verify_bench: %s\n", std::string(loaded.status().message()).c_str());
    return 1;
  }
  const std::vector<LabelledAnswer>& cases = *loaded;
  const double n = static_cast<double>(cases.size());

  const Accuracy now = Score(cases, NewVerdict);
  const Accuracy old = Score(cases, OldVerdict);
  Json acc = Compared("accuracy", now.right / n, old.right / n, "fraction");
  acc["cases"] = cases.size();
  Print(acc);
  Print(Compared("wrong_accepted", now.wrong_accepted, old.wrong_accepted, "cases"));
  Print(Compared("right_rejected", now.right_rejected, old.right_rejected, "cases"));
  for (const auto& [category, counts] : now.by_category) {
    const auto& [old_right, total] = old.by_category.at(category);
    Json j = Compared("accuracy_" + category, static_cast<double>(counts.first) / counts.second,
                      static_cast<double>(old_right) / total, "fraction");
    j["cases"] = total;
    Print(j);
  }

  std::vector<double> rate, base_rate, p50, base_p50, p99, base_p99, max, rate2;
  for (int r = 0; r < runs; ++r) {
    const Speed s = Time(cases, passes, NewVerdict);
    const Speed b = Time(cases, passes, OldVerdict);
    const double two = ThreadedRate(cases, std::max(1, passes / 2), 2);
    Json j = Compared("throughput", s.verdicts_per_s, b.verdicts_per_s, "verdicts/s");
    j["run"] = r;
    Print(j);
    j = Compared("latency_p50", s.p50_us, b.p50_us, "us");
    j["run"] = r;
    Print(j);
    j = Compared("latency_p99", s.p99_us, b.p99_us, "us");
    j["run"] = r;
    Print(j);
    rate.push_back(s.verdicts_per_s);
    base_rate.push_back(b.verdicts_per_s);
    p50.push_back(s.p50_us);
    base_p50.push_back(b.p50_us);
    p99.push_back(s.p99_us);
    base_p99.push_back(b.p99_us);
    max.push_back(s.max_us);
    rate2.push_back(two);
  }
  auto summary = [&](const std::string& metric, const std::vector<double>& v,
                     const std::vector<double>& base, const std::string& unit) {
    const Spread s = SpreadOf(v);
    Json j = base.empty() ? Line(metric, s.median, unit)
                          : Compared(metric, s.median, SpreadOf(base).median, unit);
    j["median_of"] = v.size();
    j["min"] = s.min;
    j["max"] = s.max;
    Print(j);
  };
  summary("throughput", rate, base_rate, "verdicts/s");
  summary("latency_p50", p50, base_p50, "us");
  summary("latency_p99", p99, base_p99, "us");
  summary("latency_max", max, {}, "us");
  summary("throughput_2_threads", rate2, {}, "verdicts/s");
  return 0;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) { return troupe::bench::Main(argc, argv); }
