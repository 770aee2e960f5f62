#include "recipes/job_spec/spec_tree.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace troupe::recipes::job_spec_internal {
namespace {

constexpr int kMaxDepth = kMaxSpecDepth;
constexpr int64_t kMaxNodes = kMaxExpandedNodes;

// The length of the UTF-8 sequence that starts at text[i], or 0 if none valid starts there
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF).
size_t Utf8SequenceLength(absl::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

// Thrown by NodeCounter to abandon the event parse once a limit is crossed.
struct LimitCrossed {
  YAML::Mark mark;
  std::string message;
};

// Counts a document's nodes and nesting from yaml-cpp's parse events, without building a tree.
class NodeCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Count(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Open(mark);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Open(mark);
  }
  void OnMapEnd() override { --depth_; }

 private:
  void Count(const YAML::Mark& mark) {
    if (++nodes_ > kMaxSpecNodes) {
      throw LimitCrossed{mark, absl::StrCat("more than ", kMaxSpecNodes,
                                            " YAML nodes (keys and values); a job spec has a few "
                                            "hundred")};
    }
  }
  void Open(const YAML::Mark& mark) {
    Count(mark);
    if (++depth_ > kMaxSpecDepth) {
      throw LimitCrossed{
          mark, absl::StrCat("maps and lists nested deeper than ", kMaxSpecDepth, " levels")};
    }
  }

  int64_t nodes_ = 0;
  int depth_ = 0;
};

// Counts the nodes of every document in `text` (bounded as in the header) without building them.
// Malformed YAML is left for the real parse to report.
absl::Status CheckNodeCount(absl::string_view text, absl::string_view source_name,
                            const std::string* override_text) {
  std::istringstream in{std::string(text)};
  NodeCounter counter;
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (const LimitCrossed& e) {
    if (override_text != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "override ", Abbreviate(*override_text, kMaxShownPathBytes), ": ", e.message));
    }
    SpecLoc loc;
    loc.line = e.mark.line + 1;
    loc.column = e.mark.column + 1;
    return absl::InvalidArgumentError(absl::StrCat(FormatLoc(loc, source_name), ": ", e.message));
  } catch (const std::exception&) {
    // Malformed: reported with its position by the parse that follows.
  }
  return absl::OkStatus();
}

// Digits from `text[*i]` on; returns how many.
int SkipDigits(absl::string_view text, size_t* i) {
  int n = 0;
  while (*i < text.size() && absl::ascii_isdigit(static_cast<unsigned char>(text[*i]))) {
    ++*i;
    ++n;
  }
  return n;
}

bool IsIntegerText(absl::string_view text) {
  size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
  return SkipDigits(text, &i) > 0 && i == text.size();
}

// [-+]? ( \.[0-9]+ | [0-9]+ ( \.[0-9]* )? ) ( [eE] [-+]? [0-9]+ )?   (YAML 1.2 core float).
bool IsFloatText(absl::string_view text) {
  size_t i = 0;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
  int mantissa_digits = SkipDigits(text, &i);
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa_digits += SkipDigits(text, &i);
  }
  if (mantissa_digits == 0) return false;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    if (SkipDigits(text, &i) == 0) return false;
  }
  return i == text.size();
}

SpecLoc LocOf(const YAML::Mark& mark, const std::string* override_text) {
  SpecLoc loc;
  if (override_text != nullptr) {
    loc.override_text = *override_text;
  } else if (mark.line >= 0) {
    loc.line = mark.line + 1;
    loc.column = mark.column + 1;
  }
  return loc;
}

