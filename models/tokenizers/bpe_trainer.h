// BpeTrainer: trains a byte-level BPE tokenizer (GPT-2 / Qwen2 style) from text, so that small
// experiments need no downloaded tokenizer.
//
//   BpeTrainerOptions options;
//   options.vocab_size = 4096;
//   TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<BpeTrainer> trainer, BpeTrainer::Create(options));
//   for (const std::string& document : corpus) trainer->AddText(document);
//   TROUPE_ASSIGN_OR_RETURN(std::unique_ptr<BpeTokenizer> tokenizer, trainer->Train());
//   WriteFileAtomically("out/tokenizer.json", tokenizer->ToJson());
//
// Training:
//   1. AddText splits each document at the special tokens (which never take part in merges),
//      pre-tokenizes the rest with the options' regex (pre_tokenizer.h) and counts each distinct
//      piece ("word"): memory grows with the number of distinct words, not with the text.
//   2. Train starts from one symbol per byte and repeatedly merges the most frequent adjacent
//      pair of symbols, counted over all words weighted by their counts, into a new symbol.
//      Ties go to the pair whose (left id, right id) is smallest, so the same texts give the same
//      tokenizer whatever their order of arrival within equal counts. Pair counts are updated
//      incrementally from the words that hold the merged pair, and the best pair comes from a
//      max-heap with lazy invalidation (an entry whose count is stale is re-queued when popped).
//      Training stops when the vocabulary is full or the best pair occurs fewer than
//      min_frequency times.
//
// Ids: the special tokens first (0 .. n-1, in the options' order), then the 256 byte symbols in
// byte order, then each merge's result in merge order. Two merges that spell the same bytes
// share one id. The result is a tokenizer.json document (model BPE, merges as "a b" strings in
// training order; the regex as a Split pre-tokenizer followed by ByteLevel; ByteLevel decoder),
// loaded through BpeTokenizer::FromJson, so encoding a training word reproduces the training
// merges.
//
// Thread-safety: not thread-safe; one thread drives a trainer.
#ifndef TROUPE_MODELS_TOKENIZERS_BPE_TRAINER_H_
#define TROUPE_MODELS_TOKENIZERS_BPE_TRAINER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/tokenizers/added_tokens.h"
#include "models/tokenizers/bpe_tokenizer.h"
#include "models/tokenizers/pre_tokenizer.h"

namespace troupe::models {

// Reported during Train's merge loop.
struct BpeTrainProgress {
  int32_t merges_done = 0;
  // The merges a full vocabulary needs. Training may stop earlier, and merges_done may pass it by
  // the merges whose result was already a token.
  int32_t merges_target = 0;
  double elapsed_seconds = 0;
};

struct BpeTrainerOptions {
  // Size of the vocabulary, counting the special tokens and the 256 byte symbols.
  int32_t vocab_size = 8192;
  // A pair is merged only if it occurs at least this many times (>= 1).
  int64_t min_frequency = 2;
  // Special tokens: ids 0.. in this order, matched whole in text, never merged into.
  std::vector<std::string> special_tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  // The pre-tokenizer; one of the regexes PatternSplitter::FromRegex supports.
  std::string pre_tokenizer_regex = kQwen2PreTokenizerRegex;
  // AddText accepts documents until their total size would exceed this (0: no limit).
  int64_t max_text_bytes = 0;
  // Called from Train about every progress_interval_seconds, and once at the end.
  std::function<void(const BpeTrainProgress&)> progress;
  double progress_interval_seconds = 1.0;
};

class BpeTrainer {
 public:
  // InvalidArgument naming the option if vocab_size cannot hold the special tokens and the 256
  // bytes, min_frequency < 1, max_text_bytes < 0, a special token is empty, not UTF-8, repeated
  // or spells a single byte symbol, or the regex is unsupported.
  static absl::StatusOr<std::unique_ptr<BpeTrainer>> Create(BpeTrainerOptions options);

  BpeTrainer(const BpeTrainer&) = delete;
  BpeTrainer& operator=(const BpeTrainer&) = delete;

  // Counts the words of one document. Returns false, ignoring `text`, if it would take the total
  // beyond max_text_bytes (every later call then returns false too).
  bool AddText(absl::string_view text);

  // Bytes of the documents accepted so far, and how many distinct words they hold.
  int64_t text_bytes() const { return text_bytes_; }
  int64_t distinct_words() const { return static_cast<int64_t>(word_counts_.size()); }
  // True once a document was refused for max_text_bytes.
  bool full() const { return full_; }

  // Runs the merges over the words counted so far and returns the tokenizer (the counts stay, so
  // Train may be called again, e.g. after more AddText). InvalidArgument if nothing was added.
  absl::StatusOr<std::unique_ptr<BpeTokenizer>> Train() const;

 private:
  BpeTrainer(BpeTrainerOptions options, PatternSplitter splitter);

  BpeTrainerOptions options_;
  PatternSplitter splitter_;
  AddedTokenMatcher specials_;
  absl::flat_hash_map<std::string, int64_t> word_counts_;
  int64_t text_bytes_ = 0;
  bool full_ = false;
};

}  // namespace troupe::models

#endif  // TROUPE_MODELS_TOKENIZERS_BPE_TRAINER_H_
