#include "models/chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/chat/jinja_unicode.h"

namespace troupe::models::jinja {

const Value* Dict::Find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Dict::Find(const std::string& key) {
  for (auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(const std::string& key, Value value) {
  if (Value* v = Find(key)) {
    *v = std::move(value);
  } else {
    items.emplace_back(key, std::move(value));
  }
}

const std::string& Value::DefaultHint() {
  static const std::string* const kHint = new std::string("value is undefined");
  return *kHint;
}

Value Value::Undefined(std::string hint) {
  Value v;
  v.s_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}

Value Value::None() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}

Value Value::Bool(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}

Value Value::Float(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::make_shared<const std::string>(std::move(s));
  return v;
}

namespace {

// Containers whose last reference is being dropped, freed one at a time by the outermost ~Value
// of this thread (see ~Value).
struct Graveyard {
  std::vector<std::shared_ptr<const std::vector<Value>>> lists;
  std::vector<std::shared_ptr<Dict>> dicts;
  bool draining = false;
};

Graveyard& ThisThreadsGraveyard() {
  // Never destroyed: a Value may be released while threads and statics shut down.
  static thread_local Graveyard* const graveyard = new Graveyard();
  return *graveyard;
}

}  // namespace

void Value::ReleaseContainers() {
  // Only a last reference frees (and so recurses); others just let go. (Containers are not shared
  // between threads: each render converts its own context, and the tree's literals are scalars.)
  if ((list_ == nullptr || list_.use_count() > 1) && (dict_ == nullptr || dict_.use_count() > 1)) {
    return;
  }
  Graveyard& g = ThisThreadsGraveyard();
  if (list_ != nullptr) g.lists.push_back(std::move(list_));
  if (dict_ != nullptr) g.dicts.push_back(std::move(dict_));
  if (g.draining) return;  // an outer ~Value frees it
  g.draining = true;
  while (!g.lists.empty() || !g.dicts.empty()) {
    // Freeing a container releases its items, whose ~Value queue their containers here.
    if (!g.lists.empty()) {
      std::shared_ptr<const std::vector<Value>> list = std::move(g.lists.back());
      g.lists.pop_back();
      list.reset();
    } else {
      std::shared_ptr<Dict> dict = std::move(g.dicts.back());
      g.dicts.pop_back();
      dict.reset();
    }
  }
  g.draining = false;
}

Value Value::List(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::kList;
  uint16_t deepest = 0;
  bool scalars = true;
  for (const Value& item : items) {
    deepest = std::max(deepest, item.depth_);
    scalars = scalars && item.list_ == nullptr && item.dict_ == nullptr;
  }
  v.depth_ = deepest == UINT16_MAX ? deepest : static_cast<uint16_t>(deepest + 1);
  v.flat_ = scalars;
  v.list_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

Value Value::Tuple(std::vector<Value> items) {
  Value v = List(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::MakeDict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  uint16_t deepest = 0;
  bool scalars = true;
  for (const auto& kv : d.items) {
    deepest = std::max(deepest, kv.second.depth_);
    scalars = scalars && kv.second.list_ == nullptr && kv.second.dict_ == nullptr;
  }
  v.depth_ = deepest == UINT16_MAX ? deepest : static_cast<uint16_t>(deepest + 1);
  v.flat_ = scalars;
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::Namespace(Dict d) {
  Value v = MakeDict(std::move(d));
  v.kind_ = Kind::kNamespace;
  v.depth_ = 0;
  v.flat_ = false;
  return v;
}

Value Value::Macro(const Node* node) {
  Value v;
  v.kind_ = Kind::kMacro;
  v.macro_ = node;
  return v;
}

Value Value::MakeBuiltin(Builtin b) {
  Value v;
  v.kind_ = Kind::kBuiltin;
  v.builtin_ = b;
  return v;
}

Value Value::Loop(int64_t index0, std::shared_ptr<const std::vector<Value>> items) {
  Value v;
  v.kind_ = Kind::kLoop;
  v.i_ = index0;
  v.flat_ = false;
  v.list_ = std::move(items);
  return v;
}

namespace {

// Stops (sets *too_deep, returns None) below max_depth levels of arrays and objects, so that it
// recurses at most that deep.
template <typename Json>
Value FromJsonImpl(const Json& j, int max_depth, bool* too_deep) {
  if (j.is_structured() && max_depth <= 0) {
    *too_deep = true;
    return Value::None();
  }
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::None();
    case nlohmann::json::value_t::boolean:
      return Value::Bool(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value::Int(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return Value::Int(static_cast<int64_t>(j.template get<uint64_t>()));
    case nlohmann::json::value_t::number_float:
      return Value::Float(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value::String(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(FromJsonImpl(e, max_depth - 1, too_deep));
      return Value::List(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        d.items.emplace_back(it.key(), FromJsonImpl(it.value(), max_depth - 1, too_deep));
      }
      return Value::MakeDict(std::move(d));
    }
    default:
      return Value::None();  // binary / discarded: not produced by JSON parsing
  }
}

// Python's repr of a str: quoted with ' (or " when only ' occurs), backslash escapes for the quote,
// \\, \t, \n, \r, and \xhh / \uhhhh / \Uhhhhhhhh for every code point str.isprintable() rejects.
void AppendPyStringRepr(const std::string& s, std::string* out) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  out->push_back(quote);
  for (size_t i = 0; i < s.size();) {
    size_t len;
    const char32_t cp = DecodeUtf8(s, i, &len);
    if (cp == static_cast<unsigned char>(quote) || cp == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(cp));
    } else if (cp == '\n') {
      out->append("\\n");
    } else if (cp == '\r') {
      out->append("\\r");
    } else if (cp == '\t') {
      out->append("\\t");
    } else if (len == 1 && cp >= 0x80) {
      // Not UTF-8 (never from JSON): the byte as it is.
      out->push_back(s[i]);
    } else if (IsPyPrintable(cp)) {
      out->append(s, i, len);
    } else if (cp <= 0xff) {
      absl::StrAppend(out, "\\x", absl::Hex(static_cast<uint32_t>(cp), absl::kZeroPad2));
    } else if (cp <= 0xffff) {
      absl::StrAppend(out, "\\u", absl::Hex(static_cast<uint32_t>(cp), absl::kZeroPad4));
    } else {
      absl::StrAppend(out, "\\U", absl::Hex(static_cast<uint32_t>(cp), absl::kZeroPad8));
    }
    i += len;
  }
  out->push_back(quote);
}

void Newline(int indent, int level, std::string* out) {
  out->push_back('\n');
  out->append(static_cast<size_t>(indent) * level, ' ');
}

bool ToJsonImpl(const Value& v, int indent, int level, const std::string& item_sep,
                const std::string& key_sep, bool sort_keys, std::string* out, std::string* error) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      out->append("null");
      return true;
    case Value::Kind::kBool:
      out->append(v.as_bool() ? "true" : "false");
      return true;
    case Value::Kind::kInt:
      absl::StrAppend(out, v.as_int());
      return true;
    case Value::Kind::kFloat: {
      const double f = v.as_float();
      if (std::isnan(f)) {
        out->append("NaN");
      } else if (std::isinf(f)) {
        out->append(f > 0 ? "Infinity" : "-Infinity");
      } else {
        out->append(FloatRepr(f));
      }
      return true;
    }
    case Value::Kind::kString:
      AppendJsonString(v.str(), out);
      return true;
    case Value::Kind::kList: {
      const auto& items = v.list();
      if (items.empty()) {
        out->append("[]");
        return true;
      }
      out->push_back('[');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out->append(item_sep);
        if (indent >= 0) Newline(indent, level + 1, out);
        if (!ToJsonImpl(items[i], indent, level + 1, item_sep, key_sep, sort_keys, out, error)) {
          return false;
        }
      }
      if (indent >= 0) Newline(indent, level, out);
      out->push_back(']');
      return true;
    }
    case Value::Kind::kDict: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (const auto& kv : v.dict().items) items.push_back(&kv);
      if (items.empty()) {
        out->append("{}");
        return true;
      }
      if (sort_keys) {
        std::sort(items.begin(), items.end(),
                  [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      out->push_back('{');
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out->append(item_sep);
        if (indent >= 0) Newline(indent, level + 1, out);
        AppendJsonString(items[i]->first, out);
        out->append(key_sep);
        if (!ToJsonImpl(items[i]->second, indent, level + 1, item_sep, key_sep, sort_keys, out,
                        error)) {
          return false;
        }
      }
      if (indent >= 0) Newline(indent, level, out);
      out->push_back('}');
      return true;
    }
    default:
      *error = absl::StrCat("Object of type ", v.TypeName(), " is not JSON serializable");
      return false;
  }
}

}  // namespace

Value Value::FromJson(const nlohmann::json& j, int max_depth, bool* too_deep) {
  *too_deep = false;
  return FromJsonImpl(j, max_depth, too_deep);
}
Value Value::FromJson(const nlohmann::ordered_json& j, int max_depth, bool* too_deep) {
  *too_deep = false;
  return FromJsonImpl(j, max_depth, too_deep);
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !s_->empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->items.empty();
    default:
      return true;
  }
}

// str(x) of a value within a byte limit and a nesting depth, with Python's guard against printing
// a container inside itself (a namespace can hold itself): "[...]", "{...}".
class Value::Printer {
 public:
  Printer(std::string* out, size_t limit, int max_depth)
      : out_(out), limit_(limit), max_depth_(max_depth) {}

  // False once the text is longer than the limit or nests deeper than max_depth.
  bool Str(const Value& v) {
    switch (v.kind_) {
      case Kind::kUndefined:
        return true;
      case Kind::kNone:
        out_->append("None");
        return true;
      case Kind::kBool:
        out_->append(v.b_ ? "True" : "False");
        return true;
      case Kind::kInt:
        absl::StrAppend(out_, v.i_);
        return true;
      case Kind::kFloat:
        out_->append(FloatRepr(v.f_));
        return true;
      case Kind::kString:
        out_->append(*v.s_);
        return out_->size() <= limit_;
      case Kind::kList: {
        const char open = v.tuple_ ? '(' : '[', close = v.tuple_ ? ')' : ']';
        if (Active(v.list_.get())) {
          *out_ += {open, '.', '.', '.', close};
          return true;
        }
        if (active_.size() >= static_cast<size_t>(max_depth_)) return TooDeep();
        active_.push_back(v.list_.get());
        out_->push_back(open);
        for (size_t i = 0; i < v.list_->size(); ++i) {
          if (i > 0) out_->append(", ");
          if (!Repr((*v.list_)[i])) return false;
        }
        if (v.tuple_ && v.list_->size() == 1) out_->push_back(',');
        out_->push_back(close);
        active_.pop_back();
        return true;
      }
      case Kind::kDict:
      case Kind::kNamespace: {
        const bool ns = v.kind_ == Kind::kNamespace;
        if (ns) out_->append("<Namespace ");
        if (Active(v.dict_.get())) {
          out_->append("{...}");
        } else {
          if (active_.size() >= static_cast<size_t>(max_depth_)) return TooDeep();
          active_.push_back(v.dict_.get());
          out_->push_back('{');
          for (size_t i = 0; i < v.dict_->items.size(); ++i) {
            if (i > 0) out_->append(", ");
            AppendPyStringRepr(v.dict_->items[i].first, out_);
            out_->append(": ");
            if (!Repr(v.dict_->items[i].second)) return false;
          }
          out_->push_back('}');
          active_.pop_back();
        }
        if (ns) out_->push_back('>');
        return out_->size() <= limit_;
      }
      case Kind::kMacro:
        out_->append("<Macro>");
        return true;
      case Kind::kBuiltin:
        out_->append("<built-in function>");
        return true;
      case Kind::kLoop:
        out_->append("<LoopContext>");
        return true;
    }
    return true;
  }

  // repr(x): strings quoted, everything else as str(x).
  bool Repr(const Value& v) {
    if (!v.is_string()) return Str(v);
    AppendPyStringRepr(v.str(), out_);
    return out_->size() <= limit_;
  }

  bool too_deep() const { return too_deep_; }

 private:
  bool TooDeep() {
    too_deep_ = true;
    return false;
  }
  bool Active(const void* container) const {
    for (const void* a : active_) {
      if (a == container) return true;
    }
    return false;
  }

  std::string* out_;
  const size_t limit_;
  const int max_depth_;
  std::vector<const void*> active_;  // the containers being printed, outermost first
  bool too_deep_ = false;
};

bool Value::AppendString(std::string* out, size_t limit, int max_depth, bool* too_deep) const {
  Printer printer(out, limit, max_depth);
  const bool ok = printer.Str(*this);
  if (too_deep != nullptr) *too_deep = printer.too_deep();
  return ok;
}

void Value::AppendString(std::string* out) const {
  AppendString(out, std::string::npos, kMaxPrintDepth, nullptr);
}

std::string Value::ToString() const {
  std::string out;
  AppendString(&out);
  return out;
}

std::string Value::Repr() const {
  std::string out;
  Printer(&out, std::string::npos, kMaxPrintDepth).Repr(*this);
  return out;
}

std::string Value::TypeName() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kMacro:
      return "Macro";
    case Kind::kBuiltin:
      return "builtin_function_or_method";
    case Kind::kLoop:
      return "LoopContext";
  }
  return "object";
}

