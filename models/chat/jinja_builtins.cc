// Attribute/item access, operators, filters, tests, methods and global functions of the Jinja
// interpreter (Renderer members declared in jinja_eval.h). Python semantics throughout; anything
// not listed here is refused with an error naming it.
//
// Filters: abs capitalize count d default dictsort first float indent int items join last length
//   list lower map max min reject rejectattr replace reverse round safe select selectattr sort
//   string sum title tojson trim unique upper.
// Tests: boolean callable defined divisibleby eq equalto even false float ge gt in integer
//   iterable le lower lt mapping ne none number odd sameas sequence string true undefined upper
//   (and ==, !=, <, <=, >, >=).
// String methods: capitalize count endswith find format join lower lstrip replace rstrip split
//   splitlines startswith strip title upper. Dict methods: get items keys values.
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

std::vector<std::string> SplitCodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + len > s.size()) len = s.size() - i;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

size_t CountCodePoints(const std::string& s) {
  size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

namespace {

bool IsPySpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' ||
         (c >= 0x1c && c <= 0x1f);
}

std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  auto strip_char = [&](char c) {
    if (chars.is_string()) return chars.str().find(c) != std::string::npos;
    return IsPySpace(c);
  };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e && strip_char(s[b])) ++b;
  }
  if (right) {
    while (e > b && strip_char(s[e - 1])) --e;
  }
  return s.substr(b, e - b);
}

std::string AsciiUpper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

std::string AsciiLower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Python's str.title (ASCII letters): a letter after a non-letter is upper-cased, others lowered.
std::string PyTitle(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    if (IsAlpha(c)) {
      c = prev_cased ? AsciiLower(std::string(1, c))[0] : AsciiUpper(std::string(1, c))[0];
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}

// Jinja's title filter: words start after runs of whitespace, '-', '(', '{', '[' or '<'.
std::string JinjaTitle(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    if (IsPySpace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<') {
      start = true;
      continue;
    }
    c = start ? AsciiUpper(std::string(1, c))[0] : AsciiLower(std::string(1, c))[0];
    start = false;
  }
  return out;
}

