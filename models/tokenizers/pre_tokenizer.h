// Hand-written scanners for the three pre-tokenizer regexes found in most byte-level BPE
// tokenizer.json files: the fast path of PreTokenizerPipeline (pre_tokenizer_pipeline.h), which
// runs every other Split regex through Oniguruma. They are kept because they measure ~8x faster
// than Oniguruma on the same regex (bench/pretokenize_bench, bench/RESULTS.md), and
// pre_tokenizer_pipeline_test requires identical pieces from both engines on a varied corpus.
// Patterns, matched exactly as written in the file:
//
//   GPT-2 (also the implicit regex of a ByteLevel pre-tokenizer with use_regex = true):
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Qwen2:
//     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//     \s*[\r\n]+|\s+(?!\S)|\s+
//   Llama-3 / cl100k: as Qwen2 with \p{N}{1,3} in place of \p{N}.
//
// Each matcher reproduces the regex's leftmost-first alternation and backtracking (see the
// comments in pre_tokenizer.cc); character classes come from unicode.h. Every position of any
// input matches some alternative, so the pieces always concatenate back to the input. Bytes that
// are not valid UTF-8 are treated as single characters of class "other" (neither \s, \p{L} nor
// \p{N}), as OnigurumaRegex treats them (as U+FFFD).
//
// Thread-safety: PatternSplitter is an immutable value; all methods are const and thread-safe.
#ifndef TROUPE_MODELS_TOKENIZERS_PRE_TOKENIZER_H_
#define TROUPE_MODELS_TOKENIZERS_PRE_TOKENIZER_H_

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::models {

// The regexes as they appear (after JSON unescaping) in tokenizer.json files.
inline constexpr char kGpt2PreTokenizerRegex[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr char kQwen2PreTokenizerRegex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr char kLlama3PreTokenizerRegex[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

class PatternSplitter {
 public:
  static PatternSplitter Gpt2();
  static PatternSplitter Qwen2();
  static PatternSplitter Llama3();

  // The splitter for `regex` if it is one of the supported patterns above; otherwise
  // InvalidArgument quoting the pattern (callers add the file and field).
  static absl::StatusOr<PatternSplitter> FromRegex(absl::string_view regex);

  // Appends the successive regex matches of `text` to `pieces`; they are views into `text` and
  // concatenate back to it.
  void Split(absl::string_view text, std::vector<absl::string_view>* pieces) const;

  // Length in bytes (>= 1) of the match starting at byte `pos` < text.size().
  size_t MatchLength(absl::string_view text, size_t pos) const;

  // The regex this splitter implements.
  absl::string_view regex() const;

 private:
  enum class Family { kGpt2, kQwen2 };
  PatternSplitter(Family family, int max_digits) : family_(family), max_digits_(max_digits) {}

  size_t MatchGpt2(absl::string_view text, size_t pos) const;
  size_t MatchQwen2(absl::string_view text, size_t pos) const;

  Family family_;
  int max_digits_;  // Qwen2 family: the n of \p{N}{1,n}
};

}  // namespace troupe::models

#endif  // TROUPE_MODELS_TOKENIZERS_PRE_TOKENIZER_H_
