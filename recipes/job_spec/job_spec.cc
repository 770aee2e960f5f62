// Over ~900 lines on purpose: one reader per section of the job spec, each checking its keys with
// file:line errors and describing them for docs/job_spec.md; they share the reader helpers here.
#include "recipes/job_spec/job_spec.h"

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <system_error>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "models/model_config.h"
#include "models/weight_shapes.h"
#include "recipes/job_spec/job_tasks.h"
#include "recipes/job_spec/key_docs.h"
#include "recipes/job_spec/spec_tree.h"
#include "reward/reward_function.h"

namespace troupe::recipes {
namespace {

using job_spec_internal::Abbreviate;
using job_spec_internal::ClassifyPlainText;
using job_spec_internal::ClassifyScalar;
using job_spec_internal::FormatFloat;
using job_spec_internal::FormatLoc;
using job_spec_internal::kMaxShownPathBytes;
using job_spec_internal::ScalarValue;
using job_spec_internal::SpecEntry;
using job_spec_internal::SpecLoc;
using job_spec_internal::SpecNode;
using Kind = SpecNode::Kind;
using nlohmann::ordered_json;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kMaxReportedErrors = 25;

// ------------------------------------------------------------------------------------------------
// Enum spellings
// ------------------------------------------------------------------------------------------------

template <typename E>
using NameTable = std::vector<std::pair<absl::string_view, E>>;

// The spellings of an enum of proto/actor_config.proto, in declaration order: its values'
// (spelling) options, so each name is written once, beside the value it names.
template <typename E>
const NameTable<E>& Spellings() {
  static const NameTable<E>* const table = [] {
    auto* t = new NameTable<E>;
    const google::protobuf::EnumDescriptor* d = google::protobuf::GetEnumDescriptor<E>();
    for (int i = 0; i < d->value_count(); ++i) {
      const google::protobuf::EnumValueDescriptor* v = d->value(i);
      t->emplace_back(v->options().GetExtension(proto::spelling), static_cast<E>(v->number()));
    }
    return t;
  }();
  return *table;
}
const NameTable<AdvEstimator>& AdvEstimators() { return Spellings<AdvEstimator>(); }
const NameTable<KlType>& KlTypes() { return Spellings<KlType>(); }
const NameTable<LossAggMode>& LossAggModes() { return Spellings<LossAggMode>(); }
const NameTable<PolicyLoss>& PolicyLosses() { return Spellings<PolicyLoss>(); }
const NameTable<OffPolicyMode>& OffPolicyModes() { return Spellings<OffPolicyMode>(); }
const NameTable<LrSchedule>& LrSchedules() { return Spellings<LrSchedule>(); }
// algorithm.dpo.loss: the preference losses (none, the policy gradient, is recipe grpo's).
const NameTable<PreferenceLoss>& PreferenceLosses() {
  static const NameTable<PreferenceLoss>* const table = [] {
    auto* t = new NameTable<PreferenceLoss>;
    for (const auto& entry : Spellings<PreferenceLoss>()) {
      if (entry.second != proto::PREFERENCE_LOSS_NONE) t->push_back(entry);
    }
    return t;
  }();
  return *table;
}
const NameTable<KlCtrlType>& KlCtrlTypes() {
  static const NameTable<KlCtrlType> table = {{"fixed", KlCtrlType::kFixed},
                                              {"adaptive", KlCtrlType::kAdaptive}};
  return table;
}
const NameTable<bool>& Samplers() {
  static const NameTable<bool> table = {{"sequential", false}, {"prioritized", true}};
  return table;
}
const NameTable<Truncation>& Truncations() {
  static const NameTable<Truncation> table = {
      {"error", Truncation::kError}, {"left", Truncation::kLeft}, {"right", Truncation::kRight}};
  return table;
}

template <typename E>
absl::string_view NameOf(const NameTable<E>& table, E value) {
  for (const auto& [name, v] : table) {
    if (v == value) return name;
  }
  return "?";
}

// verl's names for keys that are spelled differently (or live elsewhere) here.
const std::vector<std::pair<absl::string_view, absl::string_view>>& VerlNames() {
  static const std::vector<std::pair<absl::string_view, absl::string_view>> table = {
      {"clip_ratio", "algorithm.clip_eps"},
      {"clip_ratio_low", "algorithm.clip_eps_low"},
      {"clip_ratio_high", "algorithm.clip_eps_high"},
      {"kl_loss_coef", "algorithm.kl.coef"},
      {"kl_loss_type", "algorithm.kl.type"},
      {"use_kl_loss", "algorithm.kl.coef (0 = off)"},
      {"norm_adv_by_std_in_grpo", "algorithm.norm_adv_by_std"},
      {"total_training_steps", "trainer.total_steps"},
      {"test_freq", "trainer.eval_every"},
      {"save_freq", "actors.checkpointer.every_steps"},
      {"max_actor_ckpt_to_keep", "actors.checkpointer.keep"},
      {"ppo_micro_batch_size_per_gpu", "trainer.micro_batch_size"},
      {"lr_warmup_steps", "trainer.warmup_steps"},
      {"warmup_style", "trainer.lr_schedule"},
      {"response_length", "data.max_response_length"},
      {"num_gpus", "actors.<kind>.resources.GPU"},
      {"num_cpus", "actors.<kind>.resources.CPU"},
  };
  return table;
}

// ------------------------------------------------------------------------------------------------
// Small helpers
// ------------------------------------------------------------------------------------------------

std::string ChildPath(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

// Values are shown abbreviated (a spec may hold a megabyte in one scalar); paths less so.
std::string AbbreviatePath(absl::string_view path) { return Abbreviate(path, kMaxShownPathBytes); }
std::string QuotePath(absl::string_view path) {
  return job_spec_internal::QuoteShown(path, kMaxShownPathBytes);
}
std::string Quote(absl::string_view s) { return job_spec_internal::QuoteShown(s); }

std::string Number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrCat(v);
}

// How a value is shown in "got ..." messages.
std::string Got(const SpecNode& node) {
  switch (node.kind) {
    case Kind::kNull:
      return "null";
    case Kind::kMap:
      return "a map";
    case Kind::kList:
      return "a list";
    case Kind::kScalar:
      break;
  }
  if (node.quoted) return absl::StrCat(Quote(node.scalar), " (a quoted string)");
  if (ClassifyPlainText(node.scalar).type == ScalarValue::Type::kString) return Quote(node.scalar);
  return Abbreviate(node.scalar);
}

size_t EditDistance(absl::string_view a_in, absl::string_view b_in) {
  const std::string a = absl::AsciiStrToLower(a_in);
  const std::string b = absl::AsciiStrToLower(b_in);
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The candidate closest to `word` if it is close enough to be a plausible typo, else "".
std::string Closest(absl::string_view word, const std::vector<std::string>& candidates) {
  constexpr size_t kLongestWord = 64;  // Longer words are no typo of a name (and cost O(n) each).
  if (word.size() > kLongestWord) return "";
  const size_t budget = word.size() <= 3 ? 1 : word.size() <= 8 ? 2 : 3;
  std::string best;
  size_t best_distance = budget + 1;
  for (const std::string& candidate : candidates) {
    const size_t d = EditDistance(word, candidate);
    if (d < best_distance || (d == best_distance && candidate < best)) {
      best = candidate;
      best_distance = d;
    }
  }
  return best_distance <= budget ? best : "";
}

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
  std::string Describe(bool integer) const {
    const char* noun = integer ? "integer" : "number";
    if (lo == 0 && hi == kInf) {
      return absl::StrCat(lo_open ? "a positive " : "a non-negative ", noun);
    }
    const char* article = integer ? "an " : "a ";
    if (lo == -kInf && hi == kInf) return absl::StrCat(article, noun);
    if (lo == hi) return absl::StrCat("exactly ", Number(lo));
    if (hi == kInf) return absl::StrCat(article, noun, lo_open ? " > " : " >= ", Number(lo));
    if (lo == -kInf) return absl::StrCat(article, noun, hi_open ? " < " : " <= ", Number(hi));
    return absl::StrCat(article, noun, " in ", lo_open ? "(" : "[", Number(lo), ", ", Number(hi),
                        hi_open ? ")" : "]");
  }
};

Range Positive() { return {0, kInf, true, false}; }
Range NonNegative() { return {0, kInf, false, false}; }
Range AtLeast(double lo) { return {lo, kInf, false, false}; }
Range Closed(double lo, double hi) { return {lo, hi, false, false}; }
Range Open(double lo, double hi) { return {lo, hi, true, true}; }
Range LeftOpen(double lo, double hi) { return {lo, hi, true, false}; }
Range Because(Range range, const char* why) {
  range.why = why;
  return range;
}
// "expected RANGE, got VALUE" and the range's reason.
std::string OutOfRange(const Range& range, bool integer, const std::string& got) {
  return absl::StrCat("expected ", range.Describe(integer), ", got ", got,
                      range.why != nullptr ? absl::StrCat(" (", range.why, ")") : "");
}

// ------------------------------------------------------------------------------------------------
// Diagnostics and the reader context
// ------------------------------------------------------------------------------------------------

class Diagnostics {
 public:
  Diagnostics(std::string source_name, std::vector<std::string> overrides)
      : source_name_(std::move(source_name)), overrides_(std::move(overrides)) {}

  void Add(const SpecLoc& loc, absl::string_view path, absl::string_view message) {
    std::string where = FormatLoc(loc, source_name_);
    std::string text = path.empty()
                           ? absl::StrCat(where, ": ", message)
                           : absl::StrCat(where, ": ", AbbreviatePath(path), ": ", message);
    if (!seen_.insert(text).second) return;
    // File order: unlocated first, then by line and column, then overrides in the order given.
    int group = 0;
    int64_t major = 0;
    int64_t minor = 0;
    if (!loc.override_text.empty()) {
      group = 2;
      major =
          std::find(overrides_.begin(), overrides_.end(), loc.override_text) - overrides_.begin();
    } else if (loc.line > 0) {
      group = 1;
      major = loc.line;
      minor = loc.column;
    }
    items_.push_back({group, major, minor, static_cast<int64_t>(items_.size()), std::move(text)});
  }

  bool empty() const { return items_.empty(); }

  absl::Status ToStatus() const {
    if (items_.empty()) return absl::OkStatus();
    std::vector<Item> sorted = items_;
    std::sort(sorted.begin(), sorted.end(), [](const Item& a, const Item& b) {
      return std::tie(a.group, a.major, a.minor, a.order) <
             std::tie(b.group, b.major, b.minor, b.order);
    });
    std::vector<std::string> lines;
    for (const Item& item : sorted) {
      if (static_cast<int>(lines.size()) == kMaxReportedErrors) {
        lines.push_back(absl::StrCat("(and ", sorted.size() - kMaxReportedErrors, " more)"));
        break;
      }
      lines.push_back(item.text);
    }
    return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
  }

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

// An unknown key, reported once every section has been read (so that the suggestion can name a
// key of another section: "trainer.n: unknown key (did you mean algorithm.n?)").
struct UnknownKey {
  SpecLoc loc;
  std::string parent_path;
  std::string key;
  std::vector<std::string> siblings;  // The keys the section knows.
  std::string noun;                   // "key" or "actor kind".
};

struct Context {
  Context(std::string source_name, std::vector<std::string> overrides)
      : source_name(source_name), diag(std::move(source_name), std::move(overrides)) {}

  // Location of `path`'s nearest written ancestor (or the path itself).
  SpecLoc LocOf(absl::string_view path) const {
    std::string p(path);
    while (true) {
      auto it = locs.find(p);
      if (it != locs.end()) return it->second;
      const size_t dot = p.rfind('.');
      if (dot == std::string::npos) return SpecLoc{};
      p.resize(dot);
    }
  }

  void ReportUnknownKeys() {
    for (const UnknownKey& u : unknown) {
      const std::string path = ChildPath(u.parent_path, u.key);
      std::string message = absl::StrCat("unknown ", u.noun);
      const std::string local = Closest(u.key, u.siblings);
      std::string elsewhere;
      for (const std::string& known : known_paths) {
        const size_t dot = known.rfind('.');
        if (dot != std::string::npos && known.substr(dot + 1) == u.key && known != path) {
          elsewhere = known;
          break;
        }
      }
      std::string verl;
      for (const auto& [name, ours] : VerlNames()) {
        if (name == u.key) verl = absl::StrCat("verl's ", name, " is ", ours, " here");
      }
      // The same key in another section is a stronger hint than a near-miss spelling here.
      if (!elsewhere.empty()) {
        absl::StrAppend(&message, " (did you mean ", elsewhere, "?)");
      } else if (!local.empty()) {
        absl::StrAppend(&message, " (did you mean ", Quote(local), "?)");
      } else if (!verl.empty()) {
        absl::StrAppend(&message, " (", verl, ")");
      }
      if (u.noun != "key") {
        std::vector<std::string> known = u.siblings;
        std::sort(known.begin(), known.end());
        absl::StrAppend(&message, "; known: ", absl::StrJoin(known, ", "));
      }
      diag.Add(u.loc, path, message);
    }
    unknown.clear();
  }

  std::string source_name;
  Diagnostics diag;
  absl::flat_hash_map<std::string, SpecLoc> locs;  // Every written key path.
  std::vector<std::string> known_paths;            // Every key path the schema read.
  std::vector<UnknownKey> unknown;
  // When set (DescribeSpecKeys), each reader adds its key's type, range and default here.
  std::vector<SpecKeyInfo>* described = nullptr;
};

// One map of the spec being read. Each typed reader marks its key as known, records where it was
// written, checks type and range (errors go to the context, the output keeps its default), and
// returns the written node when it was valid, else nullptr. Finish() reports the keys nobody read.
class Section {
 public:
  // `node`: the section's value (nullptr when absent; kNull counts as an empty map). `loc`:
  // where missing keys are reported (the section's key, or its nearest written ancestor).
  // `silent`: report no missing keys (the section itself was wrong).
  Section(Context* ctx, const SpecNode* node, std::string path, SpecLoc loc, bool silent = false)
      : ctx_(ctx), node_(node), path_(std::move(path)), loc_(std::move(loc)), silent_(silent) {}

