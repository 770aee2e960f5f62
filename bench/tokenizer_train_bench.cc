// Byte-level BPE training time (models/tokenizers/bpe_trainer.h) on generated text.
//
// The corpus is deterministic: documents that alternate arithmetic problems with their worked
// answers ("Q: 417 + 58 = ? A: 417 + 58 = 475.") and English-like prose (words built from
// syllables, drawn with Zipf-like frequencies, in capitalised sentences with commas and
// paragraph breaks). Each run trains from scratch: counting the words of every document
// (BpeTrainer::AddText) and then the merges (Train), at each vocabulary size. The last trained
// tokenizer is then written with ToJson and loaded back with FromJson, timed.
//
// Usage: tokenizer_train_bench [--megabytes 10] [--runs 3] [--vocab 4096,16384]
// Prints one JSON object per metric: {"bench","metric","value","unit",...}, the value being the
// median over the runs, with "min" and "max". Progress goes to stderr.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "models/tokenizers/bpe_tokenizer.h"
#include "models/tokenizers/bpe_trainer.h"

namespace troupe::models {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Documents totalling about `bytes` bytes.
std::vector<std::string> GenerateCorpus(size_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const char* const starts[] = {
      "b",  "c",  "d",  "f",  "g",  "h",  "j",  "k",  "l",  "m",  "n",  "p",  "r",  "s",  "t",
      "v",  "w",  "y",  "z",  "bl", "br", "cl", "cr", "dr", "fl", "fr", "gl", "gr", "pl", "pr",
      "sc", "sk", "sl", "sm", "sn", "sp", "st", "sw", "tr", "th", "sh", "ch", "wh", "qu", ""};
  const char* const vowels[] = {"a", "e", "i", "o", "u", "ai", "ea", "ee", "oo", "ou", "ie", "y"};
  const char* const ends[] = {"", "", "", "n", "r", "s", "t", "l", "m", "nd", "ng", "st", "ck"};
  // A lexicon of 20k words; word i is drawn with probability ~ 1 / (i + 10).
  std::vector<std::string> lexicon;
  for (int i = 0; i < 20000; ++i) {
    std::string word;
    const int syllables = 1 + static_cast<int>(rng() % 3) + (rng() % 5 == 0 ? 1 : 0);
    for (int s = 0; s < syllables; ++s) {
      word += starts[rng() % std::size(starts)];
      word += vowels[rng() % std::size(vowels)];
      word += ends[rng() % std::size(ends)];
    }
    lexicon.push_back(std::move(word));
  }
  std::vector<double> weights(lexicon.size());
  for (size_t i = 0; i < weights.size(); ++i) weights[i] = 1.0 / (static_cast<double>(i) + 10);
  std::discrete_distribution<size_t> pick_word(weights.begin(), weights.end());
  const char* const ops[] = {" + ", " - ", " * "};

  std::vector<std::string> docs;
  size_t total = 0;
  while (total < bytes) {
    std::string doc;
    if (rng() % 2 == 0) {
      const int64_t a = static_cast<int64_t>(rng() % 1000);
      const int64_t b = static_cast<int64_t>(rng() % 100);
      const int op = static_cast<int>(rng() % 3);
      const int64_t answer = op == 0 ? a + b : op == 1 ? a - b : a * b;
      doc = absl::StrCat("Q: What is ", a, ops[op], b, "? A: ", a, ops[op], b, " = ", answer,
                         ". The answer is ", answer, ".");
    } else {
      const int sentences = 1 + static_cast<int>(rng() % 6);
      for (int s = 0; s < sentences; ++s) {
        const int words = 4 + static_cast<int>(rng() % 14);
        for (int w = 0; w < words; ++w) {
          std::string word = lexicon[pick_word(rng)];
          if (w == 0) {
            word[0] = static_cast<char>(word[0] - 'a' + 'A');
          } else {
            doc += ' ';
          }
          doc += word;
          if (w + 1 < words && rng() % 9 == 0) doc += ',';
        }
        doc += rng() % 7 == 0 ? "?" : ".";
        if (s + 1 < sentences) doc += rng() % 5 == 0 ? "\n\n" : " ";
      }
    }
    total += doc.size();
    docs.push_back(std::move(doc));
  }
  return docs;
}

struct Stats {
  double median;
  double min;
  double max;
};

Stats Summarize(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {median, values.front(), values.back()};
}

void Emit(const std::string& metric, const std::vector<double>& runs, const std::string& unit,
          const std::string& extra = "") {
  const Stats s = Summarize(runs);
  std::printf(
      "{\"bench\": \"tokenizer_train\", \"metric\": \"%s\", \"value\": %.3f, \"unit\": \"%s\", "
      "\"min\": %.3f, \"max\": %.3f, \"runs\": %d%s}\n",
      metric.c_str(), s.median, unit.c_str(), s.min, s.max, static_cast<int>(runs.size()),
      extra.c_str());
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  double megabytes = 10;
  int runs = 3;
  std::vector<int32_t> vocab_sizes = {4096, 16384};
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = value != nullptr;
    if (flag == "--megabytes" && ok) {
      ok = absl::SimpleAtod(value, &megabytes) && megabytes > 0;
    } else if (flag == "--runs" && ok) {
      ok = absl::SimpleAtoi(value, &runs) && runs > 0;
    } else if (flag == "--vocab" && ok) {
      vocab_sizes.clear();
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        int32_t size = 0;
        ok = ok && absl::SimpleAtoi(part, &size);
        vocab_sizes.push_back(size);
      }
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr,
                   "usage: tokenizer_train_bench [--megabytes 10] [--runs 3] "
                   "[--vocab 4096,16384] (bad or missing value at %s)\n",
                   flag.c_str());
      return 2;
    }
    ++i;
  }

  const std::vector<std::string> corpus =
      GenerateCorpus(static_cast<size_t>(megabytes * 1e6), /*seed=*/2026);
  size_t bytes = 0;
  for (const std::string& doc : corpus) bytes += doc.size();
  std::fprintf(stderr, "corpus: %zu documents, %.1f MB\n", corpus.size(), bytes / 1e6);
  const std::string size_tag = absl::StrFormat("%gMB", megabytes);

  for (const int32_t vocab_size : vocab_sizes) {
    std::vector<double> count_s;
    std::vector<double> merge_s;
    std::vector<double> total_s;
    std::vector<double> merges_per_s;
    int64_t words = 0;
    int merges = 0;
    std::unique_ptr<BpeTokenizer> last;
    for (int run = 0; run < runs; ++run) {
      BpeTrainerOptions options;
      options.vocab_size = vocab_size;
      options.progress = [&](const BpeTrainProgress& p) {
        const double rate = p.elapsed_seconds > 0 ? p.merges_done / p.elapsed_seconds : 0;
        std::fprintf(stderr, "\rvocab %d run %d/%d: merges %d/%d, %.0f merges/s, ETA %.0f s   ",
                     vocab_size, run + 1, runs, p.merges_done, p.merges_target, rate,
                     rate > 0 ? (p.merges_target - p.merges_done) / rate : 0.0);
      };
      absl::StatusOr<std::unique_ptr<BpeTrainer>> trainer = BpeTrainer::Create(options);
      if (!trainer.ok()) {
        std::fprintf(stderr, "%s\n", std::string(trainer.status().message()).c_str());
        return 1;
      }
      const Clock::time_point start = Clock::now();
      for (const std::string& doc : corpus) (*trainer)->AddText(doc);
      count_s.push_back(Seconds(start));
      const Clock::time_point merge_start = Clock::now();
      absl::StatusOr<std::unique_ptr<BpeTokenizer>> tokenizer = (*trainer)->Train();
      merge_s.push_back(Seconds(merge_start));
      total_s.push_back(Seconds(start));
      std::fprintf(stderr, "\n");
      if (!tokenizer.ok()) {
        std::fprintf(stderr, "%s\n", std::string(tokenizer.status().message()).c_str());
        return 1;
      }
      words = (*trainer)->distinct_words();
      merges = (*tokenizer)->num_merges();
      merges_per_s.push_back(merges / merge_s.back());
      last = std::move(*tokenizer);
    }
    // Compression of the trained tokenizer on its own training text.
    int64_t tokens = 0;
    for (const std::string& doc : corpus) {
      absl::StatusOr<std::vector<int32_t>> ids = last->Encode(doc);
      if (!ids.ok()) {
        std::fprintf(stderr, "%s\n", std::string(ids.status().message()).c_str());
        return 1;
      }
      tokens += static_cast<int64_t>(ids->size());
    }
    // Writing it out (as a checkpoint does) and loading it back.
    std::vector<double> to_json_ms;
    std::vector<double> from_json_ms;
    for (int run = 0; run < runs; ++run) {
      Clock::time_point t = Clock::now();
      const std::string written = last->ToJson();
      to_json_ms.push_back(Seconds(t) * 1e3);
      t = Clock::now();
      absl::StatusOr<std::unique_ptr<BpeTokenizer>> reloaded =
          BpeTokenizer::FromJson(written, "bench");
      from_json_ms.push_back(Seconds(t) * 1e3);
      if (!reloaded.ok() || (*reloaded)->ToJson() != written) {
        std::fprintf(stderr, "ToJson did not reload to the same tokenizer\n");
        return 1;
      }
    }
    const std::string tag = absl::StrCat(size_tag, "_vocab", vocab_size);
    const std::string extra = absl::StrFormat(
        ", \"bytes\": %d, \"distinct_words\": %d, \"merges\": %d", bytes, words, merges);
    Emit(absl::StrCat("train_seconds_", tag), total_s, "s", extra);
    Emit(absl::StrCat("count_seconds_", tag), count_s, "s");
    Emit(absl::StrCat("merge_seconds_", tag), merge_s, "s");
    Emit(absl::StrCat("merges_per_second_", tag), merges_per_s, "merges/s");
    Emit(absl::StrCat("bytes_per_token_", tag), {static_cast<double>(bytes) / tokens}, "bytes");
    Emit(absl::StrCat("to_json_ms_vocab", vocab_size), to_json_ms, "ms");
    Emit(absl::StrCat("from_json_ms_vocab", vocab_size), from_json_ms, "ms");
  }
  return 0;
}

}  // namespace
}  // namespace troupe::models

int main(int argc, char** argv) { return troupe::models::Main(argc, argv); }