bool Value::ToJson(int indent, const std::string& item_sep, const std::string& key_sep,
                   bool sort_keys, std::string* out, std::string* error) const {
  return ToJsonImpl(*this, indent, 0, item_sep, key_sep, sort_keys, out, error);
}

bool Equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) {
      return a.as_float() == b.as_float();
    }
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.str() == b.str();
    case Value::Kind::kList: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!Equals(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* other = b.dict().Find(k);
        if (other == nullptr || !Equals(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kMacro:
      return a.macro() == b.macro();
    case Value::Kind::kBuiltin:
      return a.builtin() == b.builtin();
    case Value::Kind::kLoop:
      return &a.loop_items() == &b.loop_items() && a.loop_index0() == b.loop_index0();
    default:
      return &a.dict() == &b.dict();
  }
}

bool LessThan(const Value& a, const Value& b, bool* ok) {
  *ok = true;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat) {
      return a.as_float() < b.as_float();
    }
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list()) {
    const auto& x = a.list();
    const auto& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equals(x[i], y[i])) continue;
      return LessThan(x[i], y[i], ok);
    }
    return x.size() < y.size();
  }
  *ok = false;
  return false;
}

std::string FloatRepr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[40];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*e", precision - 1, f);
    if (std::strtod(buf, nullptr) == f) break;
  }
  std::string s(buf);
  const size_t e = s.find('e');
  const int exponent = std::atoi(s.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (s[i] >= '0' && s[i] <= '9') digits.push_back(s[i]);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out = (s[0] == '-') ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out.push_back(digits[0]);
    if (digits.size() > 1) absl::StrAppend(&out, ".", digits.substr(1));
    absl::StrAppend(&out, "e", exponent < 0 ? "-" : "+");
    const int mag = std::abs(exponent);
    if (mag < 10) out.push_back('0');
    absl::StrAppend(&out, mag);
  } else if (exponent >= 0) {
    const size_t int_digits = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= int_digits) {
      absl::StrAppend(&out, digits, std::string(int_digits - digits.size(), '0'), ".0");
    } else {
      absl::StrAppend(&out, digits.substr(0, int_digits), ".", digits.substr(int_digits));
    }
  } else {
    absl::StrAppend(&out, "0.", std::string(-exponent - 1, '0'), digits);
  }
  return out;
}

void AppendJsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (const char ch : s) {
    const unsigned char c = ch;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (c < 0x20) {
          absl::StrAppend(out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

}  // namespace troupe::models::jinja