  const std::string& path() const { return path_; }
  // The section was written (possibly as an empty or null value).
  bool written() const { return node_ != nullptr; }

  // For DescribeSpecKeys: `key` checks `type` and defaults to `default_value` (as YAML).
  void Note(absl::string_view key, std::string type, std::string default_value) {
    if (ctx_->described == nullptr) return;
    ctx_->described->push_back(
        {ChildPath(path_, key), std::move(type), std::move(default_value), ""});
  }

  // Marks `key` known; its entry if written.
  const SpecEntry* Take(absl::string_view key) {
    known_.emplace_back(key);
    const std::string path = ChildPath(path_, key);
    ctx_->known_paths.push_back(path);
    if (node_ == nullptr || node_->kind != Kind::kMap) return nullptr;
    const SpecEntry* entry = node_->Find(key);
    if (entry != nullptr) {
      const bool scalar = entry->value.kind == Kind::kScalar || entry->value.kind == Kind::kNull;
      ctx_->locs[path] = scalar ? entry->value.loc : entry->key_loc;
    }
    return entry;
  }

  void Error(const SpecNode& at, absl::string_view key, absl::string_view message) {
    ctx_->diag.Add(at.loc, ChildPath(path_, key), message);
  }

  const SpecNode* Int(absl::string_view key, int64_t* out, Range range, bool required = false) {
    Note(key, range.Describe(true), required ? "required" : absl::StrCat(*out));
    const SpecNode* v = Present(key, required);
    if (v == nullptr) return nullptr;
    const ScalarValue s = ClassifyScalar(*v);
    if (v->kind != Kind::kScalar || s.type != ScalarValue::Type::kInt ||
        !range.Contains(static_cast<double>(s.int_value))) {
      Error(*v, key, OutOfRange(range, /*integer=*/true, Got(*v)));
      return nullptr;
    }
    *out = s.int_value;
    return v;
  }

  const SpecNode* Double(absl::string_view key, double* out, Range range, bool required = false) {
    Note(key, range.Describe(false), required ? "required" : absl::StrFormat("%g", *out));
    const SpecNode* v = Present(key, required);
    if (v == nullptr) return nullptr;
    const ScalarValue s = ClassifyScalar(*v);
    const bool numeric = s.type == ScalarValue::Type::kInt || s.type == ScalarValue::Type::kFloat;
    if (v->kind != Kind::kScalar || !numeric || !range.Contains(s.float_value)) {
      Error(*v, key, OutOfRange(range, /*integer=*/false, Got(*v)));
      return nullptr;
    }
    *out = s.float_value;
    return v;
  }

  const SpecNode* Bool(absl::string_view key, bool* out) {
    Note(key, "true or false", *out ? "true" : "false");
    const SpecNode* v = Present(key, false);
    if (v == nullptr) return nullptr;
    const ScalarValue s = ClassifyScalar(*v);
    if (v->kind != Kind::kScalar || s.type != ScalarValue::Type::kBool) {
      Error(*v, key, absl::StrCat("expected true or false, got ", Got(*v)));
      return nullptr;
    }
    *out = s.bool_value;
    return v;
  }

  // Any scalar, quoted or not; empty strings are refused unless allow_empty, which also takes a
  // null (`tokenizer:`, or `model.tokenizer=` on the command line) as "".
  const SpecNode* String(absl::string_view key, std::string* out, bool required = false,
                         bool allow_empty = false) {
    Note(key, allow_empty ? "a string" : "a non-empty string",
         required       ? "required"
         : out->empty() ? "\"\""
                        : *out);
    const SpecNode* v = Present(key, required);
    if (v == nullptr) return nullptr;
    if (allow_empty && v->kind == Kind::kNull) {
      out->clear();
      return v;
    }
    if (v->kind != Kind::kScalar || (!allow_empty && v->scalar.empty())) {
      Error(*v, key,
            absl::StrCat("expected ", allow_empty ? "a string" : "a non-empty string", ", got ",
                         v->kind == Kind::kScalar ? Quote(v->scalar) : Got(*v)));
      return nullptr;
    }
    *out = v->scalar;
    return v;
  }

  // A non-empty string or a non-empty list of them (`train.jsonl` or `[a.jsonl, b.jsonl]`).
  const SpecNode* StringList(absl::string_view key, std::vector<std::string>* out) {
    Note(key, "a path or a list of paths", out->empty() ? "[]" : absl::StrJoin(*out, ", "));
    const SpecNode* v = Present(key, false);
    if (v == nullptr) return nullptr;
    if (!NonEmptyScalars(*v, out)) {
      Error(*v, key,
            absl::StrCat("expected a path or a non-empty list of paths, got ",
                         v->kind == Kind::kScalar ? Quote(v->scalar) : Got(*v)));
      return nullptr;
    }
    return v;
  }

  // The same for names; `name: x` is `name: [x]`.
  const SpecNode* NameList(absl::string_view key, std::vector<std::string>* out) {
    Note(key, "a name or a list of names", "[]");
    const SpecNode* v = Present(key, false);
    if (v == nullptr) return nullptr;
    if (!NonEmptyScalars(*v, out)) {
      Error(*v, key, absl::StrCat("expected a name or a non-empty list of names, got ", Got(*v)));
      return nullptr;
    }
    return v;
  }

  // `v` as a list of non-empty strings: a non-empty scalar, or a non-empty list of them. Sets
  // *out only when it is one.
  static bool NonEmptyScalars(const SpecNode& v, std::vector<std::string>* out) {
    std::vector<std::string> values;
    if (v.kind == Kind::kScalar && !v.scalar.empty()) {
      values.push_back(v.scalar);
    } else if (v.kind == Kind::kList && !v.items.empty()) {
      for (const SpecNode& item : v.items) {
        if (item.kind != Kind::kScalar || item.scalar.empty()) return false;
        values.push_back(item.scalar);
      }
    } else {
      return false;
    }
    *out = std::move(values);
    return true;
  }

  // A list of numbers >= 0 (or one number).
  const SpecNode* NumberList(absl::string_view key, std::vector<double>* out) {
    Note(key, "a list of numbers >= 0", "1 each");
    const SpecNode* v = Present(key, false);
    if (v == nullptr) return nullptr;
    std::vector<const SpecNode*> items;
    if (v->kind == Kind::kScalar) items.push_back(v);
    if (v->kind == Kind::kList) {
      for (const SpecNode& item : v->items) items.push_back(&item);
    }
    std::vector<double> values;
    bool ok = !items.empty();
    for (const SpecNode* item : items) {
      const ScalarValue sv = ClassifyScalar(*item);
      const bool numeric = item->kind == Kind::kScalar && (sv.type == ScalarValue::Type::kInt ||
                                                           sv.type == ScalarValue::Type::kFloat);
      ok = ok && numeric && sv.float_value >= 0 && std::isfinite(sv.float_value);
      values.push_back(sv.float_value);
    }
    if (!ok) {
      Error(*v, key, absl::StrCat("expected a non-empty list of numbers >= 0, got ", Got(*v)));
      return nullptr;
    }
    *out = std::move(values);
    return v;
  }

  // A step range `[from, to]`: two whole numbers, 1 <= from <= to.
  const SpecNode* StepRange(absl::string_view key, int64_t* from, int64_t* to) {
    Note(key, "[from, to], whole numbers, 1 <= from <= to", "none");
    const SpecNode* v = Present(key, false);
    if (v == nullptr) return nullptr;
    int64_t values[2] = {0, 0};
    bool ok = v->kind == Kind::kList && v->items.size() == 2;
    for (size_t i = 0; ok && i < 2; ++i) {
      const ScalarValue sv = ClassifyScalar(v->items[i]);
      ok = v->items[i].kind == Kind::kScalar && sv.type == ScalarValue::Type::kInt;
      values[i] = sv.int_value;
    }
    if (!ok || values[0] < 1 || values[0] > values[1]) {
      Error(*v, key,
            absl::StrCat("expected [from, to], whole numbers with 1 <= from <= to, got ", Got(*v)));
      return nullptr;
    }
    *from = values[0];
    *to = values[1];
    return v;
  }

  // One of the names in `table`; `hints` add advice for likely mistakes ("ppo" -> "gae").
  template <typename E>
  const SpecNode* Enum(
      absl::string_view key, E* out, const NameTable<E>& table,
      const std::vector<std::pair<absl::string_view, absl::string_view>>& hints = {}) {
    if (ctx_->described != nullptr) {
      std::vector<std::string> all;
      std::string current;
      for (const auto& [name, value] : table) {
        all.emplace_back(name);
        if (value == *out) current = std::string(name);
      }
      Note(key, absl::StrCat("one of ", absl::StrJoin(all, ", ")), current);
    }
    const SpecNode* v = Present(key, false);
    if (v == nullptr) return nullptr;
    std::vector<std::string> names;
    for (const auto& [name, value] : table) {
      if (v->kind == Kind::kScalar && v->scalar == name) {
        *out = value;
        return v;
      }
      names.emplace_back(name);
    }
    std::string message = absl::StrCat("expected one of ", absl::StrJoin(names, ", "), ", got ",
                                       v->kind == Kind::kScalar ? Quote(v->scalar) : Got(*v));
    if (v->kind == Kind::kScalar) {
      bool hinted = false;
      for (const auto& [bad, hint] : hints) {
        if (v->scalar == bad) {
          absl::StrAppend(&message, " (", hint, ")");
          hinted = true;
        }
      }
      const std::string close = Closest(v->scalar, names);
      if (!hinted && !close.empty())
        absl::StrAppend(&message, " (did you mean ", Quote(close), "?)");
    }
    Error(*v, key, message);
    return nullptr;
  }

  // Bytes: a non-negative number, or a size with a unit ("512MiB", "4 GB", "1.5Gi").
  const SpecNode* Memory(absl::string_view key, double* out) {
    const SpecNode* v = Present(key, false);
    if (v == nullptr) return nullptr;
    std::optional<double> bytes;
    if (v->kind == Kind::kScalar) {
      const ScalarValue s = ClassifyScalar(*v);
      if (s.type == ScalarValue::Type::kInt || s.type == ScalarValue::Type::kFloat) {
        bytes = s.float_value;
      } else if (s.type == ScalarValue::Type::kString) {
        bytes = ParseSize(v->scalar);
      }
    }
    if (!bytes.has_value() || !(*bytes >= 0) || !std::isfinite(*bytes)) {
      Error(*v, key,
            absl::StrCat("expected a non-negative number of bytes or a size such as \"512MiB\" or "
                         "\"4GB\", got ",
                         Got(*v)));
      return nullptr;
    }
    *out = std::round(*bytes);
    return v;
  }

  // A free-form map (or null = {}), converted to JSON.
  const SpecNode* Json(absl::string_view key, nlohmann::json* out) {
    Note(key, "a map (free-form)", out->dump());
    const SpecNode* v = Present(key, false);
    if (v == nullptr) return nullptr;
    if (v->kind != Kind::kMap && v->kind != Kind::kNull) {
      Error(*v, key, absl::StrCat("expected a map, got ", Got(*v)));
      return nullptr;
    }
    *out = v->kind == Kind::kNull ? nlohmann::json::object() : job_spec_internal::SpecToJson(*v);
    return v;
  }

  // The sub-section at `key`; a non-map value is an error and gives a silent, empty section.
  Section Sub(absl::string_view key) {
    const SpecEntry* entry = Take(key);
    const std::string path = ChildPath(path_, key);
    if (entry == nullptr) return Section(ctx_, nullptr, path, loc_, silent_);
    if (entry->value.kind != Kind::kMap && entry->value.kind != Kind::kNull) {
      Error(entry->value, key, absl::StrCat("expected a map, got ", Got(entry->value)));
      return Section(ctx_, nullptr, path, entry->key_loc, /*silent=*/true);
    }
    return Section(ctx_, &entry->value, path, entry->key_loc, silent_);
  }

  // The written keys, in order.
  std::vector<std::string> Keys() const {
    std::vector<std::string> keys;
    if (node_ != nullptr) {
      for (const SpecEntry& entry : node_->entries) keys.push_back(entry.key);
    }
    return keys;
  }

  // Reports `key` missing (unless the section itself was wrong).
  void Missing(absl::string_view key, absl::string_view message) {
    if (!silent_) ctx_->diag.Add(loc_, ChildPath(path_, key), message);
  }

  // Treat every written key as known (when they cannot be checked, e.g. under an unknown task).
  void AcceptRest() {
    for (const std::string& key : Keys()) known_.push_back(key);
  }

  // Queues the keys nobody read as unknown. `noun` names them in the message.
  void Finish(absl::string_view noun = "key") {
    if (node_ == nullptr || node_->kind != Kind::kMap) return;
    for (const SpecEntry& entry : node_->entries) {
      if (std::find(known_.begin(), known_.end(), entry.key) != known_.end()) continue;
      ctx_->unknown.push_back({entry.key_loc, path_, entry.key, known_, std::string(noun)});
    }
  }

 private:
  // The written, non-null-checked value of `key`, reporting it missing if required.
  const SpecNode* Present(absl::string_view key, bool required) {
    const SpecEntry* entry = Take(key);
    if (entry == nullptr) {
      if (required && !silent_) ctx_->diag.Add(loc_, ChildPath(path_, key), "missing required key");
      return nullptr;
    }
    return &entry->value;
  }

