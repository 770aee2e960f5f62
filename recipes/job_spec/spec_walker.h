// The walk over the job spec's keys: each section of the spec (model_section.cc, data_section.cc,
// ...) is written once, as a sequence of typed key calls on a Section, and that one walk does four
// things, by the walk's mode:
//
//   kRead      the YAML tree (spec_tree.h) into a JobSpec: types and ranges checked, every error
//              located ("job.yaml:7:6: algorithm.n: expected a positive integer, got "eight""),
//              unknown keys reported with a did-you-mean;
//   kCheck     the resolved spec's written keys that are not read refused: a key whose KeyOpts
//              say it is read only under a condition (`read_if`), with its reason;
//   kWrite     the resolved spec as JSON (ToYaml / ToJson): every key that is read, in walk order;
//   kDescribe  docs/job_spec.md: each key's path, type and range, default and doc.
//
//   void WalkRollout(Section& r, RolloutSpec& rollout) {
//     r.Double("temperature", &rollout.temperature, NonNegative(),
//              {.doc = "sampling temperature; 0 = greedy"});
//     ...
//     r.Finish();
//   }
//
// So a key is listed once: its reader is its writer, its documentation and the place its reading
// condition is stated. Rules between keys that are not "read only when" stay code (each section's
// Check* function, run once every key is valid on its own).
//
// Internal to //recipes/job_spec. Thread-safety: a Context and its Sections belong to one walk on
// one thread.
#ifndef TROUPE_RECIPES_JOB_SPEC_SPEC_WALKER_H_
#define TROUPE_RECIPES_JOB_SPEC_SPEC_WALKER_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "recipes/job_spec/job_recipes.h"
#include "recipes/job_spec/job_spec.h"
#include "recipes/job_spec/spec_names.h"
#include "recipes/job_spec/spec_tree.h"

namespace troupe::recipes::job_spec_internal {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// "a.b" + "c" = "a.b.c"; "" + "c" = "c".
std::string ChildPath(absl::string_view path, absl::string_view key);
// Values are shown abbreviated and quoted (a spec may hold a megabyte in one scalar); paths less
// so.
std::string Quote(absl::string_view s);
std::string AbbreviatePath(absl::string_view path);
std::string QuotePath(absl::string_view path);
// How a value is shown in "got ..." messages: null, a map, a list, "text", 8, "8" (a quoted
// string).
std::string Got(const SpecNode& node);
// The candidate closest to `word` if it is close enough to be a plausible typo, else "".
std::string Closest(absl::string_view word, const std::vector<std::string>& candidates);

// Inclusive/exclusive bounds on a number, and how to say them.
struct Range {
  double lo = -kInf;
  double hi = kInf;
  bool lo_open = false;
  bool hi_open = false;
  // Why the range is what it is, added to an error ("data-parallel training does not exist
  // yet"); nullptr = nothing to add.
  const char* why = nullptr;

  bool Contains(double v) const {
    return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  // "a positive integer", "a number in (0, 1]", "exactly 1", ...
  std::string Describe(bool integer) const;
};
inline Range Positive() { return {0, kInf, true, false}; }
inline Range NonNegative() { return {0, kInf, false, false}; }
inline Range AtLeast(double lo) { return {lo, kInf, false, false}; }
inline Range Closed(double lo, double hi) { return {lo, hi, false, false}; }
inline Range Open(double lo, double hi) { return {lo, hi, true, true}; }
inline Range LeftOpen(double lo, double hi) { return {lo, hi, true, false}; }
inline Range Because(Range range, const char* why) {
  range.why = why;
  return range;
}

// The errors of one parse, reported together in file order: unlocated first, then by line and
// column, then overrides in the order given (and, at one place, in the order found). Identical
// lines are reported once; more than 25 end with "(and N more)".
class Diagnostics {
 public:
  Diagnostics(std::string source_name, std::vector<std::string> overrides)
      : source_name_(std::move(source_name)), overrides_(std::move(overrides)) {}

  // "WHERE: path: message" ("WHERE: message" for an empty path).
  void Add(const SpecLoc& loc, absl::string_view path, absl::string_view message);
  bool empty() const { return items_.empty(); }
  // OK, or InvalidArgument with one line per error.
  absl::Status ToStatus() const;

 private:
  struct Item {
    int group;
    int64_t major;
    int64_t minor;
    int64_t order;
    std::string text;
  };
  std::string source_name_;
  std::vector<std::string> overrides_;
  std::vector<Item> items_;
  absl::flat_hash_set<std::string> seen_;
};

enum class WalkMode { kRead, kCheck, kWrite, kDescribe };

// An unknown key, reported once every section has been read (so that the suggestion can name a
// key of another section: "trainer.n: unknown key (did you mean algorithm.n?)").
struct UnknownKey {
  SpecLoc loc;
  std::string parent_path;
  std::string key;
  std::vector<std::string> siblings;  // The keys the section knows.
  std::string noun;                   // "key" or "actor kind".
};

// The state of one walk.
struct Context {
  Context(WalkMode mode, std::string source_name, std::vector<std::string> overrides)
      : mode(mode), source_name(source_name), diag(std::move(source_name), std::move(overrides)) {}

