// SpecNode: a YAML document as a plain value tree in which every node and every map key remembers
// where it came from — a line and column of the job file, or the command-line override that set
// it. Internal to //recipes/job_spec: the job-spec reader (job_spec.cc) walks this tree rather
// than YAML::Node because yaml-cpp 0.7 leaves several things to the caller:
//
//   - merge keys (`<<: *base`, `<<: [*a, *b]`) are not applied: done here (explicit keys win,
//     then the sources in order, as the YAML merge-key spec says);
//   - duplicate keys are kept silently (lookups see the first): refused here;
//   - aliases share nodes, so an override written through one would change its anchor too: the
//     tree holds copies;
//   - a recursive alias (`a: &x {b: *x}`) becomes a cyclic graph, and alias chains can blow up
//     exponentially: nesting depth and node count are bounded here;
//   - it builds the whole tree of any input, however large: ParseSpecYaml bounds the text's size,
//     refuses binary text, and counts nodes and depth with yaml-cpp's event parser (no tree)
//     before it lets yaml-cpp build one.
//
// Scalars keep their text; typing follows the YAML 1.2 core schema (ClassifyScalar), so `8` is an
// integer, `"8"` a string, `1e-4` a number, `yes` a string.
//
// Thread-safety: plain values and free functions; no shared state.
#ifndef TROUPE_RECIPES_JOB_SPEC_SPEC_TREE_H_
#define TROUPE_RECIPES_JOB_SPEC_SPEC_TREE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_spec.h"

namespace troupe::recipes::job_spec_internal {

// Where a node came from.
struct SpecLoc {
  int line = 0;    // 1-based; 0 = no position in the file.
  int column = 0;  // 1-based; 0 = unknown.
  // Non-empty: the node was set by this command-line override ("algorithm.n=4").
  std::string override_text;
};

// "job.yaml:7:5", "override algorithm.n=4", or "job.yaml" when the position is unknown (names
// abbreviated to kMaxShownPathBytes).
std::string FormatLoc(const SpecLoc& loc, absl::string_view source_name);

struct SpecEntry;

struct SpecNode {
  enum class Kind { kNull, kScalar, kMap, kList };

  Kind kind = Kind::kNull;
  std::string scalar;              // kScalar: the text, without quotes or escapes.
  bool quoted = false;             // kScalar: quoted or tagged !!str, hence always a string.
  std::vector<SpecEntry> entries;  // kMap: explicit keys in document order, then merged ones.
  std::vector<SpecNode> items;     // kList.
  SpecLoc loc;                     // For a null map value: the key's location.

  // The entry with this key, or nullptr (also for non-maps).
  const SpecEntry* Find(absl::string_view key) const;
  SpecEntry* Find(absl::string_view key);
};

struct SpecEntry {
  std::string key;
  SpecLoc key_loc;
  SpecNode value;
};

// The type a scalar has under the YAML 1.2 core schema (quoted scalars are always kString).
struct ScalarValue {
  enum class Type { kNull, kBool, kInt, kFloat, kString };
  Type type = Type::kString;
  bool bool_value = false;
  int64_t int_value = 0;
  double float_value = 0;  // Also set for kInt.
};
ScalarValue ClassifyScalar(const SpecNode& scalar);
// The same for unquoted text.
ScalarValue ClassifyPlainText(absl::string_view text);

// Limits on what ParseSpecYaml reads (the values are job_spec.h's, stated to users there).
inline constexpr int64_t kMaxSpecBytes = kMaxJobSpecBytes;  // the YAML text
inline constexpr int64_t kMaxSpecNodes = kMaxJobSpecNodes;  // as written (an alias counts once)
inline constexpr int kMaxSpecDepth = kMaxJobSpecDepth;      // nesting of maps and lists
inline constexpr int64_t kMaxExpandedNodes = 100000;        // after aliases are expanded
// Values echoed in messages are cut to this many bytes (Abbreviate); paths, key paths and
// locations (which name an override's text) to the longer one.
inline constexpr size_t kMaxShownBytes = 80;
inline constexpr size_t kMaxShownPathBytes = 512;

// OK if `text` is a job spec's size and text: InvalidArgument "source: ..." if it is longer than
// kMaxSpecBytes ("N bytes, more than the 1 MiB a job spec may have"), or is not a text file (a
// NUL byte or invalid UTF-8, with its byte offset). Never echoes the text.
absl::Status CheckSpecText(absl::string_view text, absl::string_view source_name);

// `text` itself if it has at most `max` bytes, else its first ones (cut at a UTF-8 character
// boundary) followed by "… (N bytes)".
std::string Abbreviate(absl::string_view text, size_t max = kMaxShownBytes);
// `text` double-quoted and C-escaped, abbreviated the same way: "abc…" (5000 bytes).
std::string QuoteShown(absl::string_view text, size_t max = kMaxShownBytes);

// Parses one YAML document. CheckSpecText first, then the nodes as written are counted without
// building a tree (more than kMaxSpecNodes, or nested deeper than kMaxSpecDepth, is refused with
// the line and column where the limit was crossed); only then does yaml-cpp build the document.
// Errors (InvalidArgument) are "source:line:col: malformed YAML: ...", or name the key path for
// duplicate keys, non-scalar keys, bad merge keys, and documents nested deeper than kMaxSpecDepth
// or larger than kMaxExpandedNodes after alias expansion. An empty document gives a null node;
// more than one document is an error.
absl::StatusOr<SpecNode> ParseSpecYaml(absl::string_view text, absl::string_view source_name);

// Applies "key.path=VALUE" to `root` (a map or null): VALUE is parsed as a YAML scalar or flow
// value (bounded like a document: CheckSpecText and the node count), every node of it is located
// at the override, and it replaces whatever was at the path
// (a map value replaces the whole map). Missing intermediate maps are created. InvalidArgument
// "override TEXT: ..." for a missing '=', an empty path segment, a malformed value, or a path
// that runs through a scalar or list.
absl::Status ApplyOverride(absl::string_view override_text, absl::string_view source_name,
                           SpecNode* root);

// Free-form conversion (actors.<kind>.config): maps become objects, lists arrays, scalars
// null / bool / integer / number by ClassifyScalar, else strings.
nlohmann::json SpecToJson(const SpecNode& node);

// Shortest decimal text that reads back as exactly `value`, always with a '.' in the mantissa so
// every YAML reader (including YAML 1.1 ones) sees a float: 0.2, 1.0, 0.0003, 1.0e-08.
std::string FormatFloat(double value);

}  // namespace troupe::recipes::job_spec_internal

#endif  // TROUPE_RECIPES_JOB_SPEC_SPEC_TREE_H_
