// The filters of the Jinja interpreter (Renderer::ApplyFilter, declared in jinja_eval.h):
// abs capitalize count d default dictsort first float indent int items join last length list
// lower map max min reject rejectattr replace reverse round safe select selectattr sort string
// sum title tojson trim unique upper. tojson is transformers' (json.dumps with ensure_ascii=False,
// indent, separators, sort_keys). Any other name is refused with "No filter named 'x'.".
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "models/chat/jinja_eval.h"

namespace troupe::models::jinja {

namespace {

// ensure_ascii=True: every non-ASCII code point of a JSON text as \uXXXX (surrogate pairs above
// U+FFFF).
std::string EscapeNonAscii(const std::string& s) {
  std::string out;
  for (const std::string& cp : SplitCodePoints(s)) {
    const unsigned char c = cp[0];
    if (c < 0x80) {
      out += cp;
      continue;
    }
    uint32_t v = 0;
    if (cp.size() == 2) v = ((c & 0x1f) << 6) | (cp[1] & 0x3f);
    if (cp.size() == 3) v = ((c & 0x0f) << 12) | ((cp[1] & 0x3f) << 6) | (cp[2] & 0x3f);
    if (cp.size() == 4) {
      v = ((c & 0x07) << 18) | ((cp[1] & 0x3f) << 12) | ((cp[2] & 0x3f) << 6) | (cp[3] & 0x3f);
    }
    auto emit = [&](uint32_t u) { absl::StrAppend(&out, "\\u", absl::Hex(u, absl::kZeroPad4)); };
    if (v >= 0x10000) {
      v -= 0x10000;
      emit(0xd800 + (v >> 10));
      emit(0xdc00 + (v & 0x3ff));
    } else {
      emit(v);
    }
  }
  return out;
}

}  // namespace

Value Renderer::ApplyFilter(const std::string& name, const Value& v, CallArgs args) {
  if (name == "safe") return v;
  if (name == "trim") return Value::String(Strip(Str(v), Arg(args, 0, "chars"), true, true));
  if (name == "upper") return Value::String(AsciiUpper(Str(v)));
  if (name == "lower") return Value::String(AsciiLower(Str(v)));
  if (name == "title") return Value::String(JinjaTitle(Str(v)));
  if (name == "capitalize") return Value::String(Capitalize(Str(v)));
  if (name == "string") return v.is_string() ? v : Value::String(Str(v));
  if (name == "length" || name == "count") {
    if (v.is_string()) return Value::Int(static_cast<int64_t>(CountCodePoints(v.str())));
    if (v.is_list()) return Value::Int(static_cast<int64_t>(v.list().size()));
    if (v.is_mapping()) return Value::Int(static_cast<int64_t>(v.dict().items.size()));
    if (v.is_undefined()) return Value::Int(0);
    Fail(absl::StrCat("object of type '", v.TypeName(), "' has no len()"));
  }
  if (name == "tojson") {
    const Value ensure_ascii = Arg(args, 0, "ensure_ascii", Value::Bool(false));
    const Value indent = Arg(args, 1, "indent", Value::None());
    const Value separators = Arg(args, 2, "separators", Value::None());
    const Value sort_keys = Arg(args, 3, "sort_keys", Value::Bool(false));
    if (!indent.is_none() && indent.kind() != Value::Kind::kInt) {
      Fail("tojson: indent must be an integer or none");
    }
    const int ind = indent.is_none() ? -1 : static_cast<int>(std::max<int64_t>(0, indent.as_int()));
    std::string item_sep = ind >= 0 ? "," : ", ", key_sep = ": ";
    if (!separators.is_none()) {
      if (!separators.is_list() || separators.list().size() != 2 ||
          !separators.list()[0].is_string() || !separators.list()[1].is_string()) {
        Fail("tojson: separators must be a pair of strings");
      }
      item_sep = separators.list()[0].str();
      key_sep = separators.list()[1].str();
    }
    std::string out, error;
    if (!v.ToJson(ind, item_sep, key_sep, sort_keys.Truthy(), &out, &error)) Fail(error);
    CheckSize(out.size());
    return Value::String(ensure_ascii.Truthy() ? EscapeNonAscii(out) : std::move(out));
  }
  if (name == "default" || name == "d") {
    const Value dflt = Arg(args, 0, "default_value", Value::String(""));
    const bool boolean = Arg(args, 1, "boolean", Value::Bool(false)).Truthy();
    if (v.is_undefined() || (boolean && !v.Truthy())) return dflt;
    return v;
  }
  if (name == "int" || name == "float") {
    const bool is_int = name == "int";
    const Value dflt = Arg(args, 0, "default", is_int ? Value::Int(0) : Value::Float(0));
    if (v.is_number()) {
      return is_int ? Value::Int(v.kind() == Value::Kind::kFloat
                                     ? static_cast<int64_t>(std::trunc(v.as_float()))
                                     : v.as_int())
                    : Value::Float(v.as_float());
    }
    if (!v.is_string()) return dflt;
    const std::string s = Strip(v.str(), Value(), true, true);
    if (s.empty()) return dflt;
    char* end = nullptr;
    if (is_int) {
      const long long i = std::strtoll(s.c_str(), &end, 10);
      if (end == s.c_str() + s.size()) return Value::Int(i);
    }
    const double f = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return dflt;
    return is_int ? Value::Int(static_cast<int64_t>(std::trunc(f))) : Value::Float(f);
  }
  if (name == "abs") {
    CheckDefined(v);
    if (!v.is_number()) Fail(absl::StrCat("bad operand type for abs(): '", v.TypeName(), "'"));
    return v.kind() == Value::Kind::kFloat ? Value::Float(std::fabs(v.as_float()))
                                           : Value::Int(std::llabs(v.as_int()));
  }
  if (name == "round") {
    CheckDefined(v);
    if (!v.is_number()) Fail("round needs a number");
    const int64_t precision = Arg(args, 0, "precision", Value::Int(0)).as_int();
    const std::string method = Arg(args, 1, "method", Value::String("common")).ToString();
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = v.as_float() * scale;
    double r;
    if (method == "common") {
      r = std::nearbyint(x);
    } else if (method == "ceil") {
      r = std::ceil(x);
    } else if (method == "floor") {
      r = std::floor(x);
    } else {
      Fail("method must be common, ceil or floor");
    }
    return Value::Float(r / scale);
  }
  if (name == "replace") {
    const Value from = Arg(args, 0, "old"), to = Arg(args, 1, "new");
    const Value count = Arg(args, 2, "count", Value::None());
    std::string r = Replace(Str(v), Str(from), Str(to), count.is_none() ? -1 : count.as_int());
    CheckSize(r.size());
    return Value::String(std::move(r));
  }
  if (name == "indent") {
    const Value width = Arg(args, 0, "width", Value::Int(4));
    const bool first = Arg(args, 1, "first", Value::Bool(false)).Truthy();
    const bool blank = Arg(args, 2, "blank", Value::Bool(false)).Truthy();
    const std::string pad =
        width.is_string() ? width.str() : std::string(std::max<int64_t>(0, width.as_int()), ' ');
    std::vector<std::string> lines = SplitLines(Str(v) + "\n");
    std::string out;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) {
        out += "\n";
        if (blank || !lines[i].empty()) out += pad;
      }
      out += lines[i];
      CheckSize(out.size());
    }
    if (first) out = pad + out;
    return Value::String(std::move(out));
  }
  if (name == "items") {
    if (v.is_undefined()) return Value::List({});
    if (!v.is_mapping())
      Fail(absl::StrCat("Can only get item pairs from a mapping, not ", v.TypeName()));
    std::vector<Value> items;
    for (const auto& [k, x] : v.dict().items) items.push_back(Value::Tuple({Value::String(k), x}));
    return Value::List(std::move(items));
  }
  if (name == "dictsort") {
    if (!v.is_mapping()) Fail("dictsort needs a mapping");
    std::vector<std::pair<std::string, Value>> items = v.dict().items;
    std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
      return AsciiLower(a.first) < AsciiLower(b.first);
    });
    std::vector<Value> out;
    for (auto& [k, x] : items) out.push_back(Value::Tuple({Value::String(k), x}));
    return Value::List(std::move(out));
  }
  // The filters below take a sequence.
  CheckDefined(v);
  if (name == "list") return Value::List(Iterate(v));
  if (name == "first" || name == "last") {
    std::vector<Value> items = Iterate(v);
    if (items.empty())
      return Value::Undefined(absl::StrCat("No ", name, " item, sequence was empty."));
    return name == "first" ? items.front() : items.back();
  }
  if (name == "reverse") {
    if (v.is_string()) {
      std::vector<std::string> cps = SplitCodePoints(v.str());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value::String(std::move(out));
    }
    std::vector<Value> items = Iterate(v);
    std::reverse(items.begin(), items.end());
    return Value::List(std::move(items));
  }
  if (name == "join") {
    const std::string sep = Str(Arg(args, 0, "d", Value::String("")));
    const Value attribute = Arg(args, 1, "attribute", Value::None());
    std::string out;
    const std::vector<Value> items = Iterate(v);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += sep;
      if (attribute.is_none()) {
        out += Str(items[i]);
      } else {
        out += Str(GetItem(items[i], attribute));
      }
      CheckSize(out.size());
    }
    return Value::String(std::move(out));
  }
  if (name == "map") {
    std::vector<Value> out;
    const std::vector<Value> items = Iterate(v);
    if (const Value* attribute = Kwarg(args, "attribute")) {
      const Value* dflt = Kwarg(args, "default");
      for (const Value& item : items) {
        Value x = GetItem(item, *attribute);
        if (x.is_undefined() && dflt != nullptr) x = *dflt;
        out.push_back(std::move(x));
      }
      return Value::List(std::move(out));
    }
    if (args.args.empty() || !args.args[0].is_string())
      Fail("map: needs attribute= or a filter name");
    const std::string filter = args.args[0].str();
    CallArgs rest;
    rest.args.assign(args.args.begin() + 1, args.args.end());
    rest.kwargs = args.kwargs;
    for (const Value& item : items) out.push_back(ApplyFilter(filter, item, rest));
    return Value::List(std::move(out));
  }
  if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
    const bool by_attr = name == "selectattr" || name == "rejectattr";
    const bool keep = name == "select" || name == "selectattr";
    size_t next = 0;
    Value attribute;
    if (by_attr) {
      if (args.args.empty()) Fail(absl::StrCat(name, ": needs an attribute"));
      attribute = args.args[next++];
    }
    std::string test;
    if (next < args.args.size()) test = args.args[next++].ToString();
    CallArgs test_args;
    test_args.args.assign(args.args.begin() + next, args.args.end());
    std::vector<Value> out;
    for (const Value& item : Iterate(v)) {
      const Value x = by_attr ? GetItem(item, attribute) : item;
      const bool pass = test.empty() ? x.Truthy() : ApplyTest(test, x, test_args);
      if (pass == keep) out.push_back(item);
    }
    return Value::List(std::move(out));
  }
  if (name == "unique" || name == "sort" || name == "min" || name == "max" || name == "sum") {
    std::vector<Value> items = Iterate(v);
    const Value attribute = Kwarg(args, "attribute") ? *Kwarg(args, "attribute") : Value::None();
    const bool case_sensitive =
        Kwarg(args, "case_sensitive") && Kwarg(args, "case_sensitive")->Truthy();
    auto key = [&](const Value& item) {
      Value k = attribute.is_none() ? item : GetItem(item, attribute);
      if (k.is_string() && !case_sensitive) return Value::String(AsciiLower(k.str()));
      return k;
    };
    auto less = [&](const Value& a, const Value& b) {
      bool ok = true;
      const bool r = LessThan(key(a), key(b), &ok);
      if (!ok)
        Fail(absl::StrCat("'<' not supported between instances of '", a.TypeName(), "' and '",
                          b.TypeName(), "'"));
      return r;
    };
    if (name == "sum") {
      Value total = Kwarg(args, "start") ? *Kwarg(args, "start") : Value::Int(0);
      for (const Value& item : items) {
        total = Binary("+", total, attribute.is_none() ? item : GetItem(item, attribute));
      }
      return total;
    }
    if (name == "unique") {
      std::vector<Value> out;
      for (const Value& item : items) {
        bool seen = false;
        for (const Value& o : out) seen = seen || Equals(key(o), key(item));
        if (!seen) out.push_back(item);
      }
      return Value::List(std::move(out));
    }
    if (name == "sort") {
      const bool reverse = Arg(args, 0, "reverse", Value::Bool(false)).Truthy();
      std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        return reverse ? less(b, a) : less(a, b);
      });
      return Value::List(std::move(items));
    }
    if (items.empty())
      return Value::Undefined(absl::StrCat("No aggregated item, sequence was empty."));
    auto it = name == "min" ? std::min_element(items.begin(), items.end(), less)
                            : std::max_element(items.begin(), items.end(), less);
    return *it;
  }
  Fail(absl::StrCat("No filter named '", name, "'."));
}

bool IsKnownFilter(const std::string& name) {
  static const auto* const kNames = new absl::flat_hash_set<std::string>{
      "abs",     "capitalize", "count", "d",      "default", "dictsort",   "first",
      "float",   "indent",     "int",   "items",  "join",    "last",       "length",
      "list",    "lower",      "map",   "max",    "min",     "reject",     "rejectattr",
      "replace", "reverse",    "round", "safe",   "select",  "selectattr", "sort",
      "string",  "sum",        "title", "tojson", "trim",    "unique",     "upper"};
  return kNames->contains(name);
}

bool IsKnownTest(const std::string& name) {
  static const auto* const kNames = new absl::flat_hash_set<std::string>{
      "boolean", "callable", "defined",  "divisibleby", "eq",          "equalto",
      "even",    "false",    "float",    "ge",          "greaterthan", "gt",
      "in",      "integer",  "iterable", "le",          "lessthan",    "lower",
      "lt",      "mapping",  "ne",       "none",        "number",      "odd",
      "sameas",  "sequence", "string",   "true",        "undefined",   "upper",
      "==",      "!=",       "<",        "<=",          ">",           ">="};
  return kNames->contains(name);
}

}  // namespace troupe::models::jinja