std::string Capitalize(const std::string& s) {
  std::string out = AsciiLower(s);
  if (!out.empty()) out[0] = AsciiUpper(out.substr(0, 1))[0];
  return out;
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count) {
  if (from.empty()) {
    // Python inserts `to` around every code point.
    std::string out;
    int64_t done = 0;
    for (const std::string& cp : SplitCodePoints(s)) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += cp;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  std::string out;
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(from, pos);
    if (hit == std::string::npos) break;
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

std::vector<Value> Split(const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<Value> out;
  if (!sep.is_string()) {
    size_t i = 0;
    int64_t splits = 0;
    while (true) {
      while (i < s.size() && IsPySpace(s[i])) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && splits >= maxsplit) {
        size_t e = s.size();
        while (e > i && IsPySpace(s[e - 1])) --e;
        out.push_back(Value::String(s.substr(i, e - i)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !IsPySpace(s[j])) ++j;
      out.push_back(Value::String(s.substr(i, j - i)));
      ++splits;
      i = j;
    }
    return out;
  }
  const std::string& d = sep.str();
  size_t pos = 0;
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    const size_t hit = s.find(d, pos);
    if (hit == std::string::npos) break;
    out.push_back(Value::String(s.substr(pos, hit - pos)));
    pos = hit + d.size();
    ++splits;
  }
  out.push_back(Value::String(s.substr(pos)));
  return out;
}

const Value* Kwarg(const CallArgs& args, const std::string& name) {
  for (const auto& [k, v] : args.kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

// The i-th argument, given by position or by name; `fallback` when absent.
Value Arg(const CallArgs& args, size_t i, const std::string& name, Value fallback = Value()) {
  if (i < args.args.size()) return args.args[i];
  if (const Value* v = Kwarg(args, name)) return *v;
  return fallback;
}

}  // namespace

std::vector<Value> Renderer::Iterate(const Value& v) const {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.list();
    case Value::Kind::kDict: {
      std::vector<Value> keys;
      for (const auto& kv : v.dict().items) keys.push_back(Value::String(kv.first));
      return keys;
    }
    case Value::Kind::kString: {
      std::vector<Value> chars;
      for (std::string& cp : SplitCodePoints(v.str())) chars.push_back(Value::String(std::move(cp)));
      return chars;
    }
    default:
      Fail(absl::StrCat("'", v.TypeName(), "' object is not iterable"));
  }
}

Value Renderer::GetAttr(const Value& obj, const std::string& name) const {
  CheckDefined(obj);
  if (obj.is_mapping() || obj.kind() == Value::Kind::kLoop) {
    if (const Value* v = obj.dict().Find(name)) return *v;
  }
  return Value::Undefined(absl::StrCat("'", obj.TypeName(), " object' has no attribute '", name, "'"));
}

Value Renderer::GetItem(const Value& obj, const Value& key) const {
  CheckDefined(obj);
  if ((obj.is_list() || obj.is_string()) && key.is_number() &&
      key.kind() != Value::Kind::kFloat) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const int64_t n = static_cast<int64_t>(obj.list().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.list()[i];
    } else {
      std::vector<std::string> cps = SplitCodePoints(obj.str());
      const int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value::String(cps[i]);
    }
    return Value::Undefined(absl::StrCat("'", obj.TypeName(), " object' has no element ", key.as_int()));
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(absl::StrCat("'", obj.TypeName(), " object' has no element ", key.Repr()));
}

Value Renderer::Slice(const Value& obj, const Value& start_v, const Value& stop_v,
                      const Value& step_v) {
  CheckDefined(obj);
  if (!obj.is_list() && !obj.is_string()) Fail(absl::StrCat("'", obj.TypeName(), "' object is not subscriptable"));
  for (const Value* v : {&start_v, &stop_v, &step_v}) {
    if (!v->is_none() && !(v->is_number() && v->kind() != Value::Kind::kFloat)) {
      Fail("slice indices must be integers or None");
    }
  }
  std::vector<std::string> cps;
  if (obj.is_string()) cps = SplitCodePoints(obj.str());
  const int64_t n = obj.is_list() ? static_cast<int64_t>(obj.list().size()) : cps.size();
  const int64_t step = step_v.is_none() ? 1 : step_v.as_int();
  if (step == 0) Fail("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t start = clamp(start_v, step > 0 ? 0 : n - 1);
  const int64_t stop = clamp(stop_v, step > 0 ? n : -1);
  std::vector<Value> items;
  std::string s;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (obj.is_list()) {
      items.push_back(obj.list()[i]);
    } else {
      s += cps[i];
    }
  }
  return obj.is_list() ? Value::List(std::move(items)) : Value::String(std::move(s));
}

Value Renderer::Binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.ToString();
    b.AppendString(&s);
    CheckSize(s.size());
    return Value::String(std::move(s));
  }
  CheckDefined(a);
  CheckDefined(b);
  auto unsupported = [&]() {
    Fail(absl::StrCat("unsupported operand type(s) for ", op, ": '", a.TypeName(), "' and '",
                      b.TypeName(), "'"));
  };
  if (a.is_number() && b.is_number()) {
    const bool is_float = a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat;
    const double x = a.as_float(), y = b.as_float();
    const int64_t i = a.as_int(), j = b.as_int();
    if (op == "+") return is_float ? Value::Float(x + y) : Value::Int(i + j);
    if (op == "-") return is_float ? Value::Float(x - y) : Value::Int(i - j);
    if (op == "*") return is_float ? Value::Float(x * y) : Value::Int(i * j);
    if (op == "/") {
      if (y == 0) Fail("division by zero");
      return Value::Float(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) Fail(op == "%" ? "modulo by zero" : "integer division or modulo by zero");
      if (is_float) {
        const double q = std::floor(x / y);
        return op == "//" ? Value::Float(q) : Value::Float(x - q * y);
      }
      int64_t q = i / j;
      if ((i % j != 0) && ((i < 0) != (j < 0))) --q;
      return op == "//" ? Value::Int(q) : Value::Int(i - q * j);
    }
    if (op == "**") {
      if (!is_float && j >= 0) {
        const double r = std::pow(x, y);
        if (std::fabs(r) > 9.2e18) Fail("integer result of ** too large");
        int64_t acc = 1;
        for (int64_t k = 0; k < j; ++k) acc *= i;
        return Value::Int(acc);
      }
      return Value::Float(std::pow(x, y));
    }
  }
  if (op == "+" && (a.is_string() || a.is_list()) && a.kind() != b.kind()) {
    const char* type = a.is_string() ? "str" : "list";
    Fail(absl::StrCat("can only concatenate ", type, " (not \"", b.TypeName(), "\") to ", type));
  }
  if (op == "+" && a.is_string() && b.is_string()) {
    CheckSize(a.str().size() + b.str().size());
    return Value::String(a.str() + b.str());
  }
  if (op == "+" && a.is_list() && b.is_list()) {
    CountIterations(0);
    if (a.list().size() + b.list().size() > static_cast<size_t>(options_.max_loop_iterations)) {
      FailLimit("list size exceeds max_loop_iterations");
    }
    std::vector<Value> items = a.list();
    items.insert(items.end(), b.list().begin(), b.list().end());
    return Value::List(std::move(items));
  }
  if (op == "*" && (a.is_string() || a.is_list()) && b.is_number() &&
      b.kind() != Value::Kind::kFloat) {
    const int64_t times = std::max<int64_t>(0, b.as_int());
    if (a.is_string()) {
      CheckSize(a.str().size() * static_cast<size_t>(times));
      std::string s;
      for (int64_t k = 0; k < times; ++k) s += a.str();
      return Value::String(std::move(s));
    }
    if (a.list().size() * times > static_cast<size_t>(options_.max_loop_iterations)) {
      FailLimit("list size exceeds max_loop_iterations");
    }
    std::vector<Value> items;
    for (int64_t k = 0; k < times; ++k) items.insert(items.end(), a.list().begin(), a.list().end());
    return Value::List(std::move(items));
  }
  if (op == "*" && a.is_number() && (b.is_string() || b.is_list())) return Binary(op, b, a);
  unsupported();
  return Value();
}

