// Dataset loading: the offset index of data/jsonl_dataset.h against loading every record as
// parsed JSON.
//
// Writes a JSONL file of verl-shaped records (data_source, chat-message prompt, ground truth,
// extra_info; ~300 bytes each) of --bytes (default 1 GB) into a temp dir under /tmp (deleted at
// the end), then, --runs times: builds the index (records/s, MB/s), reads --reads random records
// through it (records/s, parsed and normalised), and reports the peak RSS the indexing added.
// Baseline in the same process: every record of the first --baseline_bytes (default 100 MB)
// parsed into a std::vector<nlohmann::json> (records/s, RSS per MB of file). The file is in the
// page cache (just written): these are CPU costs, not disk reads.
//
// Usage: dataset_load_bench [--bytes N] [--baseline_bytes N] [--runs N] [--reads N]
// Prints one JSON object per line: {"bench","metric","value","unit",...}; progress on stderr.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/jsonl_dataset.h"
#include "nlohmann/json.hpp"

namespace troupe::data {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void Emit(const std::string& metric, double value, const std::string& unit,
          const std::string& extra = "") {
  std::printf(
      "{\"bench\": \"dataset_load\", \"metric\": \"%s\", \"value\": %.3f, \"unit\": \"%s\"%s}\n",
      metric.c_str(), value, unit.c_str(), extra.c_str());
  std::fflush(stdout);
}

// A field of /proc/self/status in kB (VmRSS, VmHWM).
int64_t StatusKb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1);
  }
  return -1;
}

// Resets the peak RSS (VmHWM) to the current RSS.
void ResetPeak() { std::ofstream("/proc/self/clear_refs") << "5"; }

// Median and spread of `v`: {median, min, max}.
std::vector<double> Stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

void EmitStats(const std::string& metric, const std::vector<double>& runs, const std::string& unit,
               const std::string& extra = "") {
  const std::vector<double> s = Stats(runs);
  Emit(metric, s[0], unit,
       absl::StrFormat(", \"min\": %.3f, \"max\": %.3f, \"runs\": %d%s", s[1], s[2], runs.size(),
                       extra));
}

int64_t WriteFile(const std::string& path, int64_t bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::mt19937_64 rng(1);
  int64_t written = 0, records = 0;
  std::string line;
  while (written < bytes) {
    const int a = static_cast<int>(rng() % 1000), b = static_cast<int>(rng() % 1000);
    line = absl::StrCat(
        R"({"data_source": "openai/gsm8k", "prompt": [{"role": "system", "content": "Solve )"
        R"(the problem and put the final answer after ####."}, {"role": "user", "content": )"
        R"("What is )",
        a, " plus ", b,
        R"(?"}], "ability": "math", "reward_model": {"style": "rule", )"
        R"("ground_truth": ")",
        a + b, R"("}, "extra_info": {"split": "train", "index": )", records, "}}\n");
    std::fwrite(line.data(), 1, line.size(), f);
    written += static_cast<int64_t>(line.size());
    ++records;
    if (records % 1000000 == 0) {
      std::fprintf(stderr, "\rwriting: %.0f / %.0f MB", written / 1e6, bytes / 1e6);
    }
  }
  std::fclose(f);
  std::fprintf(stderr, "\rwrote %.0f MB, %lld records\n", written / 1e6,
               static_cast<long long>(records));
  return records;
}

int Main(int argc, char** argv) {
  int64_t bytes = 1000000000, baseline_bytes = 100000000, runs = 3, reads = 100000;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const int64_t value = std::atoll(argv[i + 1]);
    if (flag == "--bytes")
      bytes = value;
    else if (flag == "--baseline_bytes")
      baseline_bytes = value;
    else if (flag == "--runs")
      runs = value;
    else if (flag == "--reads")
      reads = value;
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  const std::string dir = absl::StrCat("/tmp/dataset_load_bench.", getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/train.jsonl";
  const int64_t records = WriteFile(path, bytes);
  const double mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  const std::string size_tag = absl::StrFormat(", \"file_mb\": %.0f", mb);

  std::vector<double> index_rps, index_mbps, read_rps, index_rss_mb;
  for (int64_t run = 0; run < runs; ++run) {
    std::fprintf(stderr, "run %lld/%lld: indexing\n", static_cast<long long>(run + 1),
                 static_cast<long long>(runs));
    ResetPeak();
    const int64_t rss_before = StatusKb("VmRSS");
    const Clock::time_point start = Clock::now();
    absl::StatusOr<std::unique_ptr<JsonlDataset>> ds = JsonlDataset::Open({path}, {});
    const double took = Seconds(start);
    if (!ds.ok()) {
      std::fprintf(stderr, "%s\n", std::string(ds.status().message()).c_str());
      return 1;
    }
    index_rss_mb.push_back((StatusKb("VmHWM") - rss_before) / 1e3);
    index_rps.push_back(static_cast<double>((*ds)->size()) / took);
    index_mbps.push_back(mb / took);
    std::mt19937_64 rng(run);
    const Clock::time_point read_start = Clock::now();
    int64_t chars = 0;
    for (int64_t i = 0; i < reads; ++i) {
      absl::StatusOr<Record> r = (*ds)->Read(static_cast<int64_t>(rng() % records), {});
      if (!r.ok()) {
        std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
        return 1;
      }
      chars += static_cast<int64_t>(r->ground_truth.size());
    }
    read_rps.push_back(static_cast<double>(reads) / Seconds(read_start));
    if (chars == 0) return 1;
  }
  EmitStats("index_records_per_s", index_rps, "records/s", size_tag);
  EmitStats("index_mb_per_s", index_mbps, "MB/s", size_tag);
  EmitStats("random_read_records_per_s", read_rps, "records/s", size_tag);
  EmitStats("index_peak_rss_mb", index_rss_mb, "MB", size_tag);
  Emit("index_rss_per_file_mb", Stats(index_rss_mb)[0] / mb, "MB/MB", size_tag);

  // Baseline: every record of the first baseline_bytes parsed into memory.
  std::vector<double> load_rps, load_rss_per_mb;
  for (int64_t run = 0; run < runs; ++run) {
    std::fprintf(stderr, "run %lld/%lld: baseline (parse all of %.0f MB)\n",
                 static_cast<long long>(run + 1), static_cast<long long>(runs),
                 std::min<double>(mb, baseline_bytes / 1e6));
    const int64_t rss_before = StatusKb("VmRSS");
    const Clock::time_point start = Clock::now();
    std::ifstream in(path);
    std::vector<nlohmann::json> all;
    std::string line;
    int64_t read_bytes = 0;
    while (read_bytes < baseline_bytes && std::getline(in, line)) {
      read_bytes += static_cast<int64_t>(line.size()) + 1;
      all.push_back(nlohmann::json::parse(line));
    }
    const double took = Seconds(start);
    load_rps.push_back(static_cast<double>(all.size()) / took);
    load_rss_per_mb.push_back((StatusKb("VmRSS") - rss_before) / 1e3 / (read_bytes / 1e6));
  }
  // Later runs reuse the pages the allocator kept from the first: its RSS growth is the one.
  load_rss_per_mb.resize(1);
  const std::string base_tag =
      absl::StrFormat(", \"file_mb\": %.0f", std::min<double>(mb, baseline_bytes / 1e6));
  EmitStats("baseline_parse_all_records_per_s", load_rps, "records/s", base_tag);
  EmitStats("baseline_rss_per_file_mb", load_rss_per_mb, "MB/MB", base_tag);
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace troupe::data

int main(int argc, char** argv) { return troupe::data::Main(argc, argv); }
