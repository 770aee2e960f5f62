// "Did you mean ...?" for a mistyped command or flag: the closest known name by edit distance.
//
//   DidYouMean("statsu", {"run", "start", "status"})  // "status"
//   DidYouMean("--resme", {"--resume", "--address"})   // "--resume"
//   DidYouMean("frobnicate", {"run", "status"})        // nullopt: nothing is close enough
//
// Pure functions; thread-safe.
#ifndef TROUPE_CLI_DID_YOU_MEAN_H_
#define TROUPE_CLI_DID_YOU_MEAN_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/types/span.h"

namespace troupe {

// The optimal-string-alignment (restricted Damerau-Levenshtein) distance: how many single-character
// insertions, deletions, substitutions and swaps of adjacent characters turn `a` into `b`.
int EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `typed`, if its distance is at most max(2, typed.size() / 3) and less
// than typed.size(); on a tie, the earliest. nullopt if none is that close or `typed` is a
// candidate itself.
std::optional<std::string> DidYouMean(std::string_view typed,
                                      absl::Span<const std::string> candidates);

}  // namespace troupe

#endif  // TROUPE_CLI_DID_YOU_MEAN_H_
