#include "models/tokenizers/bpe_trainer.h"

#include <algorithm>
#include <chrono>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "models/tokenizers/json_util.h"
#include "models/tokenizers/unicode.h"
#include "nlohmann/json.hpp"

namespace troupe::models {
namespace {

using internal::Quote;
using ordered_json = nlohmann::ordered_json;

uint64_t PairKey(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
int32_t PairLeft(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t PairRight(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

// A heap entry: `count` is the pair's count when it was queued (>= its current count, or equal
// after an increase, which queues a new entry).
struct QueuedPair {
  int64_t count;
  uint64_t pair;
};

// std::priority_queue puts the "largest" on top: the highest count, then the smallest pair.
struct QueuedPairLess {
  bool operator()(const QueuedPair& a, const QueuedPair& b) const {
    return a.count != b.count ? a.count < b.count : a.pair > b.pair;
  }
};

struct Word {
  std::vector<int32_t> symbols;
  int64_t count;
};

// The merge loop's state: words as symbol sequences, pair counts, which words hold each pair.
class MergeState {
 public:
  explicit MergeState(std::vector<Word> words) : words_(std::move(words)) {
    for (int32_t w = 0; w < static_cast<int32_t>(words_.size()); ++w) {
      const Word& word = words_[w];
      for (size_t i = 0; i + 1 < word.symbols.size(); ++i) {
        Add(PairKey(word.symbols[i], word.symbols[i + 1]), word.count, w);
      }
    }
  }

  const absl::flat_hash_map<uint64_t, int64_t>& counts() const { return counts_; }
  int64_t CountOf(uint64_t pair) const {
    const auto it = counts_.find(pair);
    return it == counts_.end() ? 0 : it->second;
  }

  // Replaces every occurrence of `pair` (left to right, non-overlapping) by `merged` and appends
  // the pairs whose count grew to `grown` (possibly repeated).
  void Merge(uint64_t pair, int32_t merged, std::vector<uint64_t>* grown) {
    const int32_t a = PairLeft(pair);
    const int32_t b = PairRight(pair);
    const auto where_it = where_.find(pair);
    if (where_it == where_.end()) return;
    const std::vector<int32_t> holders = std::move(where_it->second);
    where_.erase(where_it);
    for (const int32_t w : holders) {
      // One compacting pass (not an erase per occurrence: a long word stays linear). The pairs
      // around each occurrence are read from the sequence as merged so far, so consecutive
      // occurrences ("a b a b") and overlapping ones ("a a a") count right.
      std::vector<int32_t>& s = words_[w].symbols;
      const int64_t c = words_[w].count;
      size_t out = 0;
      for (size_t r = 0; r < s.size();) {
        if (r + 1 >= s.size() || s[r] != a || s[r + 1] != b) {
          s[out++] = s[r++];
          continue;
        }
        if (out > 0) {
          const int32_t prev = s[out - 1];
          Add(PairKey(prev, a), -c, w);
          Add(PairKey(prev, merged), c, w);
          grown->push_back(PairKey(prev, merged));
        }
        if (r + 2 < s.size()) {
          const int32_t next = s[r + 2];
          Add(PairKey(b, next), -c, w);
          Add(PairKey(merged, next), c, w);
          grown->push_back(PairKey(merged, next));
        }
        Add(pair, -c, w);
        s[out++] = merged;
        r += 2;
      }
      s.resize(out);
    }
  }

 private:
  // counts_[pair] += delta; a positive delta records that word `w` holds the pair.
  void Add(uint64_t pair, int64_t delta, int32_t w) {
    int64_t& count = counts_[pair];
    count += delta;
    if (count <= 0) {
      counts_.erase(pair);
    }
    if (delta > 0) {
      std::vector<int32_t>& holders = where_[pair];
      if (holders.empty() || holders.back() != w) holders.push_back(w);
    }
  }

  std::vector<Word> words_;
  absl::flat_hash_map<uint64_t, int64_t> counts_;
  // Words that held the pair when it was counted (some may no longer hold it).
  absl::flat_hash_map<uint64_t, std::vector<int32_t>> where_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTrainer>> BpeTrainer::Create(BpeTrainerOptions options) {
  const int64_t base = 256 + static_cast<int64_t>(options.special_tokens.size());
  if (options.vocab_size < base) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size ", options.vocab_size, " is below the ", base,
                     " ids that the 256 byte symbols and ", options.special_tokens.size(),
                     " special tokens take"));
  }
  if (options.min_frequency < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_frequency must be at least 1, got ", options.min_frequency));
  }
  if (options.max_text_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_text_bytes must be >= 0 (0: no limit), got ", options.max_text_bytes));
  }
  absl::flat_hash_set<std::string> seen;
  std::vector<AddedToken> specials;
  for (size_t i = 0; i < options.special_tokens.size(); ++i) {
    const std::string& token = options.special_tokens[i];
    if (token.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("special token ", i, " is empty"));
    }
    for (size_t pos = 0; pos < token.size();) {
      const unicode::DecodedChar c = unicode::DecodeUtf8(token, pos);
      if (c.code_point == unicode::kInvalidCodePoint) {
        return absl::InvalidArgumentError(
            absl::StrCat("special token ", Quote(token), " is not valid UTF-8 (byte ", pos, ")"));
      }
      pos += c.length;
    }
    if (!seen.insert(token).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("special token ", Quote(token), " is given twice"));
    }
    for (int byte = 0; byte < 256; ++byte) {
      if (token == BytesToByteLevelText(std::string(1, static_cast<char>(byte)))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "special token ", Quote(token), " spells the symbol of byte ", byte,
            " in the byte-level vocabulary; choose a longer token such as \"<|", token, "|>\""));
      }
    }
    AddedToken added;
    added.id = static_cast<int32_t>(i);
    added.content = token;
    added.special = true;
    specials.push_back(std::move(added));
  }
  absl::StatusOr<PatternSplitter> splitter =
      PatternSplitter::FromRegex(options.pre_tokenizer_regex);
  if (!splitter.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pre_tokenizer_regex: ", splitter.status().message()));
  }
  std::unique_ptr<BpeTrainer> trainer(new BpeTrainer(std::move(options), *splitter));
  trainer->specials_ = AddedTokenMatcher(std::move(specials));
  return trainer;
}