  static std::optional<double> ParseSize(absl::string_view text) {
    static const std::vector<std::pair<absl::string_view, double>> units = {
        {"KiB", 1024.0},
        {"MiB", 1024.0 * 1024},
        {"GiB", 1024.0 * 1024 * 1024},
        {"TiB", 1024.0 * 1024 * 1024 * 1024},
        {"Ki", 1024.0},
        {"Mi", 1024.0 * 1024},
        {"Gi", 1024.0 * 1024 * 1024},
        {"Ti", 1024.0 * 1024 * 1024 * 1024},
        {"KB", 1e3},
        {"MB", 1e6},
        {"GB", 1e9},
        {"TB", 1e12},
        {"K", 1e3},
        {"M", 1e6},
        {"G", 1e9},
        {"T", 1e12},
        {"B", 1.0}};
    text = absl::StripAsciiWhitespace(text);
    for (const auto& [unit, scale] : units) {
      if (!absl::EndsWith(text, unit)) continue;
      const absl::string_view number =
          absl::StripAsciiWhitespace(text.substr(0, text.size() - unit.size()));
      const ScalarValue v = ClassifyPlainText(number);
      if (v.type != ScalarValue::Type::kInt && v.type != ScalarValue::Type::kFloat) return {};
      return v.float_value * scale;
    }
    return {};
  }

