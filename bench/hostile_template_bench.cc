// Hostile chat templates against a dataset check: how long a dataset job's record check
// (CheckDatasetRecords, recipes/rl/job_data.h, what the driver runs before any actor starts)
// takes to refuse 8,100 chat records whose template is costly on every record, with the default
// render budget (models/chat/jinja.h's RenderOptions) and the stop at the first 5 bad records.
// The templates: a string doubled 40 times, loops of 10^6 x 10^6 iterations, a macro calling
// itself twice 40 levels deep, and one that copies a 4 MB string in a loop (under every size and
// count bound: only the clock stops it). Also the time of one render of each, alone.
//
// Usage: hostile_template_bench [--records N] [--reps R]
// Prints one JSON object per line: {"bench": "hostile_template", "metric": "seconds_to_refusal",
// "template": ..., "value": median, "unit": "s", "min", "max", "records", "reported", "bound"},
// then {"metric": "seconds_per_render", ...} for each template.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "models/chat/chat_template.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/rl/chat_prompts.h"
#include "recipes/rl/job_data.h"

namespace troupe {
namespace {

using Clock = std::chrono::steady_clock;

struct Hostile {
  const char* name;
  const char* text;
};

constexpr Hostile kTemplates[] = {
    {"doubling_40",
     "{% set ns = namespace(s='ab') %}{% for i in range(40) %}"
     "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"},
    {"loops_1e6_x_1e6",
     "{% for i in range(1000000) %}{% for j in range(1000000) %}"
     "{% endfor %}{% endfor %}"},
    {"recursion_2_pow_40",
     "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}"
     "{% endif %}{% endmacro %}{{ f(40) }}"},
    {"copies_4mb",
     "{% set s = 'x' * 4000000 %}{% for i in range(100000) %}"
     "{% set t = s ~ i %}{% endfor %}"},
};

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Which RenderOptions bound a refusal names ("max_output_bytes", ...), "" if none.
std::string BoundOf(const std::string& message) {
  for (const char* bound : {"max_output_bytes", "max_loop_iterations", "max_steps",
                            "max_render_time", "max_render_depth", "max_call_depth"}) {
    if (absl::StrContains(message, bound)) return bound;
  }
  return "";
}

void Print(const std::string& metric, const std::string& name, std::vector<double> values,
           const std::string& extra) {
  std::sort(values.begin(), values.end());
  std::printf(
      "{\"bench\": \"hostile_template\", \"metric\": \"%s\", \"template\": \"%s\", \"value\": "
      "%.3f, \"unit\": \"s\", \"min\": %.3f, \"max\": %.3f, \"reps\": %zu%s}\n",
      metric.c_str(), name.c_str(), values[values.size() / 2], values.front(), values.back(),
      values.size(), extra.c_str());
  std::fflush(stdout);
}

int Run(int records, int reps) {
  const char* tmp = std::getenv("TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
                                    absl::StrCat("hostile_template_bench_", getpid());
  std::filesystem::create_directories(dir);
  const std::string data = (dir / "train.jsonl").string();
  {
    std::ofstream out(data);
    for (int i = 0; i < records; ++i) {
      out << R"({"prompt": [{"role": "user", "content": "What is )" << i
          << R"( + 1?"}], "reward_model": {"ground_truth": ")" << i + 1
          << R"("}, "data_source": "arith"})"
          << "\n";
    }
  }
  for (const Hostile& h : kTemplates) {
    const std::string file = (dir / absl::StrCat(h.name, ".jinja")).string();
    std::ofstream(file) << h.text;
    recipes::JobSpec spec;
    spec.model.init = recipes::ModelInit::kRandom;
    spec.data.train_files = {data};
    spec.data.chat_template = file;
    absl::StatusOr<recipes::JobChatTemplate> chat = recipes::LoadJobChatTemplate(spec);
    if (!chat.ok() || !chat->renderer) {
      std::fprintf(stderr, "%s: %s\n", h.name, chat.status().ToString().c_str());
      return 1;
    }
    std::vector<double> refusal, render;
    std::string bound;
    int reported = 0;
    for (int rep = 0; rep < reps; ++rep) {
      const Clock::time_point start = Clock::now();
      absl::StatusOr<std::set<std::string>> checked =
          recipes::CheckDatasetRecords(spec, chat->renderer, /*tokenizer=*/nullptr);
      refusal.push_back(Seconds(start));
      if (checked.ok()) {
        std::fprintf(stderr, "%s: the dataset was accepted\n", h.name);
        return 1;
      }
      const std::string message(checked.status().message());
      reported = 0;
      for (absl::string_view line : absl::StrSplit(message, '\n')) {
        reported += absl::StartsWith(line, data + ":");
      }
      bound = BoundOf(message);
      const Clock::time_point one = Clock::now();
      absl::StatusOr<std::string> text = chat->renderer(
          nlohmann::json::parse(R"([{"role": "user", "content": "What is 1 + 1?"}])"));
      render.push_back(Seconds(one));
      if (text.ok()) {
        std::fprintf(stderr, "%s: rendered\n", h.name);
        return 1;
      }
    }
    Print("seconds_to_refusal", h.name, refusal,
          absl::StrCat(", \"records\": ", records, ", \"reported\": ", reported, ", \"bound\": \"",
                       bound, "\""));
    Print("seconds_per_render", h.name, render, absl::StrCat(", \"bound\": \"", bound, "\""));
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace troupe

int main(int argc, char** argv) {
  int records = 8100, reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--records") == 0) {
      records = std::atoi(argv[i + 1]);
    } else if (std::strcmp(argv[i], "--reps") == 0) {
      reps = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: %s [--records N] [--reps R]\n", argv[0]);
      return 2;
    }
  }
  if (records <= 0 || reps <= 0) {
    std::fprintf(stderr, "--records and --reps must be positive\n");
    return 2;
  }
  return troupe::Run(records, reps);
}
