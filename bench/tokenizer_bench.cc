// Tokenizer throughput: encode/decode MB/s of byte-level BPE on generated text.
//
// The text is generated deterministically: Zipf-distributed syllable words, capitalised
// sentences, punctuation, contractions, numbers, paragraphs, and ~5% non-ASCII words (accented
// Latin, Cyrillic, CJK, emoji). A byte-level BPE with kNumMerges merges is trained on its first
// part (plain pair counting on the GPT-2 pre-tokenized words seen at least twice), written as a
// tokenizer.json and loaded through BpeTokenizer::FromJson, once with the GPT-2 pre-tokenizer and
// once with Qwen2's.
//
// Usage: tokenizer_bench [path/to/tokenizer.json ...]   extra files are measured on the same text.
// Prints one JSON object per line: {"bench","metric","value","unit",...}.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "models/tokenizers/bpe_tokenizer.h"
#include "models/tokenizers/pre_tokenizer.h"
#include "models/tokenizers/tokenizer.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

constexpr size_t kTextBytes = 8 << 20;
constexpr size_t kTrainBytes = 512 << 10;
constexpr int kNumMerges = 3000;
constexpr int kRepeats = 3;

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void Emit(const std::string& metric, double value, const std::string& unit,
          const std::string& extra = "") {
  std::printf(
      "{\"bench\": \"tokenizer\", \"metric\": \"%s\", \"value\": %.3f, \"unit\": \"%s\"%s}\n",
      metric.c_str(), value, unit.c_str(), extra.c_str());
  std::fflush(stdout);
}

std::string GenerateText(size_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::vector<std::string> onsets = {"",   "b",  "c",  "d",  "f",  "g",  "h",  "k", "l",
                                           "m",  "n",  "p",  "r",  "s",  "t",  "v",  "w", "st",
                                           "tr", "ch", "sh", "th", "pl", "gr", "br", "qu"};
  const std::vector<std::string> nuclei = {"a", "e", "i", "o", "u", "ou", "ea", "ai", "y"};
  const std::vector<std::string> codas = {"", "", "n", "r", "s", "t", "l", "ng", "nd", "ck"};
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  // A fixed lexicon sampled with Zipf weights.
  std::vector<std::string> lexicon;
  for (int i = 0; i < 12000; ++i) {
    std::string word;
    const int syllables = 1 + static_cast<int>(rng() % 3) + (rng() % 5 == 0);
    for (int s = 0; s < syllables; ++s) word += pick(onsets) + pick(nuclei) + pick(codas);
    lexicon.push_back(word);
  }
  std::vector<double> cdf(lexicon.size());
  double total = 0;
  for (size_t i = 0; i < lexicon.size(); ++i) cdf[i] = total += 1.0 / std::pow(i + 1.0, 1.07);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  auto zipf_word = [&] {
    return lexicon[std::lower_bound(cdf.begin(), cdf.end(), unit(rng) * total) - cdf.begin()];
  };
  auto utf8 = [](char32_t cp) {
    std::string out;
    if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
  };
  auto foreign_word = [&] {
    std::string word;
    switch (rng() % 4) {
      case 0:  // accented Latin
        word = zipf_word();
        word += utf8(0xE0 + rng() % 0x1C);
        break;
      case 1:  // Cyrillic
        for (int i = 0, n = 3 + rng() % 6; i < n; ++i) word += utf8(0x430 + rng() % 32);
        break;
      case 2:  // CJK
        for (int i = 0, n = 2 + rng() % 5; i < n; ++i) word += utf8(0x4E00 + rng() % 600);
        break;
      default:  // emoji
        word = utf8(0x1F600 + rng() % 64);
    }
    return word;
  };
  const std::vector<std::string> contractions = {"'s", "'t", "'re", "'ll", "'ve", "'d"};
  std::string text;
  text.reserve(bytes + 256);
  bool sentence_start = true;
  while (text.size() < bytes) {
    std::string word;
    const uint64_t kind = rng() % 100;
    if (kind < 5) {
      word = foreign_word();
    } else if (kind < 8) {
      word = std::to_string(rng() % (kind < 6 ? 100 : 1000000));
    } else {
      word = zipf_word();
      if (rng() % 40 == 0) word += pick(contractions);
    }
    if (sentence_start && word[0] >= 'a' && word[0] <= 'z') word[0] = word[0] - 'a' + 'A';
    sentence_start = false;
    text += word;
    const uint64_t after = rng() % 100;
    if (after < 6) {
      text += ". ";
      sentence_start = true;
      if (rng() % 6 == 0) text += "\n\n";
    } else if (after < 10) {
      text += ", ";
    } else if (after < 11) {
      text += "! ";
      sentence_start = true;
    } else if (after < 12) {
      text += " (" + zipf_word() + ") ";
    } else {
      text += ' ';
    }
  }
  return text;
}