  Context* ctx_;
  const SpecNode* node_;
  std::string path_;
  SpecLoc loc_;
  bool silent_;
  std::vector<std::string> known_;
};

// ------------------------------------------------------------------------------------------------
// The schema
// ------------------------------------------------------------------------------------------------

bool IsRunName(absl::string_view name) {
  if (name.empty() || name == "." || name == "..") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

std::string JoinPath(absl::string_view dir, absl::string_view leaf) {
  if (dir.empty()) return std::string(leaf);
  if (absl::EndsWith(dir, "/")) return absl::StrCat(dir, leaf);
  return absl::StrCat(dir, "/", leaf);
}

// What was written, for the defaults that depend on other keys.
struct Written {
  bool logging_dir = false;
  bool checkpointer_dir = false;
  bool sft_dir = false;
  bool clip_eps_low = false;
  bool clip_eps_high = false;
  bool max_new_tokens = false;
};

class JobSpecReader {
 public:
  JobSpecReader(Context* ctx, JobSpec* spec) : ctx_(ctx), spec_(spec) {}

  void Read(const SpecNode& root) {
    Section top(ctx_, &root, "", SpecLoc{});
    if (const SpecNode* v = top.String("name", &spec_->name, /*required=*/true)) {
      if (!IsRunName(spec_->name)) {
        top.Error(*v, "name",
                  absl::StrCat("expected letters, digits, '.', '_' or '-' (it names the run's "
                               "directories), got ",
                               Quote(spec_->name)));
      }
    }
    if (const SpecNode* v = top.String("recipe", &spec_->recipe)) {
      const std::vector<std::string> names = JobRecipeNames();
      if (std::find(names.begin(), names.end(), spec_->recipe) == names.end()) {
        std::string message = absl::StrCat("unknown recipe ", Quote(spec_->recipe));
        const std::string close = Closest(spec_->recipe, names);
        if (!close.empty()) absl::StrAppend(&message, " (did you mean ", close, "?)");
        absl::StrAppend(&message, "; registered recipes: ", absl::StrJoin(names, ", "));
        top.Error(*v, "recipe", message);
      }
    }
    Section model = top.Sub("model");
    ReadModel(model);
    Section data = top.Sub("data");
    ReadData(data);
    Section reward = top.Sub("reward");
    ReadReward(reward);
    Section algorithm = top.Sub("algorithm");
    ReadAlgorithm(algorithm);
    Section async = top.Sub("async");
    async.Int("max_staleness", &spec_->async.max_staleness, NonNegative());
    async.Finish();
    Section rollout = top.Sub("rollout");
    ReadRollout(rollout);
    Section trainer = top.Sub("trainer");
    ReadTrainer(trainer);
    Section sft = top.Sub("sft");
    ReadSft(sft);
    Section actors = top.Sub("actors");
    ReadActors(actors);
    Section logging = top.Sub("logging");
    written_.logging_dir = logging.String("dir", &spec_->logging.dir) != nullptr;
    logging.Bool("tensorboard", &spec_->logging.tensorboard);
    logging.Int("log_every", &spec_->logging.log_every, Positive());
    logging.Finish();
    // Top-level "x-..." keys are free (for anchors, as in Docker Compose): x-cpu: &cpu {CPU: 1}.
    for (const std::string& key : top.Keys()) {
      if (absl::StartsWith(key, "x-")) top.Take(key);
    }
    top.Finish();
    ctx_->ReportUnknownKeys();
  }

  // Defaults that depend on other keys.
  void Resolve() {
    JobSpec& s = *spec_;
    if (!written_.logging_dir) s.logging.dir = JoinPath("runs", s.name);
    if (!written_.checkpointer_dir) s.actors.checkpointer.dir = JoinPath(s.logging.dir, "ckpt");
    if (!written_.sft_dir) s.sft.dir = JoinPath(s.logging.dir, "sft");
    if (!written_.clip_eps_low) s.algorithm.clip_eps_low = s.algorithm.clip_eps;
    if (!written_.clip_eps_high) s.algorithm.clip_eps_high = s.algorithm.clip_eps;
    if (!written_.max_new_tokens) s.rollout.max_new_tokens = s.data.max_response_length;
    // A reward model is served by the RewardModel actor unless another type is named; a judge
    // by the Judge actor.
    if (!s.reward.model.empty() && !ctx_->locs.contains("actors.reward.type")) {
      s.actors.reward.type = "RewardModel";
    }
    if (!s.reward.judge.model.empty() && !ctx_->locs.contains("actors.reward.type")) {
      s.actors.reward.type = "Judge";
    }
    // Recipe ppo runs GAE with a critic unless told otherwise; gae brings its critic.
    if (s.recipe == "ppo" && !ctx_->locs.contains("algorithm.adv_estimator")) {
      s.algorithm.adv_estimator = proto::ADV_ESTIMATOR_GAE;
    }
    // Recipe dpo: a group whose rewards are all equal gives no pair; dynamic sampling replaces it.
    if (s.recipe == "dpo" && !ctx_->locs.contains("algorithm.filter_groups.enable")) {
      s.algorithm.filter_groups.enable = true;
    }
    if (s.algorithm.adv_estimator == proto::ADV_ESTIMATOR_GAE &&
        !ctx_->locs.contains("actors.critic.replicas")) {
      s.actors.critic.replicas = 1;
    }
  }

  // Rules between keys; run only when every key was valid on its own.
  void CrossCheck() {
    const JobSpec& s = *spec_;
    CheckDataAndReward();
    const AlgorithmSpec& a = s.algorithm;
    if (s.recipe == "dpo" && a.n < 2) {
      Add("algorithm.n", absl::StrCat("recipe dpo needs at least 2 responses per prompt to form "
                                      "a pair, got ",
                                      a.n));
    } else if ((a.adv_estimator == proto::ADV_ESTIMATOR_GRPO ||
                a.adv_estimator == proto::ADV_ESTIMATOR_RLOO) &&
               a.n < 2) {
      Add("algorithm.n", absl::StrCat("adv_estimator ", AdvEstimatorName(a.adv_estimator),
                                      " needs at least 2 responses per prompt to form a group, "
                                      "got ",
                                      a.n));
    }
    if (a.adv_estimator == proto::ADV_ESTIMATOR_GAE && s.actors.critic.replicas == 0) {
      Add("actors.critic.replicas",
          "adv_estimator gae needs a critic: set actors.critic.replicas >= 1");
    }
    if (a.adv_estimator != proto::ADV_ESTIMATOR_GAE && s.actors.critic.replicas > 0) {
      Add("actors.critic.replicas", absl::StrCat("a critic is only used with adv_estimator gae, "
                                                 "not ",
                                                 AdvEstimatorName(a.adv_estimator)));
    }
    if (s.reward.model.empty() && ctx_->locs.contains("reward.model_weight")) {
      Add("reward.model_weight", "weighs reward.model's score, and no reward.model is set");
    }
    CheckJudge(s);
    const OverlongBufferSpec& o = s.reward.overlong_buffer;
    if (o.enable && (o.len <= 0 || o.len >= s.data.max_response_length)) {
      Add("reward.overlong_buffer.len",
          absl::StrCat("must be in [1, data.max_response_length) = [1, ",
                       s.data.max_response_length, ") when overlong_buffer is enabled, got ",
                       o.len));
    }
    if (s.recipe == "dpo" && s.actors.reference.replicas == 0) {
      Add("actors.reference.replicas",
          "recipe dpo's losses are against a reference model: replicas must be >= 1");
    } else if (a.kl.coef > 0 && s.actors.reference.replicas == 0) {
      Add("actors.reference.replicas",
          "algorithm.kl.coef > 0 needs a reference model (replicas >= 1); set kl.coef: 0 to run "
          "without one");
    }
    if (a.use_kl_in_reward && s.actors.reference.replicas == 0) {
      Add("actors.reference.replicas",
          "algorithm.use_kl_in_reward needs a reference model (replicas >= 1)");
    }
    if (!a.use_kl_in_reward) {
      for (const char* key : {"algorithm.kl_ctrl.type", "algorithm.kl_ctrl.kl_coef",
                              "algorithm.kl_ctrl.target_kl", "algorithm.kl_ctrl.horizon"}) {
        if (ctx_->locs.contains(key)) {
          Add(key,
              "the KL controller sets the KL in the reward: it needs "
              "algorithm.use_kl_in_reward: true");
        }
      }
    }
    if (ctx_->locs.contains("algorithm.kl_ctrl.target_kl") &&
        a.kl_ctrl.type != KlCtrlType::kAdaptive) {
      Add("algorithm.kl_ctrl.target_kl", "only the adaptive controller has a target");
    }
    if (ctx_->locs.contains("algorithm.kl_ctrl.horizon") &&
        a.kl_ctrl.type != KlCtrlType::kAdaptive) {
      Add("algorithm.kl_ctrl.horizon", "only the adaptive controller has a horizon");
    }
    if (ctx_->locs.contains("data.gen_batch_size") && s.async.max_staleness == 0) {
      Add("data.gen_batch_size",
          "sets the prompts of a generation round of an asynchronous run (async.max_staleness "
          ">= 1); a synchronous step generates exactly the groups its batch lacks");
    }
    if (ctx_->locs.contains("data.gen_batch_size") && !s.data.preference_files.empty()) {
      Add("data.gen_batch_size", "offline dpo generates nothing: its pairs are read");
    }
    if (s.trainer.mini_batch_size > s.data.train_batch_size) {
      Add("trainer.mini_batch_size",
          absl::StrCat("larger than a step's batch (data.train_batch_size = ",
                       s.data.train_batch_size, " prompts), got ", s.trainer.mini_batch_size));
    }
    if (s.trainer.critic_warmup > 0 && s.trainer.critic_warmup >= s.trainer.total_steps) {
      Add("trainer.critic_warmup",
          absl::StrCat("must be less than trainer.total_steps (", s.trainer.total_steps, "), got ",
                       s.trainer.critic_warmup));
    }
    if (s.rollout.max_new_tokens > s.data.max_response_length) {
      Add("rollout.max_new_tokens",
          absl::StrCat(s.rollout.max_new_tokens, " exceeds data.max_response_length (",
                       s.data.max_response_length, ")"));
    }
    if (s.trainer.warmup_steps > 0 && s.trainer.warmup_steps >= s.trainer.total_steps &&
        s.recipe != "sft") {
      Add("trainer.warmup_steps",
          absl::StrCat("must be less than trainer.total_steps (", s.trainer.total_steps, "), got ",
                       s.trainer.warmup_steps));
    }
    if (s.trainer.profile_to > s.trainer.total_steps) {
      Add("trainer.profile_steps",
          absl::StrCat("profiles steps up to ", s.trainer.profile_to,
                       ", beyond trainer.total_steps (", s.trainer.total_steps, ")"));
    }
    const int64_t step_sequences = s.data.train_batch_size * a.n;
    if (s.trainer.micro_batch_size > step_sequences) {
      Add("trainer.micro_batch_size",
          absl::StrCat("larger than a step's batch (data.train_batch_size x algorithm.n = ",
                       step_sequences, "), got ", s.trainer.micro_batch_size));
    }
    // (Recipes rm and sft have no warm start; their own checks refuse init: sft.)
    if (s.model.init == ModelInit::kSft && s.recipe != "rm" && s.recipe != "sft") {
      if (s.sft.warmup_steps > 0 && s.sft.warmup_steps >= s.sft.steps) {
        Add("sft.warmup_steps", absl::StrCat("must be less than sft.steps (", s.sft.steps,
                                             "), got ", s.sft.warmup_steps));
      }
      std::optional<TaskDefinition> task = FindJobTask(s.data.task);
      if (!s.data.train_files.empty()) {
        if (s.sft.train_files.empty()) {
          Add("model.init",
              "the sft warm start of a dataset job trains on sft.train_files (JSONL prompt + "
              "response records), which is not set; set it, or use init: random or a "
              "checkpoint path");
        }
        if (s.model.tokenizer.empty()) {
          Add("model.init",
              "the sft warm start of a dataset job needs model.tokenizer (a tokenizer.json; "
              "`troupe tokenizer train` makes one)");
        }
        if (s.data.val_files.empty()) {
          Add("model.init",
              "the sft warm start of a dataset job evaluates on data.val_files, which is not set");
        }
      } else if (task.has_value() && !task->supports_sft) {
        Add("model.init",
            absl::StrCat("the sft warm start needs supervised data, which task ", s.data.task,
                         " has not; use init: random or a checkpoint path"));
      }
    }
  }

 private:
  void CheckDataAndReward() {
    const DataSpec& d = spec_->data;
    const RewardSpec& r = spec_->reward;
    const SftSpec& sft = spec_->sft;
    // Recipe sft reads sft.* and data.val_files itself; its own check refuses the rest.
    const bool sft_recipe = spec_->recipe == "sft";
    if (sft_recipe) {
      // (CheckSftSpec, recipes/sft/sft_job_recipe.h.)
    } else if (!d.train_files.empty() ? spec_->model.init != ModelInit::kSft : !d.task.empty()) {
      for (const char* key : {"sft.train_files", "sft.prompt_key", "sft.response_key"}) {
        if (!ctx_->locs.contains(key)) continue;
        Add(key, d.train_files.empty()
                     ? "a task's sft warm start trains on the task's own supervised data"
                     : "read by the sft warm start only, and model.init is not sft");
      }
    } else if (sft.train_files.empty()) {
      for (const char* key : {"sft.prompt_key", "sft.response_key"}) {
        if (ctx_->locs.contains(key))
          Add(key, "reads records of sft.train_files, which is not set");
      }
    }
    const bool offline_pairs = !d.preference_files.empty();
    if (offline_pairs && spec_->recipe != "dpo") {
      Add("data.preference_files",
          absl::StrCat("offline preference pairs are recipe dpo's (this job's recipe is ",
                       spec_->recipe, "; recipe rm reads its pairs from data.train_files)"));
    }
    if (offline_pairs && d.task.empty()) {
      Add("data.preference_files",
          "offline dpo evaluates on a task's held-out problems: set data.task (a dataset job's "
          "data.train_files / val_files cannot be combined with it yet)");
    }
    if (spec_->recipe != "rm" && !(offline_pairs && spec_->recipe == "dpo")) {
      for (const char* key : {"data.chosen_key", "data.rejected_key"}) {
        if (ctx_->locs.contains(key)) {
          Add(key, absl::StrCat("names a preference record's response, read by recipe rm and by "
                                "recipe dpo's data.preference_files only (this job's recipe is ",
                                spec_->recipe, ")"));
        }
      }
    }
    if (!d.task.empty() && !d.train_files.empty()) {
      Add("data.train_files", "give data.task or data.train_files, not both");
    }
    if (!d.sampler.prioritized && ctx_->locs.contains("data.sampler.uniform_weight")) {
      Add("data.sampler.uniform_weight", "weighs the draws of data.sampler.type: prioritized only");
    }
    if (offline_pairs && ctx_->locs.contains("data.sampler.type")) {
      Add("data.sampler.type",
          "offline dpo trains on data.preference_files in their own order; the sampler picks "
          "prompts to generate from");
    }
    if (d.train_files.empty() && !sft_recipe) {
      for (const char* key :
           {"data.val_files", "data.prompt_key", "data.answer_key", "data.data_source_key",
            "data.default_data_source", "data.shuffle", "data.filter_overlong_prompts",
            "data.truncation", "data.chat_template", "data.chosen_key", "data.rejected_key"}) {
        const absl::string_view k = key;
        if (offline_pairs && (k == "data.prompt_key" || k == "data.chosen_key" ||
                              k == "data.rejected_key" || k == "data.truncation")) {
          continue;  // read with data.preference_files
        }
        if (ctx_->locs.contains(key)) {
          Add(key,
              "reads records of data.train_files, which is not set (a task's prompts are "
              "its own)");
        }
      }
    }
    const std::vector<std::string> registered = reward::RewardNames();
    for (size_t i = 0; i < r.names.size(); ++i) {
      const std::string& name = r.names[i];
      if (std::find(registered.begin(), registered.end(), name) != registered.end()) continue;
      std::string message = absl::StrCat("unknown reward ", Quote(name));
      const std::string close = Closest(name, registered);
      if (!close.empty()) absl::StrAppend(&message, " (did you mean ", Quote(close), "?)");
      absl::StrAppend(&message, "; registered rewards: ", absl::StrJoin(registered, ", "));
      Add("reward.name", message);
    }
    for (size_t i = 0; i < r.names.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (r.names[i] == r.names[j])
          Add("reward.name", absl::StrCat(r.names[i], " is named twice"));
      }
    }
    if (!r.weights.empty() && r.weights.size() != r.names.size()) {
      Add("reward.weights", absl::StrCat(r.weights.size(), " weights for ", r.names.size(),
                                         " reward names; give one per name"));
    }
    for (const auto& [name, value] : r.config.items()) {
      if (std::find(r.names.begin(), r.names.end(), name) == r.names.end() &&
          !(r.names.empty() &&
            std::find(registered.begin(), registered.end(), name) != registered.end())) {
        Add("reward.config",
            absl::StrCat("config for ", Quote(name), ", which is not ",
                         r.names.empty() ? "a registered reward" : "in reward.name"));
      } else if (!value.is_object()) {
        Add("reward.config", absl::StrCat("the config of ", name, " must be a map"));
      }
    }
  }

  void Add(absl::string_view path, absl::string_view message) {
    ctx_->diag.Add(ctx_->LocOf(path), path, message);
  }

  void ReadModel(Section& m) {
    ModelSpec& model = spec_->model;
    std::string init = "sft";
    // Recipe sft trains from scratch: random weights unless told otherwise (its check refuses
    // the rest).
    if (spec_->recipe == "sft") model.init = ModelInit::kRandom;
    if (m.String("init", &init) != nullptr) {
      if (init == "sft") {
        model.init = ModelInit::kSft;
      } else if (init == "random") {
        model.init = ModelInit::kRandom;
      } else {
        model.init = ModelInit::kPath;
        model.init_path = init;
      }
    }
    // With an init path, "" (what ToYaml writes when it is not set) means "the init dir's".
    m.String("config", &model.config, /*required=*/model.init != ModelInit::kPath,
             /*allow_empty=*/model.init == ModelInit::kPath);
    m.String("tokenizer", &model.tokenizer, false, /*allow_empty=*/true);
    m.Finish();
  }

  void ReadData(Section& d) {
    DataSpec& data = spec_->data;
    const SpecNode* task_node = d.String("task", &data.task);
    d.StringList("train_files", &data.train_files);
    d.StringList("val_files", &data.val_files);
    d.String("prompt_key", &data.prompt_key);
    d.String("answer_key", &data.answer_key);
    d.String("data_source_key", &data.data_source_key);
    d.String("default_data_source", &data.default_data_source, false, /*allow_empty=*/true);
    d.StringList("preference_files", &data.preference_files);
    d.String("chosen_key", &data.chosen_key);
    d.String("rejected_key", &data.rejected_key);
    d.Bool("shuffle", &data.shuffle);
    d.Bool("filter_overlong_prompts", &data.filter_overlong_prompts);
    d.Enum("truncation", &data.truncation, Truncations());
    d.String("chat_template", &data.chat_template, false, /*allow_empty=*/true);
    Section sampler = d.Sub("sampler");
    sampler.Enum("type", &data.sampler.prioritized, Samplers());
    sampler.Double("uniform_weight", &data.sampler.uniform_weight, LeftOpen(0, 1));
    sampler.Finish();
    d.Int("train_batch_size", &data.train_batch_size, Positive());
    d.Int("gen_batch_size", &data.gen_batch_size, Positive());
    d.Int("max_prompt_length", &data.max_prompt_length, Positive());
    d.Int("max_response_length", &data.max_response_length, Positive());
    d.Int("heldout_size", &data.heldout_size, Positive());
    d.Int("seed", &data.seed, NonNegative());
    if (task_node == nullptr) {
      // Recipe sft reads its records from sft.train_files: neither key is required.
      const bool sft = spec_->recipe == "sft";
      if (data.train_files.empty() && !sft) {
        d.Missing("task", "missing required key (or data.train_files for a dataset)");
      }
      if (data.train_files.empty() && !sft) {
        d.AcceptRest();  // Task-specific keys cannot be checked without a valid task.
      } else {
        d.Finish();
      }
      return;
    }
    std::optional<TaskDefinition> task = FindJobTask(data.task);
    if (!task.has_value()) {
      std::vector<std::string> names = JobTaskNames();
      std::string message = absl::StrCat("unknown task ", Quote(data.task));
      const std::string close = Closest(data.task, names);
      if (!close.empty()) absl::StrAppend(&message, " (did you mean ", Quote(close), "?)");
      absl::StrAppend(&message, "; registered tasks: ", absl::StrJoin(names, ", "));
      d.Error(*task_node, "task", message);
      d.AcceptRest();
      return;
    }
    data.task_params = nlohmann::json::object();
    for (const TaskParam& param : task->params) {
      nlohmann::json value = param.default_value;
      const Range range = Closed(param.min, param.max);
      switch (param.type) {
        case TaskParam::Type::kInt: {
          int64_t v = value.get<int64_t>();
          d.Int(param.name, &v, range);
          value = v;
          break;
        }
        case TaskParam::Type::kNumber: {
          double v = value.get<double>();
          d.Double(param.name, &v, range);
          value = v;
          break;
        }
        case TaskParam::Type::kBool: {
          bool v = value.get<bool>();
          d.Bool(param.name, &v);
          value = v;
          break;
        }
        case TaskParam::Type::kString: {
          std::string v = value.get<std::string>();
          d.String(param.name, &v, false, /*allow_empty=*/true);
          value = v;
          break;
        }
      }
      data.task_params[param.name] = value;
    }
    d.Finish();
  }

  // reward.judge's keys together (each key's own type was checked when read).
  void CheckJudge(const JobSpec& s) {
    const JudgeSpec& j = s.reward.judge;
    if (j.model.empty()) {
      for (const auto& [key, where] : ctx_->locs) {
        if (absl::StartsWith(key, "reward.judge.")) {
          Add(key, "configures reward.judge.model, which is not set");
          return;
        }
      }
      return;
    }
    if (!s.reward.model.empty()) {
      Add("reward.judge.model",
          "the reward role runs one actor: a reward model (reward.model) or a judge, not both");
    }
    if (j.template_text.empty()) {
      Add("reward.judge.template",
          "the judge needs its prompt template, e.g. \"{prompt}{response}|\" ({prompt}, "
          "{response}, {reference} are filled in per sample)");
    }
    if (j.score == !j.verdicts.empty()) {
      Add(j.score ? "reward.judge.score" : "reward.judge.verdicts",
          "give exactly one of verdicts (label: value, e.g. {Y: 1, N: 0}) and score ({min, max})");
    }
    for (auto it = j.verdicts.begin(); it != j.verdicts.end(); ++it) {
      if (!it.value().is_number()) {
        Add(absl::StrCat("reward.judge.verdicts.", it.key()),
            absl::StrCat("expected the verdict's reward (a number), got ", it.value().dump()));
      }
    }
    if (j.score && !(j.score_min < j.score_max)) {
      Add("reward.judge.score",
          absl::StrCat("min (", j.score_min, ") must be below max (", j.score_max, ")"));
    }
  }

  void ReadReward(Section& r) {
    RewardSpec& reward = spec_->reward;
    r.NameList("name", &reward.names);
    r.NumberList("weights", &reward.weights);
    r.Json("config", &reward.config);
    r.String("model", &reward.model);
    r.Double("model_weight", &reward.model_weight, NonNegative());
    Section judge = r.Sub("judge");
    JudgeSpec& j = reward.judge;
    judge.String("model", &j.model);
    judge.String("template", &j.template_text);
    judge.Json("verdicts", &j.verdicts);
    Section score = judge.Sub("score");
    j.score = score.Double("min", &j.score_min, AtLeast(-kInf)) != nullptr;
    j.score = (score.Double("max", &j.score_max, AtLeast(-kInf)) != nullptr) || j.score;
    score.Finish();
    judge.String("marker", &j.marker);
    judge.Int("max_new_tokens", &j.max_new_tokens, Positive());
    judge.Int("slots", &j.slots, Positive());
    judge.Bool("add_bos", &j.add_bos);
    judge.Double("weight", &j.weight, AtLeast(-kInf));
    judge.Finish();
    Section overlong = r.Sub("overlong_buffer");
    overlong.Bool("enable", &reward.overlong_buffer.enable);
    overlong.Int("len", &reward.overlong_buffer.len, Positive());
    overlong.Double("penalty_factor", &reward.overlong_buffer.penalty_factor, NonNegative());
    overlong.Finish();
    r.Finish();
  }

  void ReadAlgorithm(Section& a) {
    AlgorithmSpec& alg = spec_->algorithm;
    a.Enum("adv_estimator", &alg.adv_estimator, AdvEstimators(),
           {{"ppo", "PPO's estimator is called gae, as in verl"}});
    a.Int("n", &alg.n, Positive());
    a.Bool("norm_adv_by_std", &alg.norm_adv_by_std);
    a.Double("clip_eps", &alg.clip_eps, Open(0, 1));
    written_.clip_eps_low = a.Double("clip_eps_low", &alg.clip_eps_low, Open(0, 1)) != nullptr;
    written_.clip_eps_high = a.Double("clip_eps_high", &alg.clip_eps_high, Open(0, 1)) != nullptr;
    Section kl = a.Sub("kl");
    kl.Double("coef", &alg.kl.coef, NonNegative());
    kl.Enum("type", &alg.kl.type, KlTypes(),
            {{"low_var_kl", "verl's low_var_kl is k3"},
             {"kl", "verl's kl is k1"},
             {"mse", "verl's mse is k2"}});
    kl.Finish();
    a.Double("entropy_coeff", &alg.entropy_coeff, NonNegative());
    a.Enum("loss_agg_mode", &alg.loss_agg_mode, LossAggModes());
    a.Enum("policy_loss", &alg.policy_loss, PolicyLosses());
    Section filter = a.Sub("filter_groups");
    filter.Bool("enable", &alg.filter_groups.enable);
    filter.Int("max_num_gen_batches", &alg.filter_groups.max_num_gen_batches, NonNegative());
    filter.Finish();
    a.Bool("use_kl_in_reward", &alg.use_kl_in_reward);
    Section ctrl = a.Sub("kl_ctrl");
    ctrl.Enum("type", &alg.kl_ctrl.type, KlCtrlTypes());
    ctrl.Double("kl_coef", &alg.kl_ctrl.kl_coef, NonNegative());
    ctrl.Double("target_kl", &alg.kl_ctrl.target_kl, Positive());
    ctrl.Int("horizon", &alg.kl_ctrl.horizon, Positive());
    ctrl.Finish();
    a.Double("gamma", &alg.gamma, Closed(0, 1));
    a.Double("lam", &alg.lam, Closed(0, 1));
    Section off_policy = a.Sub("off_policy");
    off_policy.Enum("correction", &alg.off_policy.correction, OffPolicyModes());
    off_policy.Double("cap", &alg.off_policy.cap, Positive());
    off_policy.Finish();
    Section dpo = a.Sub("dpo");
    dpo.Enum("loss", &alg.dpo.loss, PreferenceLosses());
    dpo.Double("beta", &alg.dpo.beta, Positive());
    dpo.Double("label_smoothing", &alg.dpo.label_smoothing, Range{0, 0.5, false, true});
    dpo.Double("desirable_weight", &alg.dpo.desirable_weight, Positive());
    dpo.Double("undesirable_weight", &alg.dpo.undesirable_weight, Positive());
    dpo.Finish();
    a.Finish();
  }

  void ReadRollout(Section& r) {
    RolloutSpec& rollout = spec_->rollout;
    r.Double("temperature", &rollout.temperature, NonNegative());
    r.Double("top_p", &rollout.top_p, LeftOpen(0, 1));
    r.Int("top_k", &rollout.top_k, NonNegative());
    written_.max_new_tokens =
        r.Int("max_new_tokens", &rollout.max_new_tokens, Positive()) != nullptr;
    r.Finish();
  }

  void ReadTrainer(Section& t) {
    TrainerSpec& trainer = spec_->trainer;
    // Recipe sft's schedule is the sft section's (of trainer it reads the seed).
    t.Int("total_steps", &trainer.total_steps, Positive(), /*required=*/spec_->recipe != "sft");
    t.Int("seed", &trainer.seed, NonNegative());
    t.Double("lr", &trainer.lr, Positive());
    t.Enum("lr_schedule", &trainer.lr_schedule, LrSchedules());
    t.Int("warmup_steps", &trainer.warmup_steps, NonNegative());
    t.Double("min_lr_ratio", &trainer.min_lr_ratio, Closed(0, 1));
    t.Double("weight_decay", &trainer.weight_decay, NonNegative());
    t.Double("grad_clip", &trainer.grad_clip, Positive());
    t.Int("micro_batch_size", &trainer.micro_batch_size, NonNegative());
    t.Int("ppo_epochs", &trainer.ppo_epochs, Positive());
    t.Int("mini_batch_size", &trainer.mini_batch_size, NonNegative());
    t.Int("critic_warmup", &trainer.critic_warmup, NonNegative());
    t.Int("eval_every", &trainer.eval_every, NonNegative());
    t.StepRange("profile_steps", &trainer.profile_from, &trainer.profile_to);
    t.Finish();
  }

  void ReadSft(Section& s) {
    SftSpec& sft = spec_->sft;
    s.Int("steps", &sft.steps, Positive());
    s.Int("batch_size", &sft.batch_size, Positive());
    s.Double("lr", &sft.lr, Positive());
    s.Int("warmup_steps", &sft.warmup_steps, NonNegative());
    s.Double("min_lr_ratio", &sft.min_lr_ratio, Closed(0, 1));
    s.Double("weight_decay", &sft.weight_decay, NonNegative());
    s.Double("grad_clip", &sft.grad_clip, Positive());
    s.Int("eval_every", &sft.eval_every, Positive());
    s.Double("target_accuracy", &sft.target_accuracy, Closed(0, 1));
    written_.sft_dir = s.String("dir", &sft.dir) != nullptr;
    s.StringList("train_files", &sft.train_files);
    s.String("prompt_key", &sft.prompt_key);
    s.String("response_key", &sft.response_key);
    s.Finish();
  }

  void ReadActors(Section& a) {
    ActorsSpec& actors = spec_->actors;
    ReadActorGroup(a, "rollout", &actors.rollout, Positive());
    ReadActorGroup(a, "reward", &actors.reward, Positive());
    ReadActorGroup(a, "reference", &actors.reference, NonNegative());
    // One trainer and at most one critic: the recipes train each model on one actor.
    constexpr char kOneRank[] = "data-parallel training across replicas does not exist yet";
    ReadActorGroup(a, "trainer", &actors.trainer, Because(Closed(1, 1), kOneRank));
    ReadActorGroup(a, "critic", &actors.critic, Because(Closed(0, 1), kOneRank));
    ReadActorGroup(a, "replay_buffer", &actors.replay_buffer, Closed(1, 1));
    Section checkpointer =
        ReadActorGroup(a, "checkpointer", &actors.checkpointer, Closed(1, 1), /*finish=*/false);
    written_.checkpointer_dir = checkpointer.String("dir", &actors.checkpointer.dir) != nullptr;
    checkpointer.Int("every_steps", &actors.checkpointer.every_steps, NonNegative());
    checkpointer.Int("keep", &actors.checkpointer.keep, NonNegative());
    checkpointer.Finish();
    a.Finish("actor kind");
  }

  Section ReadActorGroup(Section& actors, absl::string_view kind, ActorGroupSpec* group,
                         Range replicas, bool finish = true) {
    Section g = actors.Sub(kind);
    g.String("type", &group->type);
    g.String("library", &group->library);
    g.Int("replicas", &group->replicas, replicas);
    if (ctx_->described != nullptr) {
      std::vector<std::string> amounts;
      for (const auto& [name, amount] : group->resources.AsMap()) {
        amounts.push_back(absl::StrCat(name, ": ", amount));
      }
      g.Note("resources", "a map: CPU, GPU, memory, custom: {NAME: amount}",
             absl::StrCat("{", absl::StrJoin(amounts, ", "), "}"));
    }
    Section r = g.Sub("resources");
    if (r.written()) ReadResources(r, &group->resources);
    g.Int("max_restarts", &group->max_restarts, AtLeast(-1));
    g.Json("config", &group->config);
    if (finish) g.Finish();
    return g;
  }

  // A written resources map is the whole request: what it does not name is 0.
  void ReadResources(Section& r, ActorResources* out) {
    *out = ActorResources{};
    r.Double("CPU", &out->cpu, NonNegative());
    if (const SpecNode* v = r.Double("GPU", &out->gpu, NonNegative())) {
      if (out->gpu != std::floor(out->gpu)) {
        r.Error(*v, "GPU", absl::StrCat("expected a whole number of GPUs, got ", Got(*v)));
        out->gpu = 0;
      }
    }
    r.Memory("memory", &out->memory);
    Section custom = r.Sub("custom");
    for (const std::string& name : custom.Keys()) {
      if (name == "CPU" || name == "GPU" || name == "memory") {
        const SpecEntry* entry = custom.Take(name);
        custom.Error(entry->value, name,
                     absl::StrCat("a built-in resource: set ", r.path(), ".", name, " instead"));
        continue;
      }
      double amount = 0;
      if (custom.Double(name, &amount, NonNegative()) != nullptr) out->custom[name] = amount;
    }
    custom.Finish();
    r.Finish();
  }

  Context* ctx_;
  JobSpec* spec_;
  Written written_;
};

// ------------------------------------------------------------------------------------------------
// Output
// ------------------------------------------------------------------------------------------------

ordered_json ActorGroupJson(const ActorGroupSpec& group) {
  ordered_json j;
  j["type"] = group.type;
  if (!group.library.empty()) j["library"] = group.library;
  j["replicas"] = group.replicas;
  ordered_json resources;
  resources["CPU"] = group.resources.cpu;
  resources["GPU"] = static_cast<int64_t>(group.resources.gpu);
  resources["memory"] = static_cast<int64_t>(group.resources.memory);
  if (!group.resources.custom.empty()) {
    ordered_json custom = ordered_json::object();
    for (const auto& [name, amount] : group.resources.custom) custom[name] = amount;
    resources["custom"] = custom;
  }
  j["resources"] = resources;
  j["max_restarts"] = group.max_restarts;
  j["config"] = ordered_json::parse(group.config.dump());
  return j;
}

// Sub-objects are built whole and then added: ordered_json keeps its members in a vector, so a
// reference to one would not survive adding the next.
ordered_json ToJsonValue(const JobSpec& s) {
  ordered_json j;
  j["name"] = s.name;
  j["recipe"] = s.recipe;

  ordered_json model;
  model["config"] = s.model.config;
  model["init"] = s.model.init == ModelInit::kPath ? s.model.init_path
                                                   : std::string(ModelInitName(s.model.init));
  model["tokenizer"] = s.model.tokenizer;
  j["model"] = std::move(model);

  // Recipe rm trains in the driver: it reads no reward, algorithm, async, rollout, sft or actors
  // keys (and refuses them when written), so its resolved spec has none.
  const bool rm = s.recipe == "rm";
  ordered_json data;
  const DataSpec& d = s.data;
  if (!d.task.empty()) data["task"] = d.task;
  if (!d.preference_files.empty()) {
    data["preference_files"] = d.preference_files;
    data["prompt_key"] = d.prompt_key;
    data["chosen_key"] = d.chosen_key;
    data["rejected_key"] = d.rejected_key;
    data["truncation"] = TruncationName(d.truncation);
  }
  if (!d.train_files.empty()) {
    data["train_files"] = d.train_files;
    if (!d.val_files.empty()) data["val_files"] = d.val_files;
    data["prompt_key"] = d.prompt_key;
    if (!rm) {
      data["answer_key"] = d.answer_key;
      data["data_source_key"] = d.data_source_key;
      data["default_data_source"] = d.default_data_source;
    } else {
      data["chosen_key"] = d.chosen_key;
      data["rejected_key"] = d.rejected_key;
    }
    data["shuffle"] = d.shuffle;
    if (!rm) data["filter_overlong_prompts"] = d.filter_overlong_prompts;
    data["truncation"] = TruncationName(d.truncation);
    data["chat_template"] = d.chat_template;
  }
  if (d.sampler.prioritized) {
    data["sampler"] = {{"type", "prioritized"}, {"uniform_weight", d.sampler.uniform_weight}};
  }
  data["train_batch_size"] = s.data.train_batch_size;
  if (s.data.gen_batch_size > 0) data["gen_batch_size"] = s.data.gen_batch_size;
  data["max_prompt_length"] = s.data.max_prompt_length;
  data["max_response_length"] = s.data.max_response_length;
  if (!rm) data["heldout_size"] = s.data.heldout_size;
  data["seed"] = s.data.seed;
  // In the task's declaration order.
  if (std::optional<TaskDefinition> task = FindJobTask(s.data.task)) {
    for (const TaskParam& param : task->params) {
      if (s.data.task_params.contains(param.name)) {
        data[param.name] = ordered_json::parse(s.data.task_params.at(param.name).dump());
      }
    }
  }
  j["data"] = std::move(data);
  if (!s.reward.names.empty() || !s.reward.config.empty() || s.reward.overlong_buffer.enable ||
      !s.reward.model.empty() || !s.reward.judge.model.empty()) {
    ordered_json reward;
    if (!s.reward.names.empty()) reward["name"] = s.reward.names;
    if (!s.reward.weights.empty()) reward["weights"] = s.reward.weights;
    reward["config"] = ordered_json::parse(s.reward.config.dump());
    if (!s.reward.model.empty()) {
      reward["model"] = s.reward.model;
      reward["model_weight"] = s.reward.model_weight;
    }
    if (const JudgeSpec& jd = s.reward.judge; !jd.model.empty()) {
      ordered_json judge;
      judge["model"] = jd.model;
      judge["template"] = jd.template_text;
      if (jd.score) {
        judge["score"] = {{"min", jd.score_min}, {"max", jd.score_max}};
      } else {
        judge["verdicts"] = ordered_json::parse(jd.verdicts.dump());
      }
      if (!jd.marker.empty()) judge["marker"] = jd.marker;
      judge["max_new_tokens"] = jd.max_new_tokens;
      judge["slots"] = jd.slots;
      judge["add_bos"] = jd.add_bos;
      judge["weight"] = jd.weight;
      reward["judge"] = std::move(judge);
    }
    if (s.reward.overlong_buffer.enable) {
      ordered_json overlong;
      overlong["enable"] = true;
      overlong["len"] = s.reward.overlong_buffer.len;
      overlong["penalty_factor"] = s.reward.overlong_buffer.penalty_factor;
      reward["overlong_buffer"] = std::move(overlong);
    }
    j["reward"] = std::move(reward);
  }

  const AlgorithmSpec& a = s.algorithm;
  ordered_json algorithm;
  algorithm["adv_estimator"] = AdvEstimatorName(a.adv_estimator);
  algorithm["n"] = a.n;
  algorithm["norm_adv_by_std"] = a.norm_adv_by_std;
  algorithm["clip_eps"] = a.clip_eps;
  algorithm["clip_eps_low"] = a.clip_eps_low;
  algorithm["clip_eps_high"] = a.clip_eps_high;
  ordered_json kl;
  kl["coef"] = a.kl.coef;
  kl["type"] = KlTypeName(a.kl.type);
  algorithm["kl"] = std::move(kl);
  algorithm["entropy_coeff"] = a.entropy_coeff;
  algorithm["loss_agg_mode"] = LossAggModeName(a.loss_agg_mode);
  algorithm["policy_loss"] = PolicyLossName(a.policy_loss);
  ordered_json filter_groups;
  filter_groups["enable"] = a.filter_groups.enable;
  filter_groups["max_num_gen_batches"] = a.filter_groups.max_num_gen_batches;
  algorithm["filter_groups"] = std::move(filter_groups);
  algorithm["use_kl_in_reward"] = a.use_kl_in_reward;
  if (a.use_kl_in_reward) {
    ordered_json ctrl;
    ctrl["type"] = KlCtrlTypeName(a.kl_ctrl.type);
    ctrl["kl_coef"] = a.kl_ctrl.kl_coef;
    if (a.kl_ctrl.type == KlCtrlType::kAdaptive) {
      ctrl["target_kl"] = a.kl_ctrl.target_kl;
      ctrl["horizon"] = a.kl_ctrl.horizon;
    }
    algorithm["kl_ctrl"] = std::move(ctrl);
  }
  // gamma: GAE's and REINFORCE++'s discount; lam: GAE's. Nothing else reads them.
  if (a.adv_estimator == proto::ADV_ESTIMATOR_GAE ||
      a.adv_estimator == proto::ADV_ESTIMATOR_REINFORCE_PLUS_PLUS) {
    algorithm["gamma"] = a.gamma;
  }
  if (a.adv_estimator == proto::ADV_ESTIMATOR_GAE) algorithm["lam"] = a.lam;
  ordered_json off_policy;
  off_policy["correction"] = OffPolicyModeName(a.off_policy.correction);
  off_policy["cap"] = a.off_policy.cap;
  algorithm["off_policy"] = std::move(off_policy);
  if (s.recipe == "dpo") {
    ordered_json dpo;
    dpo["loss"] = PreferenceLossName(a.dpo.loss);
    dpo["beta"] = a.dpo.beta;
    if (a.dpo.loss == proto::PREFERENCE_LOSS_DPO) dpo["label_smoothing"] = a.dpo.label_smoothing;
    if (a.dpo.loss == proto::PREFERENCE_LOSS_KTO) {
      dpo["desirable_weight"] = a.dpo.desirable_weight;
      dpo["undesirable_weight"] = a.dpo.undesirable_weight;
    }
    algorithm["dpo"] = std::move(dpo);
  }
  j["algorithm"] = std::move(algorithm);

  ordered_json async;
  async["max_staleness"] = s.async.max_staleness;
  j["async"] = std::move(async);

  ordered_json rollout;
  rollout["temperature"] = s.rollout.temperature;
  rollout["top_p"] = s.rollout.top_p;
  rollout["top_k"] = s.rollout.top_k;
  rollout["max_new_tokens"] = s.rollout.max_new_tokens;
  j["rollout"] = std::move(rollout);

  const TrainerSpec& t = s.trainer;
  ordered_json trainer;
  trainer["total_steps"] = t.total_steps;
  trainer["seed"] = t.seed;
  trainer["lr"] = t.lr;
  trainer["lr_schedule"] = LrScheduleName(t.lr_schedule);
  trainer["warmup_steps"] = t.warmup_steps;
  trainer["min_lr_ratio"] = t.min_lr_ratio;
  trainer["weight_decay"] = t.weight_decay;
  trainer["grad_clip"] = t.grad_clip;
  trainer["micro_batch_size"] = t.micro_batch_size;
  if (!rm) {
    trainer["ppo_epochs"] = t.ppo_epochs;
    trainer["mini_batch_size"] = t.mini_batch_size;
  }
  if (s.recipe == "ppo") trainer["critic_warmup"] = t.critic_warmup;
  trainer["eval_every"] = t.eval_every;
  if (t.profile_from > 0 && !rm) trainer["profile_steps"] = {t.profile_from, t.profile_to};
  j["trainer"] = std::move(trainer);

  ordered_json sft;
  sft["steps"] = s.sft.steps;
  sft["batch_size"] = s.sft.batch_size;
  sft["lr"] = s.sft.lr;
  sft["warmup_steps"] = s.sft.warmup_steps;
  sft["min_lr_ratio"] = s.sft.min_lr_ratio;
  sft["weight_decay"] = s.sft.weight_decay;
  sft["grad_clip"] = s.sft.grad_clip;
  sft["eval_every"] = s.sft.eval_every;
  sft["target_accuracy"] = s.sft.target_accuracy;
  sft["dir"] = s.sft.dir;
  if (!s.sft.train_files.empty()) {
    sft["train_files"] = s.sft.train_files;
    sft["prompt_key"] = s.sft.prompt_key;
    sft["response_key"] = s.sft.response_key;
  }
  j["sft"] = std::move(sft);

  ordered_json actors;
  for (const auto& [kind, group] : ActorGroups(s)) {
    ordered_json g = ActorGroupJson(*group);
    if (kind == "checkpointer") {
      g["dir"] = s.actors.checkpointer.dir;
      g["every_steps"] = s.actors.checkpointer.every_steps;
      g["keep"] = s.actors.checkpointer.keep;
    }
    actors[kind] = std::move(g);
  }
  j["actors"] = std::move(actors);

  ordered_json logging;
  logging["dir"] = s.logging.dir;
  logging["tensorboard"] = s.logging.tensorboard;
  logging["log_every"] = s.logging.log_every;
  j["logging"] = std::move(logging);
  if (rm) {
    for (const char* section : {"reward", "algorithm", "async", "rollout", "sft", "actors"}) {
      j.erase(section);
    }
  }
  if (s.recipe == "sft") {
    // Recipe sft trains in the driver on sft.train_files: of the data and trainer sections it
    // reads the held-out keys and the seed only (recipes/sft/sft_job_recipe.h), and it refuses
    // the rest when written.
    for (const char* section : {"reward", "algorithm", "async", "rollout", "actors"}) {
      j.erase(section);
    }
    ordered_json sft_data;
    if (!s.data.val_files.empty()) sft_data["val_files"] = s.data.val_files;
    sft_data["heldout_size"] = s.data.heldout_size;
    if (s.locations.count("data.max_response_length") > 0) {
      sft_data["max_response_length"] = s.data.max_response_length;
    }
    if (!s.data.chat_template.empty()) sft_data["chat_template"] = s.data.chat_template;
    j["data"] = std::move(sft_data);
    ordered_json sft_trainer;
    sft_trainer["seed"] = s.trainer.seed;
    j["trainer"] = std::move(sft_trainer);
    j["logging"].erase("tensorboard");
  }
  return j;
}

// Strings that a YAML reader would take for something else are double-quoted (also YAML 1.1's
// yes/no/on/off, for readers such as PyYAML).
void EmitString(const std::string& s, YAML::Emitter* out) {
  static const absl::flat_hash_set<std::string> yaml11_bools = {"yes", "no", "on", "off"};
  if (ClassifyPlainText(s).type != ScalarValue::Type::kString ||
      yaml11_bools.contains(absl::AsciiStrToLower(s))) {
    *out << YAML::DoubleQuoted << s;
  } else {
    *out << s;
  }
}

// Small maps of scalars below the top-level sections are written on one line:
// `resources: {CPU: 0.5, GPU: 0, memory: 0}`, `kl: {coef: 0.01, type: k3}`.
bool IsSmallScalarMap(const ordered_json& j) {
  return j.size() <= 4 && std::all_of(j.begin(), j.end(), [](const ordered_json& v) {
           return !v.is_object() && !v.is_array();
         });
}

void EmitYaml(const ordered_json& j, int depth, YAML::Emitter* out) {
  switch (j.type()) {
    case ordered_json::value_t::object:
      if (j.empty() || (depth >= 2 && IsSmallScalarMap(j))) *out << YAML::Flow;
      *out << YAML::BeginMap;
      for (auto it = j.begin(); it != j.end(); ++it) {
        *out << YAML::Key;
        EmitString(it.key(), out);
        *out << YAML::Value;
        EmitYaml(it.value(), depth + 1, out);
      }
      *out << YAML::EndMap;
      return;
    case ordered_json::value_t::array:
      *out << YAML::Flow << YAML::BeginSeq;
      for (const ordered_json& item : j) EmitYaml(item, depth + 1, out);
      *out << YAML::EndSeq;
      return;
    case ordered_json::value_t::string:
      EmitString(j.get<std::string>(), out);
      return;
    case ordered_json::value_t::boolean:
      *out << (j.get<bool>() ? "true" : "false");
      return;
    case ordered_json::value_t::number_integer:
      *out << std::to_string(j.get<int64_t>());
      return;
    case ordered_json::value_t::number_unsigned:
      *out << std::to_string(j.get<uint64_t>());
      return;
    case ordered_json::value_t::number_float:
      *out << FormatFloat(j.get<double>());
      return;
    default:
      *out << YAML::Null;
      return;
  }
}

std::string FormatAmount(absl::string_view resource, double amount) {
  if (resource == "memory") {
    if (amount >= 1024.0 * 1024 * 1024) {
      return absl::StrCat(amount / (1024.0 * 1024 * 1024), " GiB");
    }
    return absl::StrCat(amount / (1024.0 * 1024), " MiB");
  }
  return absl::StrCat(amount);
}

// A free-form or task key whose string value is a path: dir, path, file, or *_dir, *_path, *_file
// (the actors read "dir", "model_dir" and "resume_dir" as paths); a list of strings is a list of
// paths under the plural names (dirs, paths, files, *_dirs, *_paths, *_files).
bool IsPathKeyName(absl::string_view key, bool plural = false) {
  for (absl::string_view name : {"dir", "path", "file"}) {
    const std::string n = absl::StrCat(name, plural ? "s" : "");
    if (key == n || absl::EndsWith(key, absl::StrCat("_", n))) return true;
  }
  return false;
}

// Every string under `j` whose key IsPathKeyName (or in a list whose key is a plural one), with
// its dotted key path.
void CollectConfigPaths(const nlohmann::json& j, const std::string& path,
                        std::vector<std::pair<std::string, std::string>>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      const std::string child = ChildPath(path, it.key());
      if (it.value().is_string() && IsPathKeyName(it.key())) {
        out->emplace_back(child, it.value().get<std::string>());
      } else if (it.value().is_array() && IsPathKeyName(it.key(), /*plural=*/true)) {
        for (size_t i = 0; i < it.value().size(); ++i) {
          const nlohmann::json& v = it.value()[i];
          const std::string element = absl::StrCat(child, "[", i, "]");
          if (v.is_string()) {
            out->emplace_back(element, v.get<std::string>());
          } else {
            CollectConfigPaths(v, element, out);
          }
        }
      } else {
        CollectConfigPaths(it.value(), child, out);
      }
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      CollectConfigPaths(j[i], absl::StrCat(path, "[", i, "]"), out);
    }
  }
}

// `path` made absolute against `base` with symlinks and ".." resolved as far as it exists.
std::filesystem::path Resolve(const std::string& path, const std::string& base) {
  namespace fs = std::filesystem;
  fs::path p(path);
  if (p.is_relative()) p = fs::path(base) / p;
  std::error_code ec;
  fs::path resolved = fs::weakly_canonical(p, ec);
  if (ec) resolved = p;
  return resolved.lexically_normal();
}

// Whether `path` is `root` or lies below it (both resolved).
bool IsWithin(const std::filesystem::path& path, const std::filesystem::path& root) {
  auto p = path.begin();
  for (auto r = root.begin(); r != root.end(); ++r, ++p) {
    if (r->empty()) continue;  // a trailing separator
    if (p == path.end() || *p != *r) return false;
  }
  return true;
}

// The model config at `path`, checked by what the file is, never echoing what it holds: larger
// than a config.json can be, binary, or not JSON is refused as such.
absl::StatusOr<models::ModelConfig> ReadModelConfig(const std::string& path) {
  constexpr size_t kMaxModelConfigBytes = size_t{1} << 20;
  constexpr size_t kMaxMessageBytes = kMaxShownPathBytes + 300;
  const std::string shown = AbbreviatePath(path);
  // A regular file only: a FIFO is refused, never waited on.
  absl::StatusOr<std::string> read = ReadRegularFile(path, kMaxModelConfigBytes);
  if (absl::IsOutOfRange(read.status())) {
    return absl::InvalidArgumentError(absl::StrCat(
        shown, ": larger than ", kMaxModelConfigBytes >> 20, " MiB, not a model config.json"));
  }
  if (absl::IsInvalidArgument(read.status())) {  // not a regular file (the message names it)
    return absl::InvalidArgumentError(
        absl::StrCat(shown, ": is ", FileTypeName(path), ", expected a model config.json file"));
  }
  if (!read.ok()) return absl::InvalidArgumentError(absl::StrCat("cannot read ", shown));
  const std::string& text = *read;
  if (text.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, ": not a text file (expected a model config.json)"));
  }
  if (!nlohmann::json::accept(text)) {
    return absl::InvalidArgumentError(
        absl::StrCat(shown, ": not valid JSON (expected a model config.json)"));
  }
  absl::StatusOr<models::ModelConfig> config = models::ParseModelConfig(text, shown);
  if (!config.ok() && config.status().message().size() > kMaxMessageBytes) {
    return absl::Status(config.status().code(),
                        absl::StrCat(config.status().message().substr(0, kMaxMessageBytes),
                                     "\u2026 (message cut)"));
  }
  return config;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Public API
