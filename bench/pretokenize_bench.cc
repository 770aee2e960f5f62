// Pre-tokenization throughput: the hand-written scanners (models/tokenizers/pre_tokenizer.h) vs
// Oniguruma running the same regex, through the same PreTokenizerPipeline Split step, in one run.
//
// Text: deterministic mixed prose (words with capitals and contractions, numbers, punctuation,
// paths, whitespace runs, \r\n and blank lines; ~8% of words accented Latin, Greek, Cyrillic,
// CJK, Hangul or emoji), all valid UTF-8. Before timing, each pattern's two engines must give
// identical pieces on it (else exit 1). Each engine is timed --runs times, alternating; the
// median MB/s is the value, min and max the spread. The GPT-4o (o200k) regex, which has no
// scanner, is measured through Oniguruma alone.
//
// Usage: pretokenize_bench [--mb=4] [--runs=7]
// Prints one JSON object per line: {"bench","metric","value","unit","baseline","baseline_value",
// "ratio",...}; value is the scanner, baseline Oniguruma.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "models/tokenizers/pre_tokenizer.h"
#include "models/tokenizers/pre_tokenizer_pipeline.h"

namespace troupe::models {
namespace {

constexpr char kO200kRegex[] =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Options {
  int mb = 4;
  int runs = 7;
};

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    int* target = arg.rfind("--mb=", 0) == 0     ? &o.mb
                  : arg.rfind("--runs=", 0) == 0 ? &o.runs
                                                 : nullptr;
    const int value = target != nullptr ? std::atoi(arg.c_str() + arg.find('=') + 1) : 0;
    if (target == nullptr || value <= 0) {
      std::fprintf(stderr, "pretokenize_bench: bad argument '%s' (--mb=N --runs=N)\n", arg.c_str());
      std::exit(2);
    }
    *target = value;
  }
  return o;
}

std::string MakeText(size_t bytes) {
  std::mt19937_64 rng(2026);
  const std::vector<std::string> words = {
      "the",    "of",      "and",      "model", "training", "reward", "policy",    "token",
      "it",     "was",     "gradient", "value", "sample",   "batch",  "learning",  "rate",
      "we",     "you",     "they",     "HTTP",  "JSON",     "GPU",    "camelCase", "iPhone",
      "server", "request", "response", "error", "function", "return", "while",     "data"};
  const std::vector<std::string> foreign = {
      "café", "naïve",  "Ünïcödé", "façade", "αβγ",      "Ελλάδα", "Жук",         "привет",
      "中文", "日本語", "한국어",  "😀",      "👍🏽", "🇫🇷",     "e\u0301cole", "½"};
  const std::vector<std::string> contractions = {"'s", "'t", "'re", "'ll", "'ve", "'d", "'M"};
  const std::vector<std::string> separators = {" ",  " ",  " ",   " ",  ", ",   ". ",
                                               "! ", "? ", ":\n", "\n", "\r\n", "\n\n",
                                               "  ", "\t", " - ", "/",  " (",   ") "};
  std::string text;
  text.reserve(bytes + 64);
  while (text.size() < bytes) {
    const uint64_t kind = rng() % 100;
    if (kind < 8) {
      text += foreign[rng() % foreign.size()];
    } else if (kind < 14) {
      text += std::to_string(rng() % (kind < 11 ? 100 : 10000000));
    } else {
      std::string word = words[rng() % words.size()];
      if (rng() % 10 == 0) word[0] = static_cast<char>(std::toupper(word[0]));
      text += word;
      if (rng() % 30 == 0) text += contractions[rng() % contractions.size()];
    }
    text += separators[rng() % separators.size()];
  }
  return text;
}

using Clock = std::chrono::steady_clock;

