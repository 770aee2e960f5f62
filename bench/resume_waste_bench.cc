// Benchmark (resume): what an asynchronous run killed with kill -9 and resumed with --resume
// wastes, against the same job run without the kill.
//
// Each round runs `<troupe> run <job>` to the end (the baseline), then the same job in another
// directory, SIGKILLed (its whole process group) as soon as it has made --kill_after checkpoints,
// and `run --resume` to the end; it reads both runs' summary.json. Waste is what was generated and
// never trained on: samples dropped as stale (and, at the end, left buffered). One JSON line per
// round and run on stdout, then the medians over the rounds with their spread:
//   {"bench":"resume_waste","metric":"dropped_stale","value":<resumed, median>,"unit":"samples",
//    "baseline":"uninterrupted","baseline_value":<uninterrupted, median>,"ratio":...,
//    "min":..,"max":..,"baseline_min":..,"baseline_max":..,"rounds":N,...}
// (ratio is null when the baseline is 0). Progress goes to stderr.
//
//   bazel build //bench:resume_waste_bench //cli:troupe &&
//     bazel-bin/bench/resume_waste_bench --troupe=bazel-bin/cli/troupe \
//       --job=examples/grpo_arith.yaml --rounds=3 --kill_after=2 --out=/tmp/resume-waste \
//       trainer.total_steps=40 actors.checkpointer.every_steps=10
// Trailing key=value arguments are overrides for every run (`troupe run`'s). The job's SFT start
// (sft.dir) is trained by the first run and reused by the others; give it an sft.dir= override
// outside --out to share one between invocations (e.g. an old and a new binary).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/subprocess.h"
#include "nlohmann/json.hpp"

namespace troupe::bench {
namespace {

namespace fs = std::filesystem;

struct Flags {
  std::string troupe = "bazel-bin/cli/troupe";
  std::string job = "examples/grpo_arith.yaml";
  std::string out = "/tmp/resume-waste";
  int rounds = 3;
  int kill_after = 2;
  int timeout_s = 3600;  // per run
  std::vector<std::string> overrides;
};

void Progress(const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); }

int StepCheckpoints(const std::string& ckpt) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(ckpt, ec)) {
    n += absl::StartsWith(e.path().filename().string(), "step_");
  }
  return n;
}