// ------------------------------------------------------------------------------------------------

absl::string_view ModelInitName(ModelInit init) {
  switch (init) {
    case ModelInit::kSft:
      return "sft";
    case ModelInit::kRandom:
      return "random";
    case ModelInit::kPath:
      return "path";
  }
  return "?";
}
absl::string_view AdvEstimatorName(AdvEstimator v) { return NameOf(AdvEstimators(), v); }
absl::string_view PolicyLossName(PolicyLoss v) { return NameOf(PolicyLosses(), v); }
absl::string_view KlTypeName(KlType v) { return NameOf(KlTypes(), v); }
absl::string_view LossAggModeName(LossAggMode v) { return NameOf(LossAggModes(), v); }
absl::string_view OffPolicyModeName(OffPolicyMode v) { return NameOf(OffPolicyModes(), v); }
absl::string_view LrScheduleName(LrSchedule v) { return NameOf(LrSchedules(), v); }
absl::string_view PreferenceLossName(PreferenceLoss v) {
  return NameOf(Spellings<PreferenceLoss>(), v);
}
absl::string_view TruncationName(Truncation v) { return NameOf(Truncations(), v); }
absl::string_view KlCtrlTypeName(KlCtrlType v) { return NameOf(KlCtrlTypes(), v); }

std::map<std::string, double> ActorResources::AsMap() const {
  std::map<std::string, double> amounts;
  if (cpu > 0) amounts["CPU"] = cpu;
  if (gpu > 0) amounts["GPU"] = gpu;
  if (memory > 0) amounts["memory"] = memory;
  for (const auto& [name, amount] : custom) {
    if (amount > 0) amounts[name] = amount;
  }
  return amounts;
}