// Trains kNumMerges byte-level merges on `text`; returns a tokenizer.json document without the
// pre_tokenizer (the caller sets it).
nlohmann::json TrainTokenizerJson(const std::string& text) {
  absl::flat_hash_map<std::string, int64_t> word_counts;
  std::vector<absl::string_view> pieces;
  PatternSplitter::Gpt2().Split(text, &pieces);
  for (absl::string_view piece : pieces) ++word_counts[piece];

  std::vector<std::string> tokens;  // id -> byte-level text
  absl::flat_hash_map<std::string, int32_t> token_ids;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(BytesToByteLevelText(std::string(1, static_cast<char>(b))));
    token_ids[tokens.back()] = b;
  }
  struct Word {
    std::vector<int32_t> symbols;
    int64_t count;
  };
  std::vector<Word> words;
  for (const auto& [bytes, count] : word_counts) {
    if (count < 2) continue;  // hapaxes barely change the merges and dominate the cost
    Word w{{}, count};
    for (char c : bytes) w.symbols.push_back(static_cast<uint8_t>(c));
    words.push_back(std::move(w));
  }
  std::sort(words.begin(), words.end(),
            [](const Word& a, const Word& b) { return a.symbols < b.symbols; });

  nlohmann::json merges = nlohmann::json::array();
  absl::flat_hash_map<uint64_t, int64_t> pair_counts;
  for (int m = 0; m < kNumMerges; ++m) {
    pair_counts.clear();
    for (const Word& w : words) {
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
        pair_counts[(uint64_t{static_cast<uint32_t>(w.symbols[i])} << 32) |
                    static_cast<uint32_t>(w.symbols[i + 1])] += w.count;
      }
    }
    uint64_t best = 0;
    int64_t best_count = 1;
    for (const auto& [pair, count] : pair_counts) {
      if (count > best_count || (count == best_count && pair < best)) {
        best = pair;
        best_count = count;
      }
    }
    if (best_count < 2) break;
    const int32_t left = static_cast<int32_t>(best >> 32);
    const int32_t right = static_cast<int32_t>(best & 0xFFFFFFFF);
    const std::string merged = tokens[left] + tokens[right];
    int32_t merged_id;
    if (const auto it = token_ids.find(merged); it != token_ids.end()) {
      merged_id = it->second;
    } else {
      merged_id = static_cast<int32_t>(tokens.size());
      tokens.push_back(merged);
      token_ids[merged] = merged_id;
    }
    merges.push_back(tokens[left] + " " + tokens[right]);
    for (Word& w : words) {
      std::vector<int32_t>& s = w.symbols;
      size_t out = 0;
      for (size_t i = 0; i < s.size(); ++i) {
        if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
          s[out++] = merged_id;
          ++i;
        } else {
          s[out++] = s[i];
        }
      }
      s.resize(out);
    }
  }
  nlohmann::json vocab = nlohmann::json::object();
  for (size_t id = 0; id < tokens.size(); ++id) vocab[tokens[id]] = id;
  const int32_t eot = static_cast<int32_t>(tokens.size());
  return {{"added_tokens", {{{"id", eot}, {"content", "<|endoftext|>"}, {"special", true}}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
}

nlohmann::json Gpt2PreTokenizer() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
}

nlohmann::json Qwen2PreTokenizer() {
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", kQwen2PreTokenizerRegex}}},
             {"behavior", "Isolated"}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
}

// Measures one tokenizer on `text`; `make` builds a fresh instance (empty cache).
template <typename Make>
bool Measure(const std::string& name, Make make, const std::string& text) {
  const double mb = text.size() / 1e6;
  auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = make();
  if (!tok.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(tok.status().message()).c_str());
    return false;
  }
  Emit(name + "/load", Seconds(start) * 1e3, "ms");

  start = Clock::now();
  absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Encode(text);
  if (!ids.ok()) {
    std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(ids.status().message()).c_str());
    return false;
  }
  Emit(name + "/encode_cold_cache", mb / Seconds(start), "MB/s");
  double best = 0;
  for (int r = 0; r < kRepeats; ++r) {
    start = Clock::now();
    ids = (*tok)->Encode(text);
    best = std::max(best, mb / Seconds(start));
  }
  Emit(name + "/encode", best, "MB/s",
       absl::StrFormat(", \"bytes\": %d, \"tokens\": %d, \"vocab_size\": %d", text.size(),
                       ids->size(), (*tok)->vocab_size()));
  Emit(name + "/bytes_per_token", static_cast<double>(text.size()) / ids->size(), "bytes");

  best = 0;
  absl::StatusOr<std::string> back;
  for (int r = 0; r < kRepeats; ++r) {
    start = Clock::now();
    back = (*tok)->Decode(*ids);
    best = std::max(best, mb / Seconds(start));
  }
  if (!back.ok() || *back != text) {
    std::fprintf(stderr, "%s: decode did not round-trip\n", name.c_str());
    return false;
  }
  Emit(name + "/decode", best, "MB/s");
  return true;
}