std::string ChildPath(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

// YAML::Node -> SpecNode, applying merge keys and enforcing the limits in the header.
class Converter {
 public:
  Converter(absl::string_view source_name, const std::string* override_text)
      : source_name_(source_name), override_text_(override_text) {}

  absl::Status Convert(const YAML::Node& in, const std::string& path, int depth, SpecNode* out) {
    if (depth > kMaxDepth) {
      return Error(in.Mark(), path,
                   absl::StrCat("nested deeper than ", kMaxDepth, " levels (a recursive alias?)"));
    }
    if (++nodes_ > kMaxNodes) {
      return Error(in.Mark(), path,
                   absl::StrCat("more than ", kMaxNodes, " nodes after expanding aliases"));
    }
    out->loc = LocOf(in.Mark(), override_text_);
    switch (in.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out->kind = SpecNode::Kind::kNull;
        return absl::OkStatus();
      case YAML::NodeType::Scalar:
        out->kind = SpecNode::Kind::kScalar;
        out->scalar = in.Scalar();
        out->quoted = in.Tag() == "!" || in.Tag() == "tag:yaml.org,2002:str";
        return absl::OkStatus();
      case YAML::NodeType::Sequence: {
        out->kind = SpecNode::Kind::kList;
        int index = 0;
        for (const YAML::Node& item : in) {
          out->items.emplace_back();
          if (absl::Status s = Convert(item, absl::StrCat(path, "[", index++, "]"), depth + 1,
                                       &out->items.back());
              !s.ok()) {
            return s;
          }
        }
        return absl::OkStatus();
      }
      case YAML::NodeType::Map:
        return ConvertMap(in, path, depth, out);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status ConvertMap(const YAML::Node& in, const std::string& path, int depth, SpecNode* out) {
    out->kind = SpecNode::Kind::kMap;
    std::vector<YAML::Node> merge_sources;
    for (YAML::const_iterator it = in.begin(); it != in.end(); ++it) {
      // Copies: it->first refers into a temporary that dies with the full expression.
      const YAML::Node key = it->first;
      const YAML::Node value = it->second;
      if (!key.IsScalar()) {
        return Error(key.Mark(), path, "map keys must be scalars");
      }
      const std::string& name = key.Scalar();
      if (name == "<<" && key.Tag() != "!") {  // Merge key (an unquoted "<<").
        if (!merge_sources.empty()) return Error(key.Mark(), path, "more than one merge key");
        if (value.IsMap()) {
          merge_sources.push_back(value);
        } else if (value.IsSequence() && value.size() > 0) {
          for (const YAML::Node& source : value) {
            if (!source.IsMap()) {
              return Error(source.Mark(), ChildPath(path, "<<"),
                           "a merge key takes a map or a list of maps");
            }
            merge_sources.push_back(source);
          }
        } else {
          return Error(value.Mark(), ChildPath(path, "<<"),
                       "a merge key takes a map or a list of maps");
        }
        continue;
      }
      if (const SpecEntry* first = out->Find(name); first != nullptr) {
        return Error(
            key.Mark(), ChildPath(path, name),
            absl::StrCat("duplicate key (first at ", FormatLoc(first->key_loc, source_name_), ")"));
      }
      SpecEntry entry;
      entry.key = name;
      entry.key_loc = LocOf(key.Mark(), override_text_);
      if (absl::Status s = Convert(value, ChildPath(path, name), depth + 1, &entry.value);
          !s.ok()) {
        return s;
      }
      if (entry.value.kind == SpecNode::Kind::kNull) entry.value.loc = entry.key_loc;
      out->entries.push_back(std::move(entry));
    }
    // Merged keys: explicit ones win, then earlier sources over later ones.
    for (const YAML::Node& source : merge_sources) {
      SpecNode merged;
      if (absl::Status s = Convert(source, path, depth + 1, &merged); !s.ok()) return s;
      for (SpecEntry& entry : merged.entries) {
        if (out->Find(entry.key) == nullptr) out->entries.push_back(std::move(entry));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Error(const YAML::Mark& mark, absl::string_view path, absl::string_view message) {
    std::string where = FormatLoc(LocOf(mark, override_text_), source_name_);
    return absl::InvalidArgumentError(
        path.empty()
            ? absl::StrCat(where, ": ", message)
            : absl::StrCat(where, ": ", Abbreviate(path, kMaxShownPathBytes), ": ", message));
  }

  std::string source_name_;
  const std::string* override_text_;  // Non-null: every node is located at this override.
  int64_t nodes_ = 0;
};

}  // namespace

absl::Status CheckSpecText(absl::string_view text, absl::string_view source_name_in) {
  const std::string source_name = Abbreviate(source_name_in, kMaxShownPathBytes);
  if (static_cast<int64_t>(text.size()) > kMaxSpecBytes) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", text.size(),
                                                   " bytes, more than the ", kMaxSpecBytes >> 20,
                                                   " MiB a job spec may have"));
  }
  for (size_t i = 0; i < text.size();) {
    if (text[i] == '\0') {
      return absl::InvalidArgumentError(absl::StrCat(
          source_name, ": not a text file (a NUL byte at byte ", i, "); a job spec is YAML text"));
    }
    const size_t n = Utf8SequenceLength(text, i);
    if (n == 0) {
      return absl::InvalidArgumentError(absl::StrCat(source_name,
                                                     ": not a text file (invalid UTF-8 at byte ", i,
                                                     "); a job spec is YAML text in UTF-8"));
    }
    i += n;
  }
  return absl::OkStatus();
}

std::string Abbreviate(absl::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  size_t cut = max;
  // Back up to the start of a character (continuation bytes are 10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "\u2026 (", text.size(), " bytes)");
}

std::string QuoteShown(absl::string_view text, size_t max) {
  if (text.size() <= max) return absl::StrCat("\"", absl::CEscape(text), "\"");
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat("\"", absl::CEscape(text.substr(0, cut)), "\u2026\" (", text.size(),
                      " bytes)");
}

std::string FormatLoc(const SpecLoc& loc, absl::string_view source_name) {
  if (!loc.override_text.empty()) {
    return absl::StrCat("override ", Abbreviate(loc.override_text, kMaxShownPathBytes));
  }
  const std::string source = Abbreviate(source_name, kMaxShownPathBytes);
  if (loc.line <= 0) return source;
  if (loc.column <= 0) return absl::StrCat(source, ":", loc.line);
  return absl::StrCat(source, ":", loc.line, ":", loc.column);
}

const SpecEntry* SpecNode::Find(absl::string_view key) const {
  for (const SpecEntry& entry : entries) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

SpecEntry* SpecNode::Find(absl::string_view key) {
  for (SpecEntry& entry : entries) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

ScalarValue ClassifyPlainText(absl::string_view text) {
  ScalarValue v;
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    v.type = ScalarValue::Type::kNull;
  } else if (text == "true" || text == "True" || text == "TRUE") {
    v.type = ScalarValue::Type::kBool;
    v.bool_value = true;
  } else if (text == "false" || text == "False" || text == "FALSE") {
    v.type = ScalarValue::Type::kBool;
    v.bool_value = false;
  } else if (IsIntegerText(text) && absl::SimpleAtoi(text, &v.int_value)) {
    v.type = ScalarValue::Type::kInt;
    v.float_value = static_cast<double>(v.int_value);
  } else if (IsFloatText(text) && absl::SimpleAtod(text, &v.float_value) &&
             std::isfinite(v.float_value)) {
    v.type = ScalarValue::Type::kFloat;
  } else {
    v.type = ScalarValue::Type::kString;
  }
  return v;
}

ScalarValue ClassifyScalar(const SpecNode& scalar) {
  if (scalar.kind == SpecNode::Kind::kNull) {
    ScalarValue v;
    v.type = ScalarValue::Type::kNull;
    return v;
  }
  if (scalar.quoted) return ScalarValue{};
  return ClassifyPlainText(scalar.scalar);
}

absl::StatusOr<SpecNode> ParseSpecYaml(absl::string_view text, absl::string_view source_name) {
  if (absl::Status s = CheckSpecText(text, source_name); !s.ok()) return s;
  if (absl::Status s = CheckNodeCount(text, source_name, nullptr); !s.ok()) return s;
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(FormatLoc(LocOf(e.mark, nullptr), source_name), ": malformed YAML: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": malformed YAML: ", e.what()));
  }
  if (documents.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(source_name,
                                                   ": expected one YAML document, found ",
                                                   documents.size(), " (--- separators)"));
  }
  SpecNode root;
  if (documents.empty()) return root;
  Converter converter(source_name, nullptr);
  try {
    if (absl::Status s = converter.Convert(documents[0], "", 0, &root); !s.ok()) return s;
  } catch (const std::exception& e) {  // yaml-cpp accessors throw on invalid nodes.
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": malformed YAML: ", e.what()));
  }
  return root;
}