ActorGroupSpec DefaultActorGroup(absl::string_view type, int64_t replicas, double cpu,
                                 int64_t max_restarts) {
  ActorGroupSpec group;
  group.type = std::string(type);
  group.replicas = replicas;
  group.resources.cpu = cpu;
  group.max_restarts = max_restarts;
  return group;
}

std::string JobSpec::Where(absl::string_view key_path) const {
  std::string path(key_path);
  while (true) {
    auto it = locations.find(path);
    if (it != locations.end()) return it->second;
    const size_t dot = path.rfind('.');
    if (dot == std::string::npos) return source_name;
    path.resize(dot);
  }
}

absl::Status JobSpec::ErrorAt(absl::string_view key_path, absl::string_view message) const {
  return absl::InvalidArgumentError(absl::StrCat(Where(key_path), ": ", key_path, ": ", message));
}

std::vector<std::pair<std::string, const ActorGroupSpec*>> ActorGroups(const JobSpec& spec) {
  const ActorsSpec& a = spec.actors;
  return {
      {"rollout", &a.rollout},          {"reward", &a.reward}, {"reference", &a.reference},
      {"trainer", &a.trainer},          {"critic", &a.critic}, {"replay_buffer", &a.replay_buffer},
      {"checkpointer", &a.checkpointer}};
}