int Main(int argc, char** argv) {
  const std::string text = GenerateText(kTextBytes, /*seed=*/42);
  const double mb = text.size() / 1e6;

  for (const auto& [label, splitter] :
       {std::pair<std::string, PatternSplitter>{"gpt2", PatternSplitter::Gpt2()},
        {"qwen2", PatternSplitter::Qwen2()}}) {
    double best = 0;
    size_t count = 0;
    for (int r = 0; r < kRepeats; ++r) {
      std::vector<absl::string_view> pieces;
      pieces.reserve(text.size() / 3);
      const auto start = Clock::now();
      splitter.Split(text, &pieces);
      best = std::max(best, mb / Seconds(start));
      count = pieces.size();
    }
    Emit(absl::StrCat("pre_tokenize_", label), best, "MB/s",
         absl::StrFormat(", \"pieces\": %d", count));
  }

  auto start = Clock::now();
  nlohmann::json doc = TrainTokenizerJson(text.substr(0, kTrainBytes));
  Emit("train_bpe", Seconds(start), "s",
       absl::StrFormat(", \"merges\": %d", doc["model"]["merges"].size()));

  bool ok = true;
  for (const auto& [label, pre] :
       {std::pair<std::string, nlohmann::json>{"bpe_gpt2", Gpt2PreTokenizer()},
        {"bpe_qwen2", Qwen2PreTokenizer()}}) {
    doc["pre_tokenizer"] = pre;
    const std::string json = doc.dump();
    ok &= Measure(
        label,
        [&]() -> absl::StatusOr<std::unique_ptr<Tokenizer>> {
          absl::StatusOr<std::unique_ptr<BpeTokenizer>> tok = BpeTokenizer::FromJson(json, label);
          if (!tok.ok()) return tok.status();
          return std::unique_ptr<Tokenizer>(std::move(*tok));
        },
        text);
  }
  for (int i = 1; i < argc; ++i) {
    const std::string path = argv[i];
    ok &= Measure(
        absl::StrCat("file:", path), [&] { return LoadTokenizer(path); }, text);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace troupe::models

int main(int argc, char** argv) { return troupe::models::Main(argc, argv); }