struct Timing {
  std::vector<double> mb_per_s;
  size_t pieces = 0;
  double Median() const {
    std::vector<double> v = mb_per_s;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  double Min() const { return *std::min_element(mb_per_s.begin(), mb_per_s.end()); }
  double Max() const { return *std::max_element(mb_per_s.begin(), mb_per_s.end()); }
};

void TimeOnce(const PreTokenizerPipeline& pipeline, const std::string& text, Timing* timing) {
  std::string storage;
  std::vector<absl::string_view> pieces;
  pieces.reserve(text.size() / 3);
  const auto start = Clock::now();
  const absl::Status status = pipeline.Split(text, &storage, &pieces);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!status.ok()) {
    std::fprintf(stderr, "pretokenize_bench: %s\n", std::string(status.message()).c_str());
    std::exit(1);
  }
  timing->mb_per_s.push_back(text.size() / 1e6 / seconds);
  timing->pieces = pieces.size();
}

std::vector<absl::string_view> PiecesOf(const PreTokenizerPipeline& pipeline,
                                        const std::string& text) {
  std::string storage;
  std::vector<absl::string_view> pieces;
  if (!pipeline.Split(text, &storage, &pieces).ok()) std::exit(1);
  return pieces;
}

PreTokenizerPipeline Pipeline(absl::StatusOr<std::shared_ptr<const SplitPattern>> pattern) {
  if (!pattern.ok()) {
    std::fprintf(stderr, "pretokenize_bench: %s\n",
                 std::string(pattern.status().message()).c_str());
    std::exit(1);
  }
  PreTokenizerPipeline pipeline;
  pipeline.AddSplit(*pattern, SplitBehavior::kIsolated, /*invert=*/false);
  return pipeline;
}

int Main(int argc, char** argv) {
  const Options options = ParseOptions(argc, argv);
  const std::string text = MakeText(static_cast<size_t>(options.mb) << 20);
  struct Pattern {
    const char* name;
    const char* regex;
  };
  for (const Pattern& p :
       {Pattern{"gpt2", kGpt2PreTokenizerRegex}, Pattern{"qwen2", kQwen2PreTokenizerRegex},
        Pattern{"llama3", kLlama3PreTokenizerRegex}}) {
    const PreTokenizerPipeline scanner = Pipeline(SplitPattern::ScannerOnly(p.regex));
    const PreTokenizerPipeline onig = Pipeline(SplitPattern::OnigurumaOnly(p.regex));
    if (PiecesOf(scanner, text) != PiecesOf(onig, text)) {
      std::fprintf(stderr, "pretokenize_bench: %s: scanner and Oniguruma disagree\n", p.name);
      return 1;
    }
    Timing scanner_timing, onig_timing;
    for (int r = 0; r < options.runs; ++r) {
      TimeOnce(scanner, text, &scanner_timing);
      TimeOnce(onig, text, &onig_timing);
    }
    std::printf(
        "{\"bench\":\"pretokenize\",\"metric\":\"%s_scanner\",\"value\":%.4g,\"unit\":\"MB/s\","
        "\"baseline\":\"oniguruma\",\"baseline_value\":%.4g,\"ratio\":%.4g,\"min\":%.4g,"
        "\"max\":%.4g,\"baseline_min\":%.4g,\"baseline_max\":%.4g,\"runs\":%d,\"bytes\":%zu,"
        "\"pieces\":%zu}\n",
        p.name, scanner_timing.Median(), onig_timing.Median(),
        scanner_timing.Median() / onig_timing.Median(), scanner_timing.Min(), scanner_timing.Max(),
        onig_timing.Min(), onig_timing.Max(), options.runs, text.size(), scanner_timing.pieces);
    std::fflush(stdout);
  }
  const PreTokenizerPipeline o200k = Pipeline(SplitPattern::OnigurumaOnly(kO200kRegex));
  Timing timing;
  for (int r = 0; r < options.runs; ++r) TimeOnce(o200k, text, &timing);
  std::printf(
      "{\"bench\":\"pretokenize\",\"metric\":\"o200k_oniguruma\",\"value\":%.4g,\"unit\":\"MB/s\","
      "\"min\":%.4g,\"max\":%.4g,\"runs\":%d,\"bytes\":%zu,\"pieces\":%zu}\n",
      timing.Median(), timing.Min(), timing.Max(), options.runs, text.size(), timing.pieces);
  return 0;
}

}  // namespace
}  // namespace troupe::models

int main(int argc, char** argv) { return troupe::models::Main(argc, argv); }