absl::StatusOr<JobSpec> ParseJobSpec(absl::string_view yaml_text, absl::string_view source_name,
                                     absl::Span<const std::string> overrides) {
  TROUPE_ASSIGN_OR_RETURN(SpecNode root, job_spec_internal::ParseSpecYaml(yaml_text, source_name));
  if (root.kind != Kind::kMap && root.kind != Kind::kNull) {
    return absl::InvalidArgumentError(absl::StrCat(
        FormatLoc(root.loc, source_name),
        ": expected a map of sections (name, model, data, algorithm, ...), got ", Got(root)));
  }
  for (const std::string& text : overrides) {
    TROUPE_RETURN_IF_ERROR(job_spec_internal::ApplyOverride(text, source_name, &root));
  }

  JobSpec spec;
  spec.source_name = std::string(source_name);
  spec.overrides.assign(overrides.begin(), overrides.end());
  Context ctx(spec.source_name, spec.overrides);
  JobSpecReader reader(&ctx, &spec);
  reader.Read(root);
  if (ctx.diag.empty()) {
    reader.Resolve();
    reader.CrossCheck();
  }
  TROUPE_RETURN_IF_ERROR(ctx.diag.ToStatus());
  for (const auto& [path, loc] : ctx.locs) spec.locations[path] = FormatLoc(loc, source_name);
  return spec;
}

std::vector<SpecKeyInfo> DescribeSpecKeys(const std::string& task) {
  std::vector<SpecKeyInfo> keys;
  // Every section is read whether written or not; the required keys are written so that the
  // task's parameters are read too.
  absl::StatusOr<SpecNode> root = job_spec_internal::ParseSpecYaml(
      absl::StrCat("name: keys\nmodel: {config: config.json}\ndata: {task: \"", task,
                   "\"}\ntrainer: {total_steps: 1}\n"),
      "keys");
  if (!root.ok()) return keys;
  JobSpec spec;
  Context ctx("keys", {});
  ctx.described = &keys;
  JobSpecReader reader(&ctx, &spec);
  reader.Read(*root);
  const std::optional<TaskDefinition> definition = FindJobTask(task);
  for (SpecKeyInfo& key : keys) {
    // The doc of this path, or of its kind's "actors.<kind>.KEY".
    std::string general = key.path;
    const std::vector<std::string> parts = absl::StrSplit(key.path, '.');
    if (parts.size() >= 3 && parts[0] == "actors") {
      general = absl::StrCat("actors.<kind>.", absl::StrJoin(parts.begin() + 2, parts.end(), "."));
    }
    const job_spec_internal::KeyDoc* doc = nullptr;
    for (const job_spec_internal::KeyDoc& d : job_spec_internal::KeyDocs()) {
      if (d.path == key.path) doc = &d;
    }
    for (const job_spec_internal::KeyDoc& d : job_spec_internal::KeyDocs()) {
      if (doc == nullptr && d.path == general) doc = &d;
    }
    if (doc != nullptr) {
      key.doc = doc->doc;
      if (doc->type != nullptr) key.type = doc->type;
      if (doc->default_value != nullptr) key.default_value = doc->default_value;
    } else if (definition.has_value() && parts.size() == 2 && parts[0] == "data") {
      for (const TaskParam& p : definition->params) {
        if (p.name == parts[1]) key.doc = p.doc;
      }
    }
  }
  return keys;
}

absl::StatusOr<std::string> ReadJobSpecFile(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string shown = AbbreviatePath(path);
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    return absl::NotFoundError(absl::StrCat("job spec ", shown, ": cannot read the file",
                                            ec ? absl::StrCat(" (", ec.message(), ")") : ""));
  }
  if (fs::is_directory(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec ", shown, ": is a directory; expected a job YAML file"));
  }
  if (fs::is_regular_file(status)) {
    const uintmax_t size = fs::file_size(path, ec);
    if (!ec && size > static_cast<uintmax_t>(kMaxJobSpecBytes)) {
      return absl::InvalidArgumentError(absl::StrCat(shown, ": ", size, " bytes, more than the ",
                                                     kMaxJobSpecBytes >> 20,
                                                     " MiB a job spec may have"));
    }
  }
  // At most one byte past the limit is read, whatever the file is (a pipe, /dev/zero, a file
  // that grew since the size was taken).
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("job spec ", shown, ": cannot read the file"));
  std::string text(static_cast<size_t>(kMaxJobSpecBytes) + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return absl::NotFoundError(absl::StrCat("job spec ", shown, ": read error"));
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<int64_t>(text.size()) > kMaxJobSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        shown, ": more than the ", kMaxJobSpecBytes >> 20, " MiB a job spec may have"));
  }
  TROUPE_RETURN_IF_ERROR(job_spec_internal::CheckSpecText(text, shown));
  return text;
}

absl::StatusOr<JobSpec> LoadJobSpec(const std::string& path,
                                    absl::Span<const std::string> overrides) {
  TROUPE_ASSIGN_OR_RETURN(std::string text, ReadJobSpecFile(path));
  return ParseJobSpec(text, path, overrides);
}

namespace {

// The keys of a config.json that decide the shapes of the weights, where `a` and `b` differ:
// "hidden_size 32 vs 64, num_hidden_layers 2 vs 4".
std::string ShapeKeysThatDiffer(const models::ModelConfig& a, const models::ModelConfig& b) {
  std::vector<std::string> differ;
  auto compare = [&differ](const char* key, const auto& x, const auto& y) {
    if (x != y) differ.push_back(absl::StrCat(key, " ", x, " vs ", y));
  };
  compare("model_type", a.model_type, b.model_type);
  compare("vocab_size", a.vocab_size, b.vocab_size);
  compare("hidden_size", a.hidden_size, b.hidden_size);
  compare("intermediate_size", a.intermediate_size, b.intermediate_size);
  compare("num_hidden_layers", a.num_hidden_layers, b.num_hidden_layers);
  compare("num_attention_heads", a.num_attention_heads, b.num_attention_heads);
  compare("num_key_value_heads", a.num_key_value_heads, b.num_key_value_heads);
  if (a.explicit_head_dim.has_value() || b.explicit_head_dim.has_value()) {
    compare("head_dim", a.head_dim(), b.head_dim());
  }
  compare("tie_word_embeddings", a.tie_word_embeddings ? "true" : "false",
          b.tie_word_embeddings ? "true" : "false");
  compare("attention_bias", a.attention_bias ? "true" : "false",
          b.attention_bias ? "true" : "false");
  return absl::StrJoin(differ, ", ");
}

}  // namespace