  // Location of `path`'s nearest written ancestor (or the path itself).
  SpecLoc LocOf(absl::string_view path) const;
  // Whether `path` was written (in the file or by an override).
  bool Written(absl::string_view path) const { return locs.contains(path); }
  // An error about `path`, located where it (or its nearest written ancestor) was written.
  void Add(absl::string_view path, absl::string_view message) {
    diag.Add(LocOf(path), path, message);
  }
  // kRead: the unknown keys queued by Section::Finish, as errors.
  void ReportUnknownKeys();

  WalkMode mode;
  std::string source_name;
  Diagnostics diag;
  // The spec being walked: kCheck and kWrite walk the resolved spec, whose recipe's rules decide
  // what is read.
  const JobSpec* spec = nullptr;
  // The rules of the spec's recipe (job_recipes.h), once its `recipe` key is walked (null before,
  // and for a name that is not registered): the resolved spec lists only the keys it reads
  // (kWrite), and a key it does not read is not required (kRead).
  std::shared_ptr<const JobRecipeRules> rules;
  // Whether the recipe reads (and the resolved spec lists) the key or section at `path`.
  bool RecipeReads(absl::string_view path) const { return RecipeReadsKey(rules.get(), path); }
  absl::flat_hash_map<std::string, SpecLoc> locs;  // Every written key path.
  std::vector<std::string> known_paths;            // Every key path the schema read.
  std::vector<UnknownKey> unknown;
  // kDescribe: the keys described, and the task whose parameters are described.
  std::vector<SpecKeyInfo>* described = nullptr;
  std::string describe_task;
  // kWrite: the output.
  nlohmann::ordered_json* out = nullptr;
};

// What a key call says besides its type and range.
struct KeyOpts {
  // The key's one-line meaning for docs/job_spec.md (required for every key: job_spec_docs_test).
  const char* doc = nullptr;
  // kRead: a missing key is an error ("missing required key"), if the recipe reads it.
  bool required = false;
  // String: "" (and a null value, read as "") is a value.
  bool allow_empty = false;
  // Whether the key is read given the rest of the spec (evaluated on the resolved spec). A key
  // that is not read is refused when written, with `unread_why` (kCheck), and not written to the
  // resolved spec (kWrite). For a section: every written key under it.
  bool read_if = true;
  std::string unread_why;
  // kWrite: whether the resolved spec writes the key when it is read (e.g. only when set); a key
  // the recipe does not read is not written either (Context::rules).
  bool write_if = true;
  // kDescribe: replace the type or default the reader reports (a default that depends on another
  // key, or a reader that takes more forms than its type says).
  const char* type = nullptr;
  const char* default_text = nullptr;
  // Double, kWrite: written as an integer (whole GPUs, bytes of memory).
  bool as_integer = false;
};

// One map of the spec, walked in the Context's mode. Each typed call names a key: kRead returns
// the written node when it was valid (else nullptr; the output keeps its value), kCheck refuses it
// when written and not read, kWrite writes it when read, kDescribe describes it. Finish() reports
// the keys nobody read (kRead) or adds the section to its parent's output (kWrite).
//
// A Section owns the output it writes; it must outlive the Sections made from it (Sub), which are
// finished before the parent writes its next key.
class Section {
 public:
  // The whole spec: `root` is the YAML tree in kRead (unused otherwise).
  static Section Root(Context* ctx, const SpecNode* root);

  Section(Section&&) = default;
  Section& operator=(Section&&) = delete;

  WalkMode mode() const { return ctx_->mode; }
  bool reading() const { return ctx_->mode == WalkMode::kRead; }
  Context* ctx() const { return ctx_; }
  const std::string& path() const { return path_; }
  // kRead: the section was written (possibly as an empty or null value).
  bool written() const { return node_ != nullptr; }

  const SpecNode* Int(absl::string_view key, int64_t* out, Range range, const KeyOpts& opts = {});
  const SpecNode* Double(absl::string_view key, double* out, Range range, const KeyOpts& opts = {});
  const SpecNode* Bool(absl::string_view key, bool* out, const KeyOpts& opts = {});
  // Any scalar, quoted or not; "" refused unless opts.allow_empty.
  const SpecNode* String(absl::string_view key, std::string* out, const KeyOpts& opts = {});
  // A non-empty string or a non-empty list of them (`train.jsonl` or `[a.jsonl, b.jsonl]`).
  const SpecNode* StringList(absl::string_view key, std::vector<std::string>* out,
                             const KeyOpts& opts = {});
  // The same for names; `name: x` is `name: [x]`.
  const SpecNode* NameList(absl::string_view key, std::vector<std::string>* out,
                           const KeyOpts& opts = {});
  // A list of numbers >= 0 (or one number).
  const SpecNode* NumberList(absl::string_view key, std::vector<double>* out,
                             const KeyOpts& opts = {});
  // A step range `[from, to]`: two whole numbers, 1 <= from <= to.
  const SpecNode* StepRange(absl::string_view key, int64_t* from, int64_t* to,
                            const KeyOpts& opts = {});
  // Bytes: a non-negative number, or a size with a unit ("512MiB", "4 GB", "1.5Gi").
  const SpecNode* Memory(absl::string_view key, double* out, const KeyOpts& opts = {});
  // A free-form map (or null = {}), converted to JSON.
  const SpecNode* Json(absl::string_view key, nlohmann::json* out, const KeyOpts& opts = {});
  // One of the names in `table`; `hints` add advice for likely mistakes ("ppo" -> "gae").
  template <typename E>
  const SpecNode* Enum(
      absl::string_view key, E* out, const NameTable<E>& table, const KeyOpts& opts = {},
      const std::vector<std::pair<absl::string_view, absl::string_view>>& hints = {});