BpeTrainer::BpeTrainer(BpeTrainerOptions options, PatternSplitter splitter)
    : options_(std::move(options)), splitter_(splitter) {}

bool BpeTrainer::AddText(absl::string_view text) {
  if (full_ || (options_.max_text_bytes > 0 &&
                text_bytes_ + static_cast<int64_t>(text.size()) > options_.max_text_bytes)) {
    full_ = true;
    return false;
  }
  text_bytes_ += static_cast<int64_t>(text.size());
  std::vector<AddedTokenMatcher::Segment> segments;
  if (specials_.empty()) {
    segments.push_back({text, -1});
  } else {
    specials_.Split(text, /*match_special=*/true, &segments);
  }
  std::vector<absl::string_view> pieces;
  for (const AddedTokenMatcher::Segment& segment : segments) {
    if (segment.id >= 0 || segment.text.empty()) continue;
    pieces.clear();
    splitter_.Split(segment.text, &pieces);
    for (absl::string_view piece : pieces) ++word_counts_[piece];
  }
  return true;
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTrainer::Train() const {
  if (text_bytes_ == 0) {
    return absl::InvalidArgumentError("no training text: every document was empty or none added");
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

  // Id layout: specials, bytes, merges.
  const int32_t num_specials = static_cast<int32_t>(options_.special_tokens.size());
  std::vector<std::string> id_bytes;  // the bytes of each non-special id, from num_specials on
  absl::flat_hash_map<std::string, int32_t> bytes_to_id;
  for (int byte = 0; byte < 256; ++byte) {
    id_bytes.emplace_back(1, static_cast<char>(byte));
    bytes_to_id.emplace(id_bytes.back(), num_specials + byte);
  }
  const auto bytes_of = [&](int32_t id) -> const std::string& {
    return id_bytes[id - num_specials];
  };
  // A merged token spelled like a special token's vocabulary text would clash with it in
  // model.vocab: such a pair is never merged.
  absl::flat_hash_set<std::string> special_texts(options_.special_tokens.begin(),
                                                 options_.special_tokens.end());

  std::vector<Word> words;
  words.reserve(word_counts_.size());
  for (const auto& [text, count] : word_counts_) {
    if (text.size() < 2) continue;  // no pairs
    Word word{{}, count};
    word.symbols.reserve(text.size());
    for (unsigned char byte : text) word.symbols.push_back(num_specials + byte);
    words.push_back(std::move(word));
  }
  MergeState state(std::move(words));
  std::priority_queue<QueuedPair, std::vector<QueuedPair>, QueuedPairLess> queue;
  for (const auto& [pair, count] : state.counts()) queue.push({count, pair});

  BpeTrainProgress progress;
  progress.merges_target = options_.vocab_size - num_specials - 256;
  double last_report = 0;
  std::vector<std::pair<int32_t, int32_t>> merges;
  std::vector<uint64_t> grown;
  absl::flat_hash_set<uint64_t> refused;
  int32_t next_id = num_specials + 256;
  while (next_id < options_.vocab_size && !queue.empty()) {
    const QueuedPair top = queue.top();
    queue.pop();
    const int64_t count = state.CountOf(top.pair);
    if (count != top.count) {
      if (count > 0) queue.push({count, top.pair});
      continue;
    }
    if (count < options_.min_frequency) break;
    if (refused.contains(top.pair)) continue;
    const int32_t left = PairLeft(top.pair);
    const int32_t right = PairRight(top.pair);
    std::string bytes = absl::StrCat(bytes_of(left), bytes_of(right));
    if (special_texts.contains(BytesToByteLevelText(bytes))) {
      refused.insert(top.pair);
      continue;
    }
    int32_t merged;
    if (const auto it = bytes_to_id.find(bytes); it != bytes_to_id.end()) {
      merged = it->second;
    } else {
      merged = next_id++;
      bytes_to_id.emplace(bytes, merged);
      id_bytes.push_back(std::move(bytes));
    }
    merges.emplace_back(left, right);
    grown.clear();
    state.Merge(top.pair, merged, &grown);
    std::sort(grown.begin(), grown.end());
    grown.erase(std::unique(grown.begin(), grown.end()), grown.end());
    for (const uint64_t pair : grown) {
      const int64_t grown_count = state.CountOf(pair);
      if (grown_count > 0) queue.push({grown_count, pair});
    }
    if (options_.progress && (merges.size() & 63) == 0) {
      const double now = elapsed();
      if (now - last_report >= options_.progress_interval_seconds) {
        last_report = now;
        progress.merges_done = static_cast<int32_t>(merges.size());
        progress.elapsed_seconds = now;
        options_.progress(progress);
      }
    }
  }
  if (options_.progress) {
    progress.merges_done = static_cast<int32_t>(merges.size());
    progress.elapsed_seconds = elapsed();
    options_.progress(progress);
  }

  // The tokenizer.json document.
  std::vector<std::string> id_text(num_specials + id_bytes.size());
  for (int32_t id = 0; id < num_specials; ++id) id_text[id] = options_.special_tokens[id];
  for (size_t i = 0; i < id_bytes.size(); ++i) {
    id_text[num_specials + i] = BytesToByteLevelText(id_bytes[i]);
  }
  ordered_json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  ordered_json added = ordered_json::array();
  for (int32_t id = 0; id < num_specials; ++id) {
    added.push_back({{"id", id},
                     {"content", id_text[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  root["added_tokens"] = std::move(added);
  root["normalizer"] = nullptr;
  const ordered_json byte_level = {{"type", "ByteLevel"},
                                   {"add_prefix_space", false},
                                   {"trim_offsets", false},
                                   {"use_regex", false}};
  root["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers",
                            {{{"type", "Split"},
                              {"pattern", {{"Regex", options_.pre_tokenizer_regex}}},
                              {"behavior", "Isolated"},
                              {"invert", false}},
                             byte_level}}};
  root["post_processor"] = byte_level;
  root["decoder"] = byte_level;
  ordered_json model;
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  ordered_json::object_t vocab;
  auto& entries = static_cast<std::vector<std::pair<const std::string, ordered_json>>&>(vocab);
  entries.reserve(id_text.size());
  for (size_t id = 0; id < id_text.size(); ++id) {
    entries.emplace_back(id_text[id], static_cast<int32_t>(id));
  }
  model["vocab"] = std::move(vocab);
  ordered_json merge_list = ordered_json::array();
  for (const auto& [left, right] : merges) {
    merge_list.push_back(absl::StrCat(id_text[left], " ", id_text[right]));
  }
  model["merges"] = std::move(merge_list);
  root["model"] = std::move(model);
  return BpeTokenizer::FromJson(root.dump(), "trained tokenizer.json");
}

}  // namespace troupe::models
