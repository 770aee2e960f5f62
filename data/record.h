// A dataset record as the format readers see it: one JSON object and where it came from, plus the
// one dotted-key lookup every reader resolves its keys with.
//
//   JsonRecord r = *source->Read(7);                   // r.where == "train.jsonl:9"
//   const nlohmann::json* truth = LookupDotted(r.value, "reward_model.ground_truth");
//
// Dotted keys. "a.b.c" is first looked up as a literal key of the record (a key that itself
// contains the dots), then walked through nested objects: record["a"]["b"]["c"]. A step through a
// value that is not an object, or a missing key, finds nothing (nullptr).
//
// Chat messages (a JSON array of {"role", "content"} objects) are turned into text by a
// ChatRenderer the caller supplies (a chat template rendered with the generation prompt, see
// models/chat/chat_template.h); the readers take it so they need no template of their own.
//
// Thread-safety: plain values and a pure function.
#ifndef TROUPE_DATA_RECORD_H_
#define TROUPE_DATA_RECORD_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace troupe::data {

// One record of a RecordSource (record_source.h).
struct JsonRecord {
  std::string where;     // "FILE:LINE" (a format without lines names what it has, "FILE:[3]")
  nlohmann::json value;  // always an object
};

// The value at dotted `path` in `record` (see the file comment), or nullptr. The pointer is into
// `record` and valid while it is.
const nlohmann::json* LookupDotted(const nlohmann::json& record, absl::string_view path);

// Chat messages (a JSON array) -> prompt text ending where the assistant's answer starts. An error
// is reported by the reader with the record's "FILE:LINE".
using ChatRenderer = std::function<absl::StatusOr<std::string>(const nlohmann::json& messages)>;

// What a reader does with a prompt longer than its token limit: refuse it (naming the record),
// keep its last tokens (left) or its first (right).
enum class Truncation { kError, kLeft, kRight };

}  // namespace troupe::data

#endif  // TROUPE_DATA_RECORD_H_