bool Renderer::Compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "==") return Equals(a, b);
  if (op == "!=") return !Equals(a, b);
  if (op == "in" || op == "not in") {
    bool found = false;
    if (b.is_string()) {
      if (!a.is_string()) {
        Fail(absl::StrCat("'in <string>' requires string as left operand, not ", a.TypeName()));
      }
      found = b.str().find(a.str()) != std::string::npos;
    } else if (b.is_list()) {
      for (const Value& item : b.list()) found = found || Equals(item, a);
    } else if (b.is_mapping()) {
      found = a.is_string() && b.dict().Find(a.str()) != nullptr;
    } else if (!b.is_undefined()) {
      Fail(absl::StrCat("argument of type '", b.TypeName(), "' is not iterable"));
    }
    return op == "in" ? found : !found;
  }
  CheckDefined(a);
  CheckDefined(b);
  bool ok = true;
  bool result = false;
  if (op == "<") result = LessThan(a, b, &ok);
  if (op == ">") result = LessThan(b, a, &ok);
  if (op == "<=") result = !LessThan(b, a, &ok);
  if (op == ">=") result = !LessThan(a, b, &ok);
  if (!ok) {
    Fail(absl::StrCat("'", op, "' not supported between instances of '", a.TypeName(), "' and '",
                      b.TypeName(), "'"));
  }
  return result;
}

