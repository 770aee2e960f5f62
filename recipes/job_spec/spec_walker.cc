#include "recipes/job_spec/spec_walker.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"

namespace troupe::recipes::job_spec_internal {
namespace {

using Kind = SpecNode::Kind;
using nlohmann::ordered_json;

constexpr int kMaxReportedErrors = 25;

std::string Number(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(v));
  }
  return absl::StrCat(v);
}

// "expected RANGE, got VALUE" and the range's reason.
std::string OutOfRange(const Range& range, bool integer, const std::string& got) {
  return absl::StrCat("expected ", range.Describe(integer), ", got ", got,
                      range.why != nullptr ? absl::StrCat(" (", range.why, ")") : "");
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

// `v` as a list of non-empty strings: a non-empty scalar, or a non-empty list of them. Sets *out
// only when it is one.
bool NonEmptyScalars(const SpecNode& v, std::vector<std::string>* out) {
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

std::optional<double> ParseSize(absl::string_view text) {
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

}  // namespace

// ------------------------------------------------------------------------------------------------
// Small helpers
// ------------------------------------------------------------------------------------------------

std::string ChildPath(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

std::string Quote(absl::string_view s) { return QuoteShown(s); }
std::string AbbreviatePath(absl::string_view path) { return Abbreviate(path, kMaxShownPathBytes); }
std::string QuotePath(absl::string_view path) { return QuoteShown(path, kMaxShownPathBytes); }

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

std::string Range::Describe(bool integer) const {
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

// ------------------------------------------------------------------------------------------------
// Diagnostics and the context
// ------------------------------------------------------------------------------------------------

void Diagnostics::Add(const SpecLoc& loc, absl::string_view path, absl::string_view message) {
  std::string where = FormatLoc(loc, source_name_);
  std::string text = path.empty() ? absl::StrCat(where, ": ", message)
                                  : absl::StrCat(where, ": ", AbbreviatePath(path), ": ", message);
  if (!seen_.insert(text).second) return;
  // File order: unlocated first, then by line and column, then overrides in the order given.
  int group = 0;
  int64_t major = 0;
  int64_t minor = 0;
  if (!loc.override_text.empty()) {
    group = 2;
    major = std::find(overrides_.begin(), overrides_.end(), loc.override_text) - overrides_.begin();
  } else if (loc.line > 0) {
    group = 1;
    major = loc.line;
    minor = loc.column;
  }
  items_.push_back({group, major, minor, static_cast<int64_t>(items_.size()), std::move(text)});
}

absl::Status Diagnostics::ToStatus() const {
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

SpecLoc Context::LocOf(absl::string_view path) const {
  std::string p(path);
  while (true) {
    auto it = locs.find(p);
    if (it != locs.end()) return it->second;
    const size_t dot = p.rfind('.');
    if (dot == std::string::npos) return SpecLoc{};
    p.resize(dot);
  }
}

void Context::ReportUnknownKeys() {
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

// ------------------------------------------------------------------------------------------------
// Section
// ------------------------------------------------------------------------------------------------

Section::Section(Context* ctx, const SpecNode* node, std::string path, SpecLoc loc, bool silent,
                 Section* parent)
    : ctx_(ctx),
      node_(node),
      path_(std::move(path)),
      loc_(std::move(loc)),
      silent_(silent),
      parent_(parent) {
  if (ctx_->mode == WalkMode::kWrite)
    json_ = std::make_unique<ordered_json>(ordered_json::object());
}

Section Section::Root(Context* ctx, const SpecNode* root) {
  return Section(ctx, ctx->mode == WalkMode::kRead ? root : nullptr, "", SpecLoc{}, false, nullptr);
}

Section::Step Section::Visit(absl::string_view key, const KeyOpts& opts, std::string type,
                             std::string default_text) {
  const std::string path = ChildPath(path_, key);
  switch (ctx_->mode) {
    case WalkMode::kRead:
      return Step::kRead;
    case WalkMode::kDescribe:
      if (ctx_->described != nullptr) {
        ctx_->described->push_back(
            {path, opts.type != nullptr ? opts.type : std::move(type),
             opts.default_text != nullptr ? opts.default_text : std::move(default_text),
             opts.doc != nullptr ? opts.doc : ""});
      }
      return Step::kSkip;
    case WalkMode::kCheck:
      if (ctx_->Written(path)) {
        if (!unread_why_.empty()) ctx_->Add(path, unread_why_);
        if (!opts.read_if) ctx_->Add(path, opts.unread_why);
      }
      return Step::kSkip;
    case WalkMode::kWrite:
      return active_ && opts.read_if && opts.write_if && ctx_->RecipeReads(path) ? Step::kWrite
                                                                                 : Step::kSkip;
  }
  return Step::kSkip;
}

void Section::Put(absl::string_view key, ordered_json value) {
  (*json_)[std::string(key)] = std::move(value);
}

void Section::Describe(absl::string_view key, std::string type, std::string default_text,
                       const KeyOpts& opts) {
  if (mode() == WalkMode::kDescribe) Visit(key, opts, std::move(type), std::move(default_text));
}

const SpecEntry* Section::Take(absl::string_view key) {
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

const SpecNode* Section::Peek(absl::string_view key) const {
  if (node_ == nullptr || node_->kind != Kind::kMap) return nullptr;
  const SpecEntry* entry = node_->Find(key);
  return entry == nullptr ? nullptr : &entry->value;
}

void Section::Error(const SpecNode& at, absl::string_view key, absl::string_view message) {
  ctx_->diag.Add(at.loc, ChildPath(path_, key), message);
}

const SpecNode* Section::Present(absl::string_view key, bool required) {
  const SpecEntry* entry = Take(key);
  if (entry == nullptr) {
    if (required && !silent_ && ctx_->RecipeReads(ChildPath(path_, key))) {
      ctx_->diag.Add(loc_, ChildPath(path_, key), "missing required key");
    }
    return nullptr;
  }
  return &entry->value;
}

const SpecNode* Section::Int(absl::string_view key, int64_t* out, Range range,
                             const KeyOpts& opts) {
  const Step step =
      Visit(key, opts, range.Describe(true), opts.required ? "required" : absl::StrCat(*out));
  if (step == Step::kWrite) Put(key, *out);
  if (step != Step::kRead) return nullptr;
  const SpecNode* v = Present(key, opts.required);
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

const SpecNode* Section::Double(absl::string_view key, double* out, Range range,
                                const KeyOpts& opts) {
  const Step step = Visit(key, opts, range.Describe(false),
                          opts.required ? "required" : absl::StrFormat("%g", *out));
  if (step == Step::kWrite) {
    Put(key, opts.as_integer ? ordered_json(static_cast<int64_t>(*out)) : ordered_json(*out));
  }
  if (step != Step::kRead) return nullptr;
  const SpecNode* v = Present(key, opts.required);
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

const SpecNode* Section::Bool(absl::string_view key, bool* out, const KeyOpts& opts) {
  const Step step = Visit(key, opts, "true or false", *out ? "true" : "false");
  if (step == Step::kWrite) Put(key, *out);
  if (step != Step::kRead) return nullptr;
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

const SpecNode* Section::String(absl::string_view key, std::string* out, const KeyOpts& opts) {
  const bool allow_empty = opts.allow_empty;
  const Step step = Visit(key, opts, allow_empty ? "a string" : "a non-empty string",
                          opts.required  ? "required"
                          : out->empty() ? "\"\""
                                         : *out);
  if (step == Step::kWrite) Put(key, *out);
  if (step != Step::kRead) return nullptr;
  const SpecNode* v = Present(key, opts.required);
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

const SpecNode* Section::StringList(absl::string_view key, std::vector<std::string>* out,
                                    const KeyOpts& opts) {
  const Step step = Visit(key, opts, "a path or a list of paths",
                          out->empty() ? "[]" : absl::StrJoin(*out, ", "));
  if (step == Step::kWrite) Put(key, *out);
  if (step != Step::kRead) return nullptr;
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

const SpecNode* Section::NameList(absl::string_view key, std::vector<std::string>* out,
                                  const KeyOpts& opts) {
  const Step step = Visit(key, opts, "a name or a list of names", "[]");
  if (step == Step::kWrite) Put(key, *out);
  if (step != Step::kRead) return nullptr;
  const SpecNode* v = Present(key, false);
  if (v == nullptr) return nullptr;
  if (!NonEmptyScalars(*v, out)) {
    Error(*v, key, absl::StrCat("expected a name or a non-empty list of names, got ", Got(*v)));
    return nullptr;
  }
  return v;
}

const SpecNode* Section::NumberList(absl::string_view key, std::vector<double>* out,
                                    const KeyOpts& opts) {
  const Step step = Visit(key, opts, "a list of numbers >= 0", "1 each");
  if (step == Step::kWrite) Put(key, *out);
  if (step != Step::kRead) return nullptr;
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

const SpecNode* Section::StepRange(absl::string_view key, int64_t* from, int64_t* to,
                                   const KeyOpts& opts) {
  const Step step = Visit(key, opts, "[from, to], whole numbers, 1 <= from <= to", "none");
  if (step == Step::kWrite) Put(key, ordered_json::array({*from, *to}));
  if (step != Step::kRead) return nullptr;
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

const SpecNode* Section::Memory(absl::string_view key, double* out, const KeyOpts& opts) {
  const Step step = Visit(key, opts, "bytes, or a size such as \"512MiB\"", Number(*out));
  if (step == Step::kWrite) Put(key, static_cast<int64_t>(*out));
  if (step != Step::kRead) return nullptr;
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

const SpecNode* Section::Json(absl::string_view key, nlohmann::json* out, const KeyOpts& opts) {
  const Step step = Visit(key, opts, "a map (free-form)", out->dump());
  if (step == Step::kWrite) Put(key, ordered_json::parse(out->dump()));
  if (step != Step::kRead) return nullptr;
  const SpecNode* v = Present(key, false);
  if (v == nullptr) return nullptr;
  if (v->kind != Kind::kMap && v->kind != Kind::kNull) {
    Error(*v, key, absl::StrCat("expected a map, got ", Got(*v)));
    return nullptr;
  }
  *out = v->kind == Kind::kNull ? nlohmann::json::object() : SpecToJson(*v);
  return v;
}

Section Section::Sub(absl::string_view key, const KeyOpts& opts) {
  const std::string path = ChildPath(path_, key);
  switch (ctx_->mode) {
    case WalkMode::kRead: {
      const SpecEntry* entry = Take(key);
      if (entry == nullptr) return Section(ctx_, nullptr, path, loc_, silent_, this);
      if (entry->value.kind != Kind::kMap && entry->value.kind != Kind::kNull) {
        Error(entry->value, key, absl::StrCat("expected a map, got ", Got(entry->value)));
        return Section(ctx_, nullptr, path, entry->key_loc, /*silent=*/true, this);
      }
      return Section(ctx_, &entry->value, path, entry->key_loc, silent_, this);
    }
    case WalkMode::kCheck: {
      Section sub(ctx_, nullptr, path, SpecLoc{}, false, this);
      sub.unread_why_ = !unread_why_.empty() ? unread_why_ : opts.read_if ? "" : opts.unread_why;
      return sub;
    }
    case WalkMode::kWrite: {
      Section sub(ctx_, nullptr, path, SpecLoc{}, false, this);
      sub.active_ = active_ && opts.read_if && opts.write_if && ctx_->RecipeReads(path);
      return sub;
    }
    case WalkMode::kDescribe:
      break;
  }
  return Section(ctx_, nullptr, path, SpecLoc{}, false, this);
}

std::vector<std::string> Section::Keys() const {
  std::vector<std::string> keys;
  if (node_ != nullptr) {
    for (const SpecEntry& entry : node_->entries) keys.push_back(entry.key);
  }
  return keys;
}

void Section::Missing(absl::string_view key, absl::string_view message) {
  if (!silent_) ctx_->diag.Add(loc_, ChildPath(path_, key), message);
}

void Section::AcceptRest() {
  for (const std::string& key : Keys()) known_.push_back(key);
}

void Section::Finish(absl::string_view noun) {
  if (ctx_->mode == WalkMode::kWrite) {
    if (active_ && parent_ != nullptr) {
      const size_t dot = path_.rfind('.');
      parent_->Put(dot == std::string::npos ? path_ : path_.substr(dot + 1), std::move(*json_));
    } else if (parent_ == nullptr && ctx_->out != nullptr) {
      *ctx_->out = std::move(*json_);
    }
    return;
  }
  if (ctx_->mode != WalkMode::kRead) return;
  if (node_ == nullptr || node_->kind != Kind::kMap) return;
  for (const SpecEntry& entry : node_->entries) {
    if (std::find(known_.begin(), known_.end(), entry.key) != known_.end()) continue;
    ctx_->unknown.push_back({entry.key_loc, path_, entry.key, known_, std::string(noun)});
  }
}

}  // namespace troupe::recipes::job_spec_internal