absl::Status ApplyOverride(absl::string_view override_text, absl::string_view source_name,
                           SpecNode* root) {
  const std::string text(override_text);
  // How the override is named in messages (abbreviated: it may be long).
  const std::string shown = Abbreviate(text, kMaxShownPathBytes);
  if (absl::Status s = CheckSpecText(override_text, absl::StrCat("override ", shown)); !s.ok()) {
    return s;
  }
  const size_t eq = override_text.find('=');
  const absl::string_view path_text =
      absl::StripAsciiWhitespace(override_text.substr(0, std::min(eq, override_text.size())));
  if (eq == absl::string_view::npos || path_text.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("override ", QuoteShown(override_text, kMaxShownPathBytes),
                     ": expected KEY.PATH=VALUE, e.g. algorithm.n=4"));
  }
  std::vector<std::string> keys = absl::StrSplit(path_text, '.');
  for (const std::string& key : keys) {
    if (key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("override ", shown, ": empty key in ",
                                                     QuoteShown(path_text, kMaxShownPathBytes)));
    }
  }
  if (absl::Status s = CheckNodeCount(override_text.substr(eq + 1), source_name, &text); !s.ok()) {
    return s;
  }

  YAML::Node value_yaml;
  try {
    value_yaml = YAML::Load(std::string(override_text.substr(eq + 1)));
  } catch (const std::exception& e) {
    const auto* parser_error = dynamic_cast<const YAML::ParserException*>(&e);
    return absl::InvalidArgumentError(absl::StrCat(
        "override ", shown, ": malformed value: ", parser_error ? parser_error->msg : e.what()));
  }
  SpecNode value;
  Converter converter(source_name, &text);
  try {
    if (absl::Status s = converter.Convert(value_yaml, std::string(path_text), 1, &value);
        !s.ok()) {
      return s;
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("override ", shown, ": malformed value: ", e.what()));
  }

  SpecLoc here;
  here.override_text = text;
  if (root->kind == SpecNode::Kind::kNull) {
    root->kind = SpecNode::Kind::kMap;
  } else if (root->kind != SpecNode::Kind::kMap) {
    return absl::InvalidArgumentError(
        absl::StrCat("override ", shown, ": the job spec is not a map of sections"));
  }
  SpecNode* node = root;
  std::string prefix;
  for (size_t i = 0; i < keys.size(); ++i) {
    prefix = ChildPath(prefix, keys[i]);
    SpecEntry* entry = node->Find(keys[i]);
    if (entry == nullptr) {
      node->entries.push_back(SpecEntry{keys[i], here, SpecNode{}});
      entry = &node->entries.back();
      entry->value.loc = here;
    }
    if (i + 1 == keys.size()) {
      entry->key_loc = here;
      entry->value = std::move(value);
      if (entry->value.kind == SpecNode::Kind::kNull) entry->value.loc = here;
      break;
    }
    if (entry->value.kind == SpecNode::Kind::kNull) {
      entry->value.kind = SpecNode::Kind::kMap;
      entry->value.loc = here;
    } else if (entry->value.kind != SpecNode::Kind::kMap) {
      return absl::InvalidArgumentError(
          absl::StrCat("override ", shown, ": ", Abbreviate(prefix, kMaxShownPathBytes), " is ",
                       entry->value.kind == SpecNode::Kind::kList ? "a list" : "a scalar", " (at ",
                       FormatLoc(entry->value.loc, source_name), "), not a map"));
    }
    node = &entry->value;
  }
  return absl::OkStatus();
}