bool Renderer::ApplyTest(const std::string& name, const Value& v, const CallArgs& args) {
  const Value arg = Arg(args, 0, "other");
  const Value::Kind k = v.kind();
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_mapping();
  if (name == "number") return v.is_number();
  if (name == "integer") return k == Value::Kind::kInt;
  if (name == "float") return k == Value::Kind::kFloat;
  if (name == "boolean") return k == Value::Kind::kBool;
  if (name == "true") return k == Value::Kind::kBool && v.as_bool();
  if (name == "false") return k == Value::Kind::kBool && !v.as_bool();
  if (name == "callable") return v.is_callable();
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict();
  if (name == "lower") return v.is_string() && AsciiLower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && AsciiUpper(v.str()) == v.str();
  if (name == "odd" || name == "even" || name == "divisibleby") {
    CheckDefined(v);
    if (!v.is_number() || k == Value::Kind::kFloat) Fail(absl::StrCat("test '", name, "' needs an integer"));
    const int64_t i = v.as_int();
    if (name == "odd") return i % 2 != 0;
    if (name == "even") return i % 2 == 0;
    const Value d = Arg(args, 0, "num");
    if (!d.is_number() || d.as_int() == 0) Fail("divisibleby needs a non-zero integer");
    return i % d.as_int() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return Compare("==", v, arg);
  if (name == "ne" || name == "!=") return Compare("!=", v, arg);
  if (name == "lt" || name == "lessthan" || name == "<") return Compare("<", v, arg);
  if (name == "le" || name == "<=") return Compare("<=", v, arg);
  if (name == "gt" || name == "greaterthan" || name == ">") return Compare(">", v, arg);
  if (name == "ge" || name == ">=") return Compare(">=", v, arg);
  if (name == "in") return Compare("in", v, Arg(args, 0, "seq"));
  if (name == "sameas") {
    if (v.is_mapping() || v.is_list()) return Equals(v, arg) && v.kind() == arg.kind();
    return v.kind() == arg.kind() && Equals(v, arg);
  }
  Fail(absl::StrCat("No test named '", name, "'."));
}

// Python's str.format with {} / {0} / {name} fields (no format specs).
static std::string PyFormat(const Renderer& r, const std::string& fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out.push_back('}');
      ++i;
    } else if (c == '{') {
      const size_t close = fmt.find('}', i);
      if (close == std::string::npos) r.Fail("Single '{' encountered in format string");
      const std::string field = fmt.substr(i + 1, close - i - 1);
      if (field.find_first_of(":!.[") != std::string::npos) {
        r.Fail(absl::StrCat("format field '{", field, "}' is not supported"));
      }
      const Value* v = nullptr;
      size_t index = 0;
      if (field.empty()) {
        index = auto_index++;
      } else if (std::all_of(field.begin(), field.end(), ::isdigit)) {
        index = std::stoul(field);
      } else {
        v = Kwarg(args, field);
        if (v == nullptr) r.Fail(absl::StrCat("KeyError: '", field, "'"));
      }
      if (v == nullptr) {
        if (index >= args.args.size()) {
          r.Fail(absl::StrCat("Replacement index ", index, " out of range for positional args"));
        }
        v = &args.args[index];
      }
      v->AppendString(&out);
      r.CheckSize(out.size());
      i = close;
    } else if (c == '}') {
      r.Fail("Single '}' encountered in format string");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Value Renderer::CallMethod(const Value& obj, const std::string& name, CallArgs args) {
  auto string_arg = [&](size_t i, const char* what) {
    if (i >= args.args.size() || !args.args[i].is_string()) {
      Fail(absl::StrCat(obj.TypeName(), ".", name, "() needs a string ", what));
    }
    return args.args[i].str();
  };
  if (obj.is_string()) {
    const std::string& s = obj.str();
    if (name == "strip") return Value::String(Strip(s, Arg(args, 0, "chars"), true, true));
    if (name == "lstrip") return Value::String(Strip(s, Arg(args, 0, "chars"), true, false));
    if (name == "rstrip") return Value::String(Strip(s, Arg(args, 0, "chars"), false, true));
    if (name == "upper") return Value::String(AsciiUpper(s));
    if (name == "lower") return Value::String(AsciiLower(s));
    if (name == "title") return Value::String(PyTitle(s));
    if (name == "capitalize") return Value::String(Capitalize(s));
    if (name == "split") {
      const Value sep = Arg(args, 0, "sep", Value::None());
      const Value maxsplit = Arg(args, 1, "maxsplit", Value::Int(-1));
      if (sep.is_string() && sep.str().empty()) Fail("empty separator");
      return Value::List(Split(s, sep, maxsplit.as_int()));
    }
    if (name == "splitlines") {
      std::vector<Value> lines;
      size_t pos = 0;
      while (pos < s.size()) {
        size_t nl = s.find_first_of("\r\n", pos);
        if (nl == std::string::npos) nl = s.size();
        lines.push_back(Value::String(s.substr(pos, nl - pos)));
        if (nl < s.size() && s[nl] == '\r' && nl + 1 < s.size() && s[nl + 1] == '\n') ++nl;
        pos = nl + 1;
      }
      return Value::List(std::move(lines));
    }
    if (name == "startswith" || name == "endswith") {
      std::vector<Value> candidates;
      const Value a = Arg(args, 0, "prefix");
      if (a.is_list()) {
        candidates = a.list();
      } else {
        candidates.push_back(a);
      }
      for (const Value& c : candidates) {
        if (!c.is_string()) Fail(absl::StrCat("str.", name, "() needs a string argument"));
        const std::string& p = c.str();
        if (p.size() > s.size()) continue;
        if (name == "startswith" ? s.compare(0, p.size(), p) == 0
                                 : s.compare(s.size() - p.size(), p.size(), p) == 0) {
          return Value::Bool(true);
        }
      }
      return Value::Bool(false);
    }
    if (name == "replace") {
      const std::string from = string_arg(0, "old"), to = string_arg(1, "new");
      std::string r = Replace(s, from, to, Arg(args, 2, "count", Value::Int(-1)).as_int());
      CheckSize(r.size());
      return Value::String(std::move(r));
    }
    if (name == "find" || name == "count") {
      const std::string sub = string_arg(0, "argument");
      if (name == "find") {
        const size_t hit = s.find(sub);
        return Value::Int(hit == std::string::npos ? -1
                                                   : static_cast<int64_t>(CountCodePoints(s.substr(0, hit))));
      }
      if (sub.empty()) return Value::Int(static_cast<int64_t>(CountCodePoints(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
      return Value::Int(n);
    }
    if (name == "join") {
      std::string out;
      const std::vector<Value> items = Iterate(Arg(args, 0, "iterable"));
      for (size_t i = 0; i < items.size(); ++i) {
        if (!items[i].is_string()) {
          Fail(absl::StrCat("sequence item ", i, ": expected str instance, ", items[i].TypeName(), " found"));
        }
        if (i > 0) out += s;
        out += items[i].str();
        CheckSize(out.size());
      }
      return Value::String(std::move(out));
    }
    if (name == "format") return Value::String(PyFormat(*this, s, args));
  } else if (obj.kind() == Value::Kind::kDict) {
    const Dict& d = obj.dict();
    if (name == "items") {
      std::vector<Value> items;
      for (const auto& [k, v] : d.items) items.push_back(Value::Tuple({Value::String(k), v}));
      return Value::List(std::move(items));
    }
    if (name == "keys") return Value::List(Iterate(obj));
    if (name == "values") {
      std::vector<Value> values;
      for (const auto& kv : d.items) values.push_back(kv.second);
      return Value::List(std::move(values));
    }
    if (name == "get") {
      const Value key = Arg(args, 0, "key");
      const Value dflt = Arg(args, 1, "default", Value::None());
      if (!key.is_string()) return dflt;
      const Value* v = d.Find(key.str());
      return v != nullptr ? *v : dflt;
    }
    if (const Value* v = d.Find(name)) return CallValue(*v, std::move(args));
  } else if (obj.kind() == Value::Kind::kLoop && name == "cycle") {
    if (args.args.empty()) Fail("no items for cycling given");
    const int64_t i = obj.dict().Find("index0")->as_int();
    return args.args[static_cast<size_t>(i) % args.args.size()];
  }
  Fail(absl::StrCat("'", obj.TypeName(), " object' has no method '", name, "'"));
}

Value Renderer::CallBuiltin(Builtin b, CallArgs args) {
  switch (b) {
    case Builtin::kRaiseException: {
      const Value msg = Arg(args, 0, "message");
      throw RenderError{absl::StatusCode::kInvalidArgument, msg.ToString(), line_};
    }
    case Builtin::kRange: {
      for (const Value& a : args.args) {
        if (a.kind() != Value::Kind::kInt && a.kind() != Value::Kind::kBool) {
          Fail(absl::StrCat("'", a.TypeName(), "' object cannot be interpreted as an integer"));
        }
      }
      int64_t start = 0, stop = 0, step = 1;
      if (args.args.size() == 1) {
        stop = args.args[0].as_int();
      } else if (args.args.size() == 2 || args.args.size() == 3) {
        start = args.args[0].as_int();
        stop = args.args[1].as_int();
        if (args.args.size() == 3) step = args.args[2].as_int();
      } else {
        Fail("range expected 1 to 3 arguments");
      }
      if (step == 0) Fail("range() arg 3 must not be zero");
      const int64_t count =
          step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                   : (start > stop ? (start - stop - step - 1) / (-step) : 0);
      if (count > options_.max_loop_iterations) {
        FailLimit(absl::StrCat("range of ", count, " items exceeds max_loop_iterations (",
                               options_.max_loop_iterations, ")"));
      }
      std::vector<Value> items;
      items.reserve(count);
      for (int64_t i = 0; i < count; ++i) items.push_back(Value::Int(start + i * step));
      return Value::List(std::move(items));
    }
    case Builtin::kNamespace:
    case Builtin::kDict: {
      Dict d;
      for (const Value& a : args.args) {
        if (!a.is_mapping()) Fail("namespace()/dict() takes a mapping as positional argument");
        for (const auto& [k, v] : a.dict().items) d.Set(k, v);
      }
      for (auto& [k, v] : args.kwargs) d.Set(k, std::move(v));
      return b == Builtin::kDict ? Value::MakeDict(std::move(d)) : Value::Namespace(std::move(d));
    }
    case Builtin::kStrftimeNow: {
      const Value fmt = Arg(args, 0, "format");
      if (!fmt.is_string()) Fail("strftime_now() needs a format string");
      if (options_.now.has_value()) {
        return Value::String(
            absl::FormatTime(fmt.str(), absl::FromCivil(*options_.now, absl::UTCTimeZone()),
                             absl::UTCTimeZone()));
      }
      const absl::TimeZone local = absl::LocalTimeZone();
      return Value::String(absl::FormatTime(fmt.str(), absl::Now(), local));
    }
  }
  Fail("unknown builtin");
}

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

// Python's str.splitlines for \n, \r\n and \r.
std::vector<std::string> SplitLines(const std::string& s) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t nl = s.find_first_of("\r\n", pos);
    if (nl == std::string::npos) nl = s.size();
    lines.push_back(s.substr(pos, nl - pos));
    if (nl < s.size() && s[nl] == '\r' && nl + 1 < s.size() && s[nl + 1] == '\n') ++nl;
    pos = nl + 1;
  }
  return lines;
}

}  // namespace

Value Renderer::ApplyFilter(const std::string& name, const Value& v, CallArgs args) {
  if (name == "safe") return v;
  if (name == "trim") return Value::String(Strip(v.ToString(), Arg(args, 0, "chars"), true, true));
  if (name == "upper") return Value::String(AsciiUpper(v.ToString()));
  if (name == "lower") return Value::String(AsciiLower(v.ToString()));
  if (name == "title") return Value::String(JinjaTitle(v.ToString()));
  if (name == "capitalize") return Value::String(Capitalize(v.ToString()));
  if (name == "string") return v.is_string() ? v : Value::String(v.ToString());
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
    std::string r = Replace(v.ToString(), from.ToString(), to.ToString(),
                            count.is_none() ? -1 : count.as_int());
    CheckSize(r.size());
    return Value::String(std::move(r));
  }
  if (name == "indent") {
    const Value width = Arg(args, 0, "width", Value::Int(4));
    const bool first = Arg(args, 1, "first", Value::Bool(false)).Truthy();
    const bool blank = Arg(args, 2, "blank", Value::Bool(false)).Truthy();
    const std::string pad = width.is_string() ? width.str()
                                              : std::string(std::max<int64_t>(0, width.as_int()), ' ');
    std::vector<std::string> lines = SplitLines(v.ToString() + "\n");
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
    if (!v.is_mapping()) Fail(absl::StrCat("Can only get item pairs from a mapping, not ", v.TypeName()));
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
    if (items.empty()) return Value::Undefined(absl::StrCat("No ", name, " item, sequence was empty."));
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
    const std::string sep = Arg(args, 0, "d", Value::String("")).ToString();
    const Value attribute = Arg(args, 1, "attribute", Value::None());
    std::string out;
    const std::vector<Value> items = Iterate(v);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += sep;
      if (attribute.is_none()) {
        items[i].AppendString(&out);
      } else {
        GetItem(items[i], attribute).AppendString(&out);
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
    if (args.args.empty() || !args.args[0].is_string()) Fail("map: needs attribute= or a filter name");
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
    const bool case_sensitive = Kwarg(args, "case_sensitive") && Kwarg(args, "case_sensitive")->Truthy();
    auto key = [&](const Value& item) {
      Value k = attribute.is_none() ? item : GetItem(item, attribute);
      if (k.is_string() && !case_sensitive) return Value::String(AsciiLower(k.str()));
      return k;
    };
    auto less = [&](const Value& a, const Value& b) {
      bool ok = true;
      const bool r = LessThan(key(a), key(b), &ok);
      if (!ok) Fail(absl::StrCat("'<' not supported between instances of '", a.TypeName(), "' and '", b.TypeName(), "'"));
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
    if (items.empty()) return Value::Undefined(absl::StrCat("No aggregated item, sequence was empty."));
    auto it = name == "min" ? std::min_element(items.begin(), items.end(), less)
                            : std::max_element(items.begin(), items.end(), less);
    return *it;
  }
  Fail(absl::StrCat("No filter named '", name, "'."));
}

bool IsKnownFilter(const std::string& name) {
  static const auto* const kNames = new absl::flat_hash_set<std::string>{
      "abs",     "capitalize", "count", "d",      "default", "dictsort",  "first",      "float",
      "indent",  "int",        "items", "join",   "last",    "length",    "list",       "lower",
      "map",     "max",        "min",   "reject", "rejectattr", "replace", "reverse",   "round",
      "safe",    "select",     "selectattr", "sort", "string", "sum",     "title",      "tojson",
      "trim",    "unique",     "upper"};
  return kNames->contains(name);
}

bool IsKnownTest(const std::string& name) {
  static const auto* const kNames = new absl::flat_hash_set<std::string>{
      "boolean", "callable", "defined", "divisibleby", "eq",       "equalto", "even",
      "false",   "float",    "ge",      "greaterthan", "gt",       "in",      "integer",
      "iterable", "le",      "lessthan", "lower",      "lt",       "mapping", "ne",
      "none",    "number",   "odd",     "sameas",      "sequence", "string",  "true",
      "undefined", "upper",  "==",      "!=",          "<",        "<=",      ">",
      ">="};
  return kNames->contains(name);
}

}  // namespace troupe::models::jinja