// Runs `troupe run <job> <extra> <overrides>` with its output in `log`; when kill_after > 0,
// SIGKILLs its process group once `<run_dir>/ckpt` holds that many checkpoints. Returns the exit
// code (-SIGKILL when killed), or nullopt if it could not start or ran out of time.
std::optional<int> Run(const Flags& f, const std::string& run_dir, const std::string& log,
                       const std::vector<std::string>& extra, int kill_after) {
  SubprocessOptions o;
  o.argv = {f.troupe, "run", f.job, "--dashboard-port", "-1", "logging.dir=" + run_dir};
  o.argv.insert(o.argv.end(), extra.begin(), extra.end());
  o.argv.insert(o.argv.end(), f.overrides.begin(), f.overrides.end());
  for (char** e = environ; *e != nullptr; ++e) o.env.push_back(*e);
  o.stdout_path = log;
  o.stderr_path = log;
  absl::StatusOr<pid_t> pid = SpawnSubprocess(o);
  if (!pid.ok()) {
    Progress(pid.status().ToString());
    return std::nullopt;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(f.timeout_s);
  for (;;) {
    int status = 0;
    if (::waitpid(*pid, &status, WNOHANG) == *pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }
    if (kill_after > 0 && StepCheckpoints(run_dir + "/ckpt") >= kill_after) {
      ::kill(-*pid, SIGKILL);
      ::waitpid(*pid, &status, 0);
      return -SIGKILL;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(-*pid, SIGKILL);
      ::waitpid(*pid, &status, 0);
      Progress(absl::StrCat(run_dir, ": out of time"));
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

std::optional<nlohmann::json> Summary(const std::string& run_dir) {
  std::ifstream in(run_dir + "/summary.json");
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

// One run's line; its figures into *dropped and *generated.
void Report(int round, const std::string& run, const nlohmann::json& s,
            std::vector<double>* dropped, std::vector<double>* generated) {
  const nlohmann::json& a = s["accounting"];
  const double d = a.value("dropped_stale", 0.0), g = s.value("samples_generated", 0.0);
  dropped->push_back(d);
  generated->push_back(g);
  std::printf("%s\n", nlohmann::json{{"bench", "resume_waste"},
                                     {"metric", "dropped_stale"},
                                     {"run", run},
                                     {"round", round},
                                     {"value", d},
                                     {"unit", "samples"},
                                     {"generated", g},
                                     {"share_of_generated", g > 0 ? d / g : 0.0},
                                     {"used", a.value("used", 0)},
                                     {"buffered_at_end", a.value("buffered", 0)},
                                     {"prompts_drawn", s.value("prompts_drawn", 0)}}
                          .dump()
                          .c_str());
  std::fflush(stdout);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2);
}

int Main(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> std::optional<std::string> {
      const std::string prefix = absl::StrCat("--", name, "=");
      if (!absl::StartsWith(a, prefix)) return std::nullopt;
      return a.substr(prefix.size());
    };
    if (auto v = value("troupe")) {
      f.troupe = *v;
    } else if (auto v = value("job")) {
      f.job = *v;
    } else if (auto v = value("out")) {
      f.out = *v;
    } else if (auto v = value("rounds"); v && absl::SimpleAtoi(*v, &f.rounds) && f.rounds > 0) {
    } else if (auto v = value("kill_after");
               v && absl::SimpleAtoi(*v, &f.kill_after) && f.kill_after > 0) {
    } else if (auto v = value("timeout_s");
               v && absl::SimpleAtoi(*v, &f.timeout_s) && f.timeout_s > 0) {
    } else if (!absl::StartsWith(a, "--") && absl::StrContains(a, "=")) {
      f.overrides.push_back(a);
    } else {
      std::fprintf(stderr,
                   "resume_waste_bench: unknown or bad argument '%s' (--troupe=PATH --job=YAML "
                   "--out=DIR --rounds=N>0 --kill_after=N>0 --timeout_s=N>0 [key=value...])\n",
                   a.c_str());
      return 2;
    }
  }
  std::error_code ec;
  fs::create_directories(f.out, ec);
  if (ec) {
    std::fprintf(stderr, "resume_waste_bench: cannot create %s: %s\n", f.out.c_str(),
                 ec.message().c_str());
    return 2;
  }
  std::vector<double> full_dropped, full_generated, resumed_dropped, resumed_generated;
  for (int round = 1; round <= f.rounds; ++round) {
    const std::string full = absl::StrCat(f.out, "/full-", round);
    const std::string resumed = absl::StrCat(f.out, "/resumed-", round);
    fs::remove_all(full, ec);
    fs::remove_all(resumed, ec);
    Progress(absl::StrCat("round ", round, ": uninterrupted run"));
    std::optional<int> rc = Run(f, full, full + ".log", {}, 0);
    std::optional<nlohmann::json> s = Summary(full);
    if (rc != 0 || !s.has_value()) {
      Progress(absl::StrCat("the uninterrupted run failed: see ", full, ".log"));
      return 1;
    }
    Report(round, "uninterrupted", *s, &full_dropped, &full_generated);
    Progress(absl::StrCat("round ", round, ": killed after ", f.kill_after, " checkpoints"));
    rc = Run(f, resumed, resumed + ".a.log", {}, f.kill_after);
    if (rc != -SIGKILL) {
      Progress(
          absl::StrCat("the run to kill ended before its checkpoints: see ", resumed, ".a.log"));
      return 1;
    }
    Progress(absl::StrCat("round ", round, ": resumed"));
    rc = Run(f, resumed, resumed + ".b.log", {"--resume"}, 0);
    s = Summary(resumed);
    if (rc != 0 || !s.has_value()) {
      Progress(absl::StrCat("the resumed run failed: see ", resumed, ".b.log"));
      return 1;
    }
    Report(round, "resumed", *s, &resumed_dropped, &resumed_generated);
  }
  const double value = Median(resumed_dropped), baseline = Median(full_dropped);
  auto [lo, hi] = std::minmax_element(resumed_dropped.begin(), resumed_dropped.end());
  auto [blo, bhi] = std::minmax_element(full_dropped.begin(), full_dropped.end());
  nlohmann::json summary = {{"bench", "resume_waste"},
                            {"metric", "dropped_stale"},
                            {"value", value},
                            {"unit", "samples"},
                            {"baseline", "uninterrupted"},
                            {"baseline_value", baseline},
                            {"ratio", baseline > 0 ? nlohmann::json(value / baseline) : nullptr},
                            {"min", *lo},
                            {"max", *hi},
                            {"baseline_min", *blo},
                            {"baseline_max", *bhi},
                            {"generated", Median(resumed_generated)},
                            {"baseline_generated", Median(full_generated)},
                            {"rounds", f.rounds},
                            {"statistic", "median"}};
  std::printf("%s\n", summary.dump().c_str());
  return 0;
}

}  // namespace
}  // namespace troupe::bench

int main(int argc, char** argv) { return troupe::bench::Main(argc, argv); }