  // The sub-section at `key`; kRead: a non-map value is an error and gives a silent, empty section.
  // opts.read_if / write_if apply to the section as a whole.
  Section Sub(absl::string_view key, const KeyOpts& opts = {});
  // kDescribe: describes `key`, whose reader is not one call (a map read key by key).
  void Describe(absl::string_view key, std::string type, std::string default_text,
                const KeyOpts& opts);

  // kRead helpers for readers that go beyond one typed call.
  // Marks `key` known; its entry if written.
  const SpecEntry* Take(absl::string_view key);
  // The written value of `key` without marking it (nullptr if none).
  const SpecNode* Peek(absl::string_view key) const;
  void Error(const SpecNode& at, absl::string_view key, absl::string_view message);
  // The written keys, in order.
  std::vector<std::string> Keys() const;
  // Reports `key` missing (unless the section itself was wrong).
  void Missing(absl::string_view key, absl::string_view message);
  // Treat every written key as known (when they cannot be checked, e.g. under an unknown task).
  void AcceptRest();

  // kRead: queues the keys nobody read as unknown (`noun` names them in the message); kWrite: adds
  // the section to its parent's output.
  void Finish(absl::string_view noun = "key");

 private:
  // What a key call does in this walk.
  enum class Step { kSkip, kRead, kWrite };

  Section(Context* ctx, const SpecNode* node, std::string path, SpecLoc loc, bool silent,
          Section* parent);

  // The common part of every key call: describes, refuses or decides whether to write the key.
  Step Visit(absl::string_view key, const KeyOpts& opts, std::string type,
             std::string default_text);
  // kWrite: the key's value in this section's output.
  void Put(absl::string_view key, nlohmann::ordered_json value);
  // kRead: the written value of `key`, reporting it missing if required.
  const SpecNode* Present(absl::string_view key, bool required);

  Context* ctx_;
  const SpecNode* node_;  // kRead
  std::string path_;
  SpecLoc loc_;
  bool silent_;
  std::vector<std::string> known_;
  // kCheck: why every written key of this section is refused ("" = it is read); kWrite: false when
  // nothing of the section is written.
  std::string unread_why_;
  bool active_ = true;
  // kWrite: the output (owned, so that a moved Section keeps it) and where it goes.
  std::unique_ptr<nlohmann::ordered_json> json_;
  Section* parent_ = nullptr;
};

// ------------------------------------------------------------------------------------------------

template <typename E>
const SpecNode* Section::Enum(
    absl::string_view key, E* out, const NameTable<E>& table, const KeyOpts& opts,
    const std::vector<std::pair<absl::string_view, absl::string_view>>& hints) {
  std::vector<std::string> names;
  std::string current;
  for (const auto& [name, value] : table) {
    names.emplace_back(name);
    if (value == *out) current = std::string(name);
  }
  const Step step = Visit(key, opts, absl::StrCat("one of ", absl::StrJoin(names, ", ")), current);
  if (step == Step::kWrite) Put(key, current);
  if (step != Step::kRead) return nullptr;
  const SpecNode* v = Present(key, false);
  if (v == nullptr) return nullptr;
  for (const auto& [name, value] : table) {
    if (v->kind == SpecNode::Kind::kScalar && v->scalar == name) {
      *out = value;
      return v;
    }
  }
  std::string message =
      absl::StrCat("expected one of ", absl::StrJoin(names, ", "), ", got ",
                   v->kind == SpecNode::Kind::kScalar ? Quote(v->scalar) : Got(*v));
  if (v->kind == SpecNode::Kind::kScalar) {
    bool hinted = false;
    for (const auto& [bad, hint] : hints) {
      if (v->scalar == bad) {
        absl::StrAppend(&message, " (", hint, ")");
        hinted = true;
      }
    }
    const std::string close = Closest(v->scalar, names);
    if (!hinted && !close.empty()) absl::StrAppend(&message, " (did you mean ", Quote(close), "?)");
  }
  Error(*v, key, message);
  return nullptr;
}

}  // namespace troupe::recipes::job_spec_internal

#endif  // TROUPE_RECIPES_JOB_SPEC_SPEC_WALKER_H_