absl::Status ValidateFiles(const JobSpec& spec) {
  namespace fs = std::filesystem;
  std::vector<std::string> errors;
  auto add = [&](absl::string_view path, absl::string_view message) {
    errors.push_back(absl::StrCat(spec.Where(path), ": ", path, ": ", message));
  };
  std::error_code ec;

  // What a key names is looked at (stat) before anything opens it: a FIFO, a socket or a device
  // is refused as such, so that no reader (here, in the head, or in the driver) ever waits on one.
  // `expected` says what the key wants ("a config.json file"); true if `path` is a regular file.
  auto regular_file = [&](absl::string_view key, const std::string& path,
                          absl::string_view expected, absl::string_view missing = "file not found",
                          bool readable = false) {
    const std::string shown = AbbreviatePath(path);
    const std::string type = FileTypeName(path);
    if (type == "nothing") {
      add(key, absl::StrCat(missing, ": ", shown));
    } else if (type != "a regular file") {
      add(key, absl::StrCat("expected ", expected, ", got ", type, ": ", shown));
    } else if (readable && ::access(path.c_str(), R_OK) != 0) {
      add(key, absl::StrCat("cannot read ", shown));
    } else {
      return true;
    }
    return false;
  };
  // A file a model directory may hold (config.json, tokenizer.json, ...): a regular file if there.
  auto optional_regular_file = [&](absl::string_view key, const fs::path& path) {
    const std::string type = FileTypeName(path.string());
    if (type == "nothing" || type == "a regular file") return true;
    add(key, absl::StrCat(AbbreviatePath(path.string()), " is ", type, ", expected a file"));
    return false;
  };
  // A model directory's weights, checked against `config` (its own config.json or model.config)
  // by the shapes in their safetensors headers; `key` is blamed for a mismatch.
  auto weights_fit = [&](absl::string_view weights_key, const std::string& weights,
                         absl::string_view config_key, const models::ModelConfig& config,
                         absl::string_view config_name, bool value_model_too,
                         const std::string& also_differs) {
    absl::StatusOr<models::WeightShapes> shapes = models::ReadSafetensorsShapes(weights);
    if (!shapes.ok()) {
      add(weights_key, shapes.status().message());
      return;
    }
    const std::vector<std::string> problems =
        models::CausalLmShapeMismatches(*shapes, config, value_model_too);
    if (problems.empty()) return;
    add(config_key,
        absl::StrCat(config_name, " does not fit the weights in ", AbbreviatePath(weights), ": ",
                     absl::StrJoin(problems, "; "),
                     also_differs.empty() ? "" : absl::StrCat(" (", also_differs, ")")));
  };

  std::optional<models::ModelConfig> model_config;
  if (!spec.model.config.empty() &&
      regular_file("model.config", spec.model.config, "a config.json file")) {
    const std::string path = AbbreviatePath(spec.model.config);
    if (absl::StatusOr<models::ModelConfig> read = ReadModelConfig(spec.model.config); !read.ok()) {
      add("model.config", read.status().message());
    } else {
      model_config = *read;
      const int64_t needed = spec.data.max_prompt_length + spec.data.max_response_length;
      // (Recipe sft reads no data.max_prompt_length: RunSft sizes its sequences from the records.)
      if (read->max_position_embeddings < needed && spec.recipe != "sft") {
        add("data.max_response_length",
            absl::StrCat("data.max_prompt_length + data.max_response_length = ", needed,
                         " exceeds max_position_embeddings = ", read->max_position_embeddings,
                         " of ", path));
      }
    }
  }

  if (spec.model.init == ModelInit::kPath) {
    const std::string& path = spec.model.init_path;
    const std::string shown = AbbreviatePath(path);
    const std::string type = FileTypeName(path);
    if (type == "nothing") {
      add("model.init", absl::StrCat("not found: ", shown, " (expected sft, random, or a path)"));
    } else if (type == "a directory") {
      bool has_weights = false;
      for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
        const std::string leaf = entry.path().filename().string();
        if (absl::EndsWith(leaf, ".safetensors") || leaf == "model.safetensors.index.json") {
          has_weights = true;
          break;
        }
      }
      const fs::path own_config = fs::path(path) / "config.json";
      bool files_ok = true;
      for (const char* leaf :
           {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}) {
        files_ok = optional_regular_file("model.init", fs::path(path) / leaf) && files_ok;
      }
      const bool no_config = spec.model.config.empty() && !fs::exists(own_config, ec);
      if (!has_weights) add("model.init", absl::StrCat("no .safetensors file in ", shown));
      if (no_config) {
        add("model.init",
            absl::StrCat("no config.json in ", shown, ", and model.config is not set"));
      }
      if (has_weights && !no_config && files_ok) {
        // The weights against the config the run builds its model from (model.config, else the
        // directory's own), before any actor loads them: a mismatch would otherwise surface only
        // in the actors, restart after restart, with the job already started.
        std::optional<models::ModelConfig> own;
        if (fs::exists(own_config, ec)) {
          absl::StatusOr<models::ModelConfig> read = ReadModelConfig(own_config.string());
          if (read.ok()) {
            own = *read;
          } else if (spec.model.config.empty()) {
            add("model.init", read.status().message());
          }
        }
        const bool value_model_too = spec.recipe == "rm";  // its backbone, or a reward model's
        if (!spec.model.config.empty() && model_config.has_value()) {
          weights_fit("model.init", path, "model.config", *model_config,
                      absl::StrCat("model.config (", AbbreviatePath(spec.model.config), ")"),
                      value_model_too,
                      own.has_value() && !ShapeKeysThatDiffer(*own, *model_config).empty()
                          ? absl::StrCat(AbbreviatePath(own_config.string()), " vs model.config: ",
                                         ShapeKeysThatDiffer(*own, *model_config))
                          : "");
        } else if (spec.model.config.empty() && own.has_value()) {
          weights_fit("model.init", path, "model.init", *own,
                      absl::StrCat(AbbreviatePath(own_config.string())), value_model_too, "");
        }
      }
    } else if (type != "a regular file") {
      add("model.init",
          absl::StrCat("expected a .safetensors file or a directory holding one, got ", type, ": ",
                       shown));
    } else if (!absl::EndsWith(path, ".safetensors")) {
      add("model.init",
          absl::StrCat("expected a .safetensors file or a directory holding one, got ", shown));
    } else if (spec.model.config.empty()) {
      add("model.config", absl::StrCat("required when model.init is a file (", shown, ")"));
    } else if (model_config.has_value()) {
      weights_fit("model.init", path, "model.config", *model_config,
                  absl::StrCat("model.config (", AbbreviatePath(spec.model.config), ")"),
                  spec.recipe == "rm", "");
    }
  }

  if (!spec.model.tokenizer.empty()) {
    regular_file("model.tokenizer", spec.model.tokenizer, "a tokenizer.json file");
  }

  auto check_data_file = [&](absl::string_view key, const std::string& path) {
    regular_file(key, path, "a file", "file not found", /*readable=*/true);
  };
  for (const std::string& path : spec.data.train_files) check_data_file("data.train_files", path);
  for (const std::string& path : spec.data.val_files) check_data_file("data.val_files", path);
  for (const std::string& path : spec.data.preference_files) {
    check_data_file("data.preference_files", path);
  }
  for (const std::string& path : spec.sft.train_files) check_data_file("sft.train_files", path);
  if (!spec.data.chat_template.empty()) {
    check_data_file("data.chat_template", spec.data.chat_template);
  }

  // The reward role's models (reward.model, reward.judge.model): directories with a config.json
  // whose shapes their weights have.
  auto check_model_dir = [&](absl::string_view key, const std::string& dir, bool value_model) {
    const std::string shown = AbbreviatePath(dir);
    const std::string type = FileTypeName(dir);
    if (type == "nothing") {
      add(key, absl::StrCat("not found: ", shown));
      return;
    }
    if (type != "a directory") {
      add(key, absl::StrCat("expected a model directory, got ", type, ": ", shown));
      return;
    }
    bool files_ok = true;
    for (const char* leaf : {"generation_config.json", "tokenizer.json", "tokenizer_config.json"}) {
      files_ok = optional_regular_file(key, fs::path(dir) / leaf) && files_ok;
    }
    const std::string config_path = (fs::path(dir) / "config.json").string();
    if (!regular_file(key, config_path, "a config.json file", "no config.json")) return;
    absl::StatusOr<models::ModelConfig> config = ReadModelConfig(config_path);
    if (!config.ok()) {
      add(key, config.status().message());
      return;
    }
    if (files_ok) {
      weights_fit(key, dir, key, *config, AbbreviatePath(config_path), value_model, "");
    }
  };
  if (!spec.reward.model.empty()) check_model_dir("reward.model", spec.reward.model, true);
  if (!spec.reward.judge.model.empty()) {
    check_model_dir("reward.judge.model", spec.reward.judge.model, false);
  }

  // A job's native code is opened by dlopen, which would wait on a FIFO like any reader. (Said as
  // the driver's LoadActorLibrary says it, runtime/actor_library.h.)
  for (const auto& [kind, group] : ActorGroups(spec)) {
    if (group->library.empty()) continue;
    const std::string type = FileTypeName(group->library);
    if (type == "a regular file") continue;
    add(absl::StrCat("actors.", kind, ".library"),
        absl::StrCat("actor library ", AbbreviatePath(group->library),
                     type == "nothing"
                         ? ": file not found"
                         : absl::StrCat(": expected a shared library file, got ", type)));
  }

  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

std::vector<std::pair<std::string, std::string>> PathKeys(const JobSpec& spec) {
  std::vector<std::pair<std::string, std::string>> keys = {
      {"logging.dir", spec.logging.dir},
      {"actors.checkpointer.dir", spec.actors.checkpointer.dir},
      {"sft.dir", spec.sft.dir},
      {"model.config", spec.model.config},
      {"model.init", spec.model.init == ModelInit::kPath ? spec.model.init_path : ""},
      {"model.tokenizer", spec.model.tokenizer},
  };
  for (size_t i = 0; i < spec.data.train_files.size(); ++i) {
    keys.push_back({absl::StrCat("data.train_files[", i, "]"), spec.data.train_files[i]});
  }
  for (size_t i = 0; i < spec.data.val_files.size(); ++i) {
    keys.push_back({absl::StrCat("data.val_files[", i, "]"), spec.data.val_files[i]});
  }
  for (size_t i = 0; i < spec.sft.train_files.size(); ++i) {
    keys.push_back({absl::StrCat("sft.train_files[", i, "]"), spec.sft.train_files[i]});
  }
  for (size_t i = 0; i < spec.data.preference_files.size(); ++i) {
    keys.push_back({absl::StrCat("data.preference_files[", i, "]"), spec.data.preference_files[i]});
  }
  keys.push_back({"data.chat_template", spec.data.chat_template});
  keys.push_back({"reward.model", spec.reward.model});
  keys.push_back({"reward.judge.model", spec.reward.judge.model});
  CollectConfigPaths(spec.data.task_params, "data", &keys);
  CollectConfigPaths(spec.reward.config, "reward.config", &keys);
  for (const auto& [kind, group] : ActorGroups(spec)) {
    keys.push_back({absl::StrCat("actors.", kind, ".library"), group->library});
    CollectConfigPaths(group->config, absl::StrCat("actors.", kind, ".config"), &keys);
  }
  keys.erase(
      std::remove_if(keys.begin(), keys.end(), [](const auto& k) { return k.second.empty(); }),
      keys.end());
  return keys;
}

absl::Status CheckPathsWithin(const JobSpec& spec, const std::string& base_dir,
                              absl::Span<const std::string> roots) {
  std::vector<std::filesystem::path> resolved_roots;
  std::vector<std::string> shown_roots;
  for (const std::string& root : roots) {
    if (root.empty()) continue;
    resolved_roots.push_back(Resolve(root, base_dir));
    shown_roots.push_back(resolved_roots.back().string());
  }
  std::vector<std::string> errors;
  for (const auto& [key, value] : PathKeys(spec)) {
    const std::filesystem::path real = Resolve(value, base_dir);
    const bool inside = std::any_of(resolved_roots.begin(), resolved_roots.end(),
                                    [&](const auto& root) { return IsWithin(real, root); });
    if (inside) continue;
    errors.push_back(absl::StrCat(
        spec.Where(key), ": ", AbbreviatePath(key), ": ", QuotePath(value),
        real.string() == value ? "" : absl::StrCat(" resolves to ", QuotePath(real.string()), ","),
        " outside the directories this job may use (",
        shown_roots.empty() ? "none" : absl::StrJoin(shown_roots, ", "), ")"));
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrJoin(errors, "\n"));
}

absl::Status CheckResourcesFit(const JobSpec& spec, absl::Span<const NodeResources> nodes) {
  // Recipes rm and sft train in the driver: they start none of the actors (their checks refuse
  // actors.*).
  if (spec.recipe == "rm" || spec.recipe == "sft") return absl::OkStatus();
  constexpr double kSlack = 1e-9;
  if (nodes.empty()) return absl::FailedPreconditionError("the cluster has no nodes");
  auto amount_on = [](const NodeResources& node, const std::string& name) {
    auto it = node.find(name);
    return it == node.end() ? 0.0 : it->second;
  };
  std::vector<std::string> errors;
  std::map<std::string, double> needed;
  std::map<std::string, std::vector<std::string>> needed_by;
  for (const auto& [kind, group] : ActorGroups(spec)) {
    if (group->replicas == 0) continue;
    const std::map<std::string, double> request = group->resources.AsMap();
    for (const auto& [name, amount] : request) {
      needed[name] += amount * static_cast<double>(group->replicas);
      needed_by[name].push_back(
          absl::StrCat(kind, " ", group->replicas, " x ", FormatAmount(name, amount)));
    }
    bool fits = false;
    for (const NodeResources& node : nodes) {
      fits = std::all_of(request.begin(), request.end(), [&](const auto& r) {
        return r.second <= amount_on(node, r.first) + kSlack;
      });
      if (fits) break;
    }
    if (fits) continue;
    std::vector<std::string> reasons;
    for (const auto& [name, amount] : request) {
      double largest = 0;
      for (const NodeResources& node : nodes) largest = std::max(largest, amount_on(node, name));
      if (amount > largest + kSlack) {
        reasons.push_back(absl::StrCat(name, ": requested ", FormatAmount(name, amount),
                                       ", the largest node has ", FormatAmount(name, largest)));
      }
    }
    if (reasons.empty()) reasons.push_back("no single node has all of it at once");
    const std::string path = absl::StrCat("actors.", kind, ".resources");
    errors.push_back(absl::StrCat(spec.Where(path), ": ", path, ": fits on no node (",
                                  absl::StrJoin(reasons, "; "), ")"));
  }
  for (const auto& [name, amount] : needed) {
    double total = 0;
    for (const NodeResources& node : nodes) total += amount_on(node, name);
    if (amount > total + kSlack) {
      errors.push_back(absl::StrCat(spec.Where("actors"), ": actors: the job needs ",
                                    FormatAmount(name, amount), " ", name, " in total (",
                                    absl::StrJoin(needed_by[name], ", "), "), the cluster has ",
                                    FormatAmount(name, total)));
    }
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrJoin(errors, "\n"));
}

absl::Status CheckDevices(const JobSpec& spec, const DeviceSupport& support) {
  // Recipes rm and sft train in the driver: they start none of the actors (their checks refuse
  // actors.*).
  if (spec.recipe == "rm" || spec.recipe == "sft") return absl::OkStatus();
  // troupe's own actor types, by whether they hold a model.
  static const auto* const kModelTypes = new absl::flat_hash_set<std::string>{
      "Trainer", "RolloutWorker", "Reference", "Critic", "RewardModel", "Judge"};
  static const auto* const kNoModelTypes =
      new absl::flat_hash_set<std::string>{"RewardServer", "ReplayBuffer", "Checkpointer"};
  std::vector<std::string> errors;
  for (const auto& [kind, group] : ActorGroups(spec)) {
    if (group->replicas == 0 || group->resources.gpu <= 0) continue;
    std::string why;
    if (kModelTypes->contains(group->type)) {
      why = support.libtorch_cuda
                ? absl::StrCat(group->type,
                               " computes on the CPU: placing troupe's model actors on the GPU "
                               "they reserve is not implemented yet")
                : absl::StrCat("this troupe's LibTorch was built without CUDA, so ", group->type,
                               " computes on the CPU");
    } else if (kNoModelTypes->contains(group->type)) {
      why = absl::StrCat(group->type, " holds no model and computes on no device");
    } else {
      continue;  // a user's type: its own code may use the GPU (CUDA_VISIBLE_DEVICES names it)
    }
    const std::string key = absl::StrCat("actors.", kind, ".resources.GPU");
    errors.push_back(absl::StrCat(spec.Where(key), ": ", key, ": ", why,
                                  "; the GPU would be reserved and never used (remove GPU, or "
                                  "set it to 0)"));
  }
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors, "\n"));
}

std::string ToYaml(const JobSpec& spec) {
  YAML::Emitter out;
  std::string origin = absl::StrCat("Resolved troupe job spec, from ",
                                    spec.source_name.empty() ? "(unnamed)" : spec.source_name);
  if (!spec.overrides.empty()) {
    absl::StrAppend(&origin, " with overrides: ", absl::StrJoin(spec.overrides, " "));
  }
  absl::StrReplaceAll({{"\n", " "}, {"\r", " "}}, &origin);
  out << YAML::Comment(origin) << YAML::Newline;
  EmitYaml(ToJsonValue(spec), 0, &out);
  return absl::StrCat(out.c_str(), "\n");
}

std::string ToJson(const JobSpec& spec) { return ToJsonValue(spec).dump(2) + "\n"; }

}  // namespace troupe::recipes
