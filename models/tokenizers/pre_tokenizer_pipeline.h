// PreTokenizerPipeline: the "pre_tokenizer" of a Hugging Face tokenizer.json, which splits each
// (normalized) stretch of text into the pieces that BPE merges run inside.
//
// Accepted JSON (anything else is refused with InvalidArgument naming the file and field):
//   {"type": "Sequence", "pretokenizers": [step, ...]}   the steps in order, each on every piece
//   {"type": "Split", "pattern": {"Regex": r} | {"String": s}, "behavior": b, "invert": bool}
//       r: any Oniguruma (Ruby syntax) regex; s: a non-empty literal. b: "Isolated" (default),
//       "Removed", "MergedWithPrevious", "MergedWithNext" or "Contiguous" (SplitBehavior).
//   {"type": "ByteLevel", "add_prefix_space": bool, "use_regex": bool}   (both default true)
//       use_regex splits by the GPT-2 regex (Isolated); add_prefix_space prepends ' ' to a text
//       that does not start with one, and is accepted only on the first step. Marks the pipeline
//       byte-level (has_byte_level()); the byte-to-symbol mapping itself is the BPE model's.
//   {"type": "Digits", "individual_digits": bool}   \p{N} characters split off, one by one
//       (Isolated) or as runs (Contiguous).
//   {"type": "Punctuation", "behavior": b}   Unicode P* characters and ASCII punctuation (ICU's
//       u_ispunct or C ispunct), each a match, default Isolated.
// Refused by name: Whitespace, WhitespaceSplit, Metaspace, BertPreTokenizer, CharDelimiterSplit,
// UnicodeScripts and any other type.
//
// Semantics follow Hugging Face's Split: a pattern turns a piece into segments (matches and the
// gaps between them, covering the piece); `invert` swaps which are matches; the behavior then
// keeps, drops or merges them; empty pieces are dropped. Regexes are searched on each piece on
// its own, so lookarounds see the piece's ends as the text's ends.
//
// Regex engines: a Split regex is compiled by Oniguruma (oniguruma_regex.h) except the three
// patterns with hand-written scanners (pre_tokenizer.h: GPT-2, Qwen2, Llama-3), which are run
// by the scanner: pre_tokenizer_pipeline_test checks that both give identical pieces on a varied
// corpus, and bench/pretokenize_bench measures the scanners faster (see bench/RESULTS.md).
// Invalid UTF-8 bytes are single characters of class "other" for every pattern (U+FFFD for
// Oniguruma, see oniguruma_regex.h); pieces always keep the original bytes.
//
// Thread-safety: immutable after FromJson / AddSplit; Split may be called concurrently.
#ifndef TROUPE_MODELS_TOKENIZERS_PRE_TOKENIZER_PIPELINE_H_
#define TROUPE_MODELS_TOKENIZERS_PRE_TOKENIZER_PIPELINE_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json_fwd.hpp"

namespace troupe::models {

// What a Split step does with matches (Hugging Face's SplitDelimiterBehavior).
enum class SplitBehavior {
  kRemoved,             // matches are dropped, gaps kept
  kIsolated,            // matches and gaps are separate pieces
  kMergedWithPrevious,  // a match joins the piece before it ("a-b" on '-' -> "a-", "b")
  kMergedWithNext,      // a match joins the piece after it ("a-b" on '-' -> "a", "-b")
  kContiguous,          // adjacent matches (and adjacent gaps) form one piece
};

// "Isolated" -> kIsolated etc.; InvalidArgument listing the names otherwise.
absl::StatusOr<SplitBehavior> ParseSplitBehavior(absl::string_view name);

// A pattern a Split step finds in text (Hugging Face's Pattern): immutable, thread-safe.
class SplitPattern {
 public:
  // [start, end) of a piece, and whether it is a match (else the gap between matches).
  struct Segment {
    size_t start;
    size_t end;
    bool is_match;
  };

  virtual ~SplitPattern() = default;

  // Appends segments that cover `text` in order (empty matches included; no empty gaps).
  // Fails only if a regex search fails (see OnigurumaRegex::FindAll).
  virtual absl::Status FindSegments(absl::string_view text, std::vector<Segment>* out) const = 0;

  // Appends the non-empty segments of `text` as views (the Isolated behavior without invert, the
  // hot path). The default goes through FindSegments; scanners override it to skip the segments.
  virtual absl::Status AppendIsolated(absl::string_view text,
                                      std::vector<absl::string_view>* pieces) const;

  // `regex` through its hand-written scanner if it is one of pre_tokenizer.h's patterns, else
  // through Oniguruma. InvalidArgument if Oniguruma rejects it.
  static absl::StatusOr<std::shared_ptr<const SplitPattern>> Regex(absl::string_view regex);
  // `regex` through Oniguruma always (for tests and benchmarks).
  static absl::StatusOr<std::shared_ptr<const SplitPattern>> OnigurumaOnly(absl::string_view regex);
  // `regex` through its hand-written scanner; InvalidArgument if it has none.
  static absl::StatusOr<std::shared_ptr<const SplitPattern>> ScannerOnly(absl::string_view regex);
  // Every occurrence of `literal` (non-empty), leftmost first, non-overlapping.
  static absl::StatusOr<std::shared_ptr<const SplitPattern>> Literal(absl::string_view literal);
  // Each \p{N} character is a match.
  static std::shared_ptr<const SplitPattern> Digit();
  // Each punctuation character (Unicode P*, or ASCII punctuation) is a match.
  static std::shared_ptr<const SplitPattern> Punctuation();
};

class PreTokenizerPipeline {
 public:
  // An empty pipeline: Split returns the text as one piece.
  PreTokenizerPipeline() = default;

  // Parses the "pre_tokenizer" node `node`; `source` (the file) and `field` (the node's dotted
  // path) prefix every error.
  static absl::StatusOr<PreTokenizerPipeline> FromJson(const nlohmann::json& node,
                                                       absl::string_view source,
                                                       absl::string_view field);

  // Appends a Split step.
  void AddSplit(std::shared_ptr<const SplitPattern> pattern, SplitBehavior behavior, bool invert);

  // Appends the pieces of `text` to `pieces`: views into `text`, or into `*storage` when
  // add_prefix_space changed the text (keep it alive as long as the pieces). Empty text gives
  // no pieces. Fails only if a regex search fails.
  absl::Status Split(absl::string_view text, std::string* storage,
                     std::vector<absl::string_view>* pieces) const;

  // True if some step is a ByteLevel pre-tokenizer.
  bool has_byte_level() const { return has_byte_level_; }
  bool add_prefix_space() const { return add_prefix_space_; }

 private:
  struct Step {
    std::shared_ptr<const SplitPattern> pattern;
    SplitBehavior behavior;
    bool invert;
  };

  absl::Status Load(const nlohmann::json& node, absl::string_view source, const std::string& field,
                    bool first);
  static absl::Status ApplyStep(const Step& step, absl::string_view text,
                                std::vector<absl::string_view>* pieces);

  std::vector<Step> steps_;
  bool has_byte_level_ = false;
  bool add_prefix_space_ = false;
};

}  // namespace troupe::models

#endif  // TROUPE_MODELS_TOKENIZERS_PRE_TOKENIZER_PIPELINE_H_