nlohmann::json SpecToJson(const SpecNode& node) {
  switch (node.kind) {
    case SpecNode::Kind::kNull:
      return nullptr;
    case SpecNode::Kind::kList: {
      nlohmann::json array = nlohmann::json::array();
      for (const SpecNode& item : node.items) array.push_back(SpecToJson(item));
      return array;
    }
    case SpecNode::Kind::kMap: {
      nlohmann::json object = nlohmann::json::object();
      for (const SpecEntry& entry : node.entries) object[entry.key] = SpecToJson(entry.value);
      return object;
    }
    case SpecNode::Kind::kScalar:
      break;
  }
  const ScalarValue v = ClassifyScalar(node);
  switch (v.type) {
    case ScalarValue::Type::kNull:
      return nullptr;
    case ScalarValue::Type::kBool:
      return v.bool_value;
    case ScalarValue::Type::kInt:
      return v.int_value;
    case ScalarValue::Type::kFloat:
      return v.float_value;
    case ScalarValue::Type::kString:
      break;
  }
  return node.scalar;
}

std::string FormatFloat(double value) {
  char buffer[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    double back = 0;
    if (absl::SimpleAtod(buffer, &back) && back == value) break;
  }
  std::string text = buffer;
  if (text.find_first_of("0123456789") == std::string::npos) return text;  // inf / nan.
  const size_t e = text.find_first_of("eE");
  const std::string mantissa = text.substr(0, e);
  if (mantissa.find('.') == std::string::npos) {
    text.insert(e == std::string::npos ? text.size() : e, ".0");
  }
  return text;
}

}  // namespace troupe::recipes::job_spec_internal
