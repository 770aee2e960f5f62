// Chat-template render rate: ChatTemplate (models/chat) on the Qwen2.5 template with its tools
// branch and a fixed 12-message conversation (system, tool definitions, tool calls and results,
// unicode), against Python's Jinja2 rendering the same case through
// models/chat/testdata/render_chat.py (transformers' environment; timed inside Python, start-up,
// file reading and template compilation excluded). Both sides render once before timing, and the
// two outputs are checked to be identical.
//
// Usage: chat_template_bench [--renders N] [--reps R] [--template PATH] [--python PATH]
// Run from the workspace root (bazel-bin/bench/chat_template_bench) or with bazel run.
// Prints one JSON object per line: per repetition, then the median with min/max. "value" and
// "baseline_value" are wall-clock rates; "cpu_value" / "baseline_cpu_value" divide by the
// process CPU time instead (steadier on a loaded machine).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/chat/chat_template.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

Json Conversation() {
  return Json::parse(R"([
    {"role": "system", "content": "You are a careful assistant. Use the tools when they help."},
    {"role": "user", "content": "What's the weather in Zürich and in 東京 tomorrow?"},
    {"role": "assistant", "content": "", "tool_calls": [
      {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}},
      {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "東京", "days": 2}}}]},
    {"role": "tool", "content": "{\"temp_c\": 3.5, \"sky\": \"fog\"}"},
    {"role": "tool", "content": "{\"temp_c\": 11, \"sky\": \"clear\"}"},
    {"role": "assistant", "content": "Zürich: 3.5 °C and fog. Tokyo: 11 °C, clear."},
    {"role": "user", "content": "Convert 3.5 °C to Fahrenheit, please.\nShow the \"formula\"."},
    {"role": "assistant", "content": "Let me compute it.", "tool_calls": [
      {"type": "function", "function": {"name": "calc", "arguments": {"expr": "3.5 * 9 / 5 + 32"}}}]},
    {"role": "tool", "content": "38.3"},
    {"role": "assistant", "content": "F = C × 9/5 + 32 = 38.3 °F."},
    {"role": "user", "content": "Thanks! And what's 2**10?"},
    {"role": "assistant", "content": "1024."}
  ])");
}

