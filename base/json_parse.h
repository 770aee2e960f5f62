// Parsing JSON that someone else wrote (a dataset's record, an HTTP body, a peer's config) with a
// bound on its nesting.
//
// nlohmann::json parses any depth without recursion, but copying, comparing, dumping or walking
// the result recurses once per level: a record of 100,000 nested brackets (200 KB) parses and
// then overflows the stack of the first copy. ParseJson counts the nesting of the text before
// building anything and refuses it past `max_depth`, so every value it returns is safe to copy and
// dump.
//
// Example:
//   absl::StatusOr<nlohmann::json> j = ParseJson(line);          // kMaxJsonDepth levels
//   if (!j.ok()) return Refuse(where, j.status().message());      // "nested deeper than 64 ..."
//
// Thread-safety: thread-safe (no shared state).
#ifndef TROUPE_BASE_JSON_PARSE_H_
#define TROUPE_BASE_JSON_PARSE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace troupe {

// The default bound on nesting: far beyond any dataset record, chat message list, config or API
// body troupe reads (they nest fewer than 10 levels), far below what overflows a thread's stack.
inline constexpr int kMaxJsonDepth = 64;

// The deepest nesting of objects and arrays in `text` (brackets inside strings, escaped quotes
// included, are not counted); 0 for a scalar. Stops counting, and returns max_depth + 1, once the
// text goes past `max_depth`. Does not check that the text is valid JSON.
int JsonNestingDepth(absl::string_view text, int max_depth);

// `text` parsed as one JSON value. Errors (InvalidArgument), without any prefix naming the text's
// origin, which the caller adds:
//   "not valid JSON (<parser's message>)"
//   "JSON nested deeper than <max_depth> levels"   (checked before parsing)
absl::StatusOr<nlohmann::json> ParseJson(absl::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace troupe

#endif  // TROUPE_BASE_JSON_PARSE_H_
