// OnigurumaRegex: a regular expression compiled by Oniguruma exactly as Hugging Face tokenizers
// compiles pre-tokenizer and normalizer patterns (Ruby syntax, ONIG_OPTION_NONE, UTF-8), and a
// FindAll that enumerates matches the way its `find_iter` does.
//
//   absl::StatusOr<std::shared_ptr<const OnigurumaRegex>> re =
//   OnigurumaRegex::Compile(R"(\p{L}+)"); std::vector<OnigurumaRegex::Match> matches;
//   TROUPE_RETURN_IF_ERROR((*re)->FindAll(text, &matches));
//
// Matches are leftmost-first, non-overlapping, in ascending order; each search resumes where the
// previous match ended (so lookbehind sees the earlier text). An empty match that ends where the
// previous match ended is skipped and the search resumes one character further on.
//
// Invalid UTF-8: Oniguruma assumes valid input (a truncated sequence can make it read past the
// end). FindAll therefore validates first; when the text is not valid UTF-8, each byte that does
// not belong to a valid sequence (unicode::DecodeUtf8's rule) is matched as if it were U+FFFD
// REPLACEMENT CHARACTER (a symbol: not \s, \p{L} or \p{N}), and match offsets are mapped back to
// the original bytes, so a match never splits or alters the byte. Valid text is searched as is.
//
// Errors: Compile returns InvalidArgument with Oniguruma's message for a pattern it rejects.
// FindAll returns ResourceExhausted if a search exceeds Oniguruma's backtracking limit
// (retry-limit-in-match, 10^7 by default), quoting the pattern.
//
// Thread-safety: immutable after Compile; FindAll may be called concurrently on one instance.
// This relies on Oniguruma 6.9's rules: onig_initialize is called exactly once (a function-local
// static) before any regex is compiled; onig_search does not modify the compiled regex_t and
// keeps its backtracking stack per call, so concurrent searches are safe provided each uses its
// own OnigRegion (FindAll allocates one per call); the global limits (onig_set_retry_limit_*)
// are never changed. Compilation is serialized by a mutex (we do not rely on onig_new being
// reentrant).
#ifndef TROUPE_MODELS_TOKENIZERS_ONIGURUMA_REGEX_H_
#define TROUPE_MODELS_TOKENIZERS_ONIGURUMA_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace troupe::models {

class OnigurumaRegex {
 public:
  // Byte offsets [start, end) of one match; start == end for an empty match.
  struct Match {
    size_t start;
    size_t end;
  };

  // Compiles `pattern` (UTF-8). InvalidArgument quoting the pattern and Oniguruma's reason if the
  // pattern is not valid UTF-8 or does not compile.
  static absl::StatusOr<std::shared_ptr<const OnigurumaRegex>> Compile(absl::string_view pattern);

  ~OnigurumaRegex();
  OnigurumaRegex(const OnigurumaRegex&) = delete;
  OnigurumaRegex& operator=(const OnigurumaRegex&) = delete;

  // Appends every match in `text` to `matches` (see the file comment for the order, empty
  // matches and invalid UTF-8). ResourceExhausted if the backtracking limit is hit.
  absl::Status FindAll(absl::string_view text, std::vector<Match>* matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Compiled;
  OnigurumaRegex(std::string pattern, std::unique_ptr<Compiled> compiled);

  // FindAll on text known to be valid UTF-8.
  absl::Status FindAllValid(absl::string_view text, std::vector<Match>* matches) const;

  std::string pattern_;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace troupe::models

#endif  // TROUPE_MODELS_TOKENIZERS_ONIGURUMA_REGEX_H_