Json Tools() {
  return Json::parse(R"([
    {"type": "function", "function": {"name": "get_weather",
      "description": "Weather forecast for a city.",
      "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "description": "City name"},
        "days": {"type": "integer", "description": "Days ahead", "minimum": 0, "maximum": 7}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "calc", "description": "Evaluate an arithmetic expression.",
      "parameters": {"type": "object", "properties": {"expr": {"type": "string"}},
        "required": ["expr"]}}}
  ])");
}

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Rates {
  double wall = -1;
  double cpu = -1;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Runs render_chat.py --bench; returns renders/s (negative on failure).
Rates PythonRate(const std::string& python, const std::string& case_path, int renders) {
  const std::string cmd = absl::StrCat(python, " models/chat/testdata/render_chat.py --bench ",
                                       renders, " ", case_path);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  if (pclose(pipe) != 0) return {};
  Json j = Json::parse(out, nullptr, false);
  if (!j.is_object() || !j.contains("renders_per_s")) return {};
  return {j["renders_per_s"].get<double>(), j["cpu_renders_per_s"].get<double>()};
}

std::string PythonRender(const std::string& python, const std::string& case_path,
                         const std::string& batch_path) {
  const std::string cmd = absl::StrCat(python, " models/chat/testdata/render_chat.py ", batch_path);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  Json j = Json::parse(out, nullptr, false);
  if (!j.is_array() || j.empty() || !j[0].value("ok", false)) return "";
  return j[0]["text"].get<std::string>();
}

int Main(int argc, char** argv) {
  int renders = 20000;
  int reps = 5;
  std::string template_path = "models/chat/testdata/qwen2_5.jinja";
  std::string python = "/usr/bin/python3";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--renders") == 0) renders = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--template") == 0) template_path = argv[i + 1];
    if (std::strcmp(argv[i], "--python") == 0) python = argv[i + 1];
  }
  absl::StatusOr<ChatTemplate> chat = ChatTemplate::FromTemplateFile(template_path);
  if (!chat.ok()) {
    std::fprintf(stderr, "%s\n", std::string(chat.status().message()).c_str());
    return 1;
  }
  const Json messages = Conversation();
  const Json tools = Tools();
  const Json extra = {{"eos_token", "<|im_end|>"}};
  absl::StatusOr<std::string> first = chat->Render(messages, true, tools, extra);
  if (!first.ok()) {
    std::fprintf(stderr, "%s\n", std::string(first.status().message()).c_str());
    return 1;
  }

  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::string case_path = absl::StrCat(dir, "/chat_template_bench_case.json");
  const std::string batch_path = absl::StrCat(dir, "/chat_template_bench_batch.json");
  const Json py_case = {{"template", template_path},
                        {"messages", messages},
                        {"tools", tools},
                        {"add_generation_prompt", true},
                        {"extra", extra}};
  std::ofstream(case_path) << py_case.dump();
  std::ofstream(batch_path) << Json::array({py_case}).dump();
  const std::string reference = PythonRender(python, case_path, batch_path);
  if (reference.empty()) {
    std::fprintf(stderr, "python Jinja2 baseline unavailable (%s): run tools/install_deps.sh\n",
                 python.c_str());
    return 1;
  }
  if (reference != *first) {
    std::fprintf(stderr, "outputs differ from Python Jinja2's\n");
    return 1;
  }

  std::vector<double> ours, theirs, ours_cpu, theirs_cpu;
  size_t sink = 0;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    const double cpu_start = CpuSeconds();
    for (int i = 0; i < renders; ++i) {
      absl::StatusOr<std::string> out = chat->Render(messages, true, tools, extra);
      sink += out->size();
    }
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    ours.push_back(renders / secs);
    ours_cpu.push_back(renders / (CpuSeconds() - cpu_start));
    const Rates py = PythonRate(python, case_path, std::max(1, renders / 10));
    if (py.wall <= 0) {
      std::fprintf(stderr, "python baseline failed\n");
      return 1;
    }
    theirs.push_back(py.wall);
    theirs_cpu.push_back(py.cpu);
    std::printf(
        "{\"bench\": \"chat_template\", \"metric\": \"renders_per_s_rep\", \"rep\": %d, "
        "\"value\": %.1f, \"unit\": \"1/s\", \"baseline\": \"python_jinja2\", "
        "\"baseline_value\": %.1f, \"cpu_value\": %.1f, \"baseline_cpu_value\": %.1f}\n",
        r, ours.back(), py.wall, ours_cpu.back(), py.cpu);
    std::fflush(stdout);
  }
  const double m = Median(ours), pm = Median(theirs);
  std::printf(
      "{\"bench\": \"chat_template\", \"metric\": \"renders_per_s\", \"value\": %.1f, \"unit\": "
      "\"1/s\", \"baseline\": \"python_jinja2\", \"baseline_value\": %.1f, \"ratio\": %.2f, "
      "\"reps\": %d, \"min\": %.1f, \"max\": %.1f, \"baseline_min\": %.1f, \"baseline_max\": "
      "%.1f, \"cpu_value\": %.1f, \"baseline_cpu_value\": %.1f, \"cpu_ratio\": %.2f, "
      "\"prompt_bytes\": %zu, \"renders_per_rep\": %d}\n",
      m, pm, m / pm, reps, *std::min_element(ours.begin(), ours.end()),
      *std::max_element(ours.begin(), ours.end()), *std::min_element(theirs.begin(), theirs.end()),
      *std::max_element(theirs.begin(), theirs.end()), Median(ours_cpu), Median(theirs_cpu),
      Median(ours_cpu) / Median(theirs_cpu), first->size(), renders);
  return sink > 0 ? 0 : 1;
}

}  // namespace
}  // namespace troupe::models

int main(int argc, char** argv) { return troupe::models::Main(argc, argv); }
