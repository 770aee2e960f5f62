// Attribute/item access, operators, tests, methods and global functions of the Jinja interpreter
// (Renderer members declared in jinja_eval.h; filters are in jinja_filters.cc). Python semantics
// throughout; anything not listed here is refused with an error naming it.
//
// Tests: boolean callable defined divisibleby eq equalto even false float ge gt in integer
//   iterable le lower lt mapping ne none number odd sameas sequence string true undefined upper
//   (and ==, !=, <, <=, >, >=).
// String methods: capitalize count endswith find format join lower lstrip replace rstrip split
//   splitlines startswith strip title upper. Dict methods: get items keys values.
#include <algorithm>
#include <cmath>
#include <cstdint>
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
      for (std::string& cp : SplitCodePoints(v.str()))
        chars.push_back(Value::String(std::move(cp)));
      return chars;
    }
    default:
      Fail(absl::StrCat("'", v.TypeName(), "' object is not iterable"));
  }
}

Value Renderer::GetAttr(const Value& obj, const std::string& name) const {
  CheckDefined(obj);
  if (obj.is_mapping()) {
    if (const Value* v = obj.dict().Find(name)) return *v;
  } else if (obj.kind() == Value::Kind::kLoop) {
    const int64_t i = obj.loop_index0();
    const std::vector<Value>& items = obj.loop_items();
    const int64_t n = static_cast<int64_t>(items.size());
    if (name == "index") return Value::Int(i + 1);
    if (name == "index0") return Value::Int(i);
    if (name == "revindex") return Value::Int(n - i);
    if (name == "revindex0") return Value::Int(n - i - 1);
    if (name == "first") return Value::Bool(i == 0);
    if (name == "last") return Value::Bool(i == n - 1);
    if (name == "length") return Value::Int(n);
    if (name == "depth") return Value::Int(1);
    if (name == "depth0") return Value::Int(0);
    if (name == "previtem")
      return i > 0 ? items[i - 1] : Value::Undefined("there is no previous item");
    if (name == "nextitem")
      return i + 1 < n ? items[i + 1] : Value::Undefined("there is no next item");
  }
  return Value::Undefined(
      absl::StrCat("'", obj.TypeName(), " object' has no attribute '", name, "'"));
}

Value Renderer::GetItem(const Value& obj, const Value& key) const {
  CheckDefined(obj);
  if ((obj.is_list() || obj.is_string()) && key.is_number() && key.kind() != Value::Kind::kFloat) {
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
    return Value::Undefined(
        absl::StrCat("'", obj.TypeName(), " object' has no element ", key.as_int()));
  }
  if (key.is_string()) return GetAttr(obj, key.str());
  return Value::Undefined(
      absl::StrCat("'", obj.TypeName(), " object' has no element ", key.Repr()));
}

Value Renderer::Slice(const Value& obj, const Value& start_v, const Value& stop_v,
                      const Value& step_v) {
  CheckDefined(obj);
  if (!obj.is_list() && !obj.is_string())
    Fail(absl::StrCat("'", obj.TypeName(), "' object is not subscriptable"));
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
  for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
    if (obj.is_list()) {
      items.push_back(obj.list()[i]);
    } else {
      s += cps[i];
    }
    if (__builtin_add_overflow(i, step, &i)) break;
  }
  return obj.is_list() ? Value::List(std::move(items)) : Value::String(std::move(s));
}

Value Renderer::Binary(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = Str(a);
    s += Str(b);
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
    int64_t r = 0;
    auto checked = [&](bool overflow) {
      if (overflow) Fail(absl::StrCat("integer overflow in ", op, " (64-bit integers)"));
      return Value::Int(r);
    };
    if (op == "+")
      return is_float ? Value::Float(x + y) : checked(__builtin_add_overflow(i, j, &r));
    if (op == "-")
      return is_float ? Value::Float(x - y) : checked(__builtin_sub_overflow(i, j, &r));
    if (op == "*")
      return is_float ? Value::Float(x * y) : checked(__builtin_mul_overflow(i, j, &r));
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
      if (i == INT64_MIN && j == -1) Fail("integer overflow in // (64-bit integers)");
      int64_t q = i / j;
      if ((i % j != 0) && ((i < 0) != (j < 0))) --q;
      return op == "//" ? Value::Int(q) : Value::Int(i - q * j);
    }
    if (op == "**") {
      if (!is_float && j >= 0) {
        int64_t acc = 1;
        for (int64_t k = 0; k < j && acc != 0 && !(acc == 1 && i == 1); ++k) {
          if (__builtin_mul_overflow(acc, i, &acc)) {
            Fail("integer overflow in ** (64-bit integers)");
          }
        }
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
      if (!a.str().empty() &&
          static_cast<uint64_t>(times) > options_.max_output_bytes / a.str().size()) {
        CheckSize(options_.max_output_bytes + 1);
      }
      std::string s;
      for (int64_t k = 0; k < times; ++k) s += a.str();
      return Value::String(std::move(s));
    }
    if (!a.list().empty() &&
        static_cast<uint64_t>(times) >
            static_cast<uint64_t>(options_.max_loop_iterations) / a.list().size()) {
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
    if (!v.is_number() || k == Value::Kind::kFloat)
      Fail(absl::StrCat("test '", name, "' needs an integer"));
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
static std::string PyFormat(Renderer& r, const std::string& fmt, const CallArgs& args) {
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
      out += r.Str(*v);
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
      for (std::string& line : SplitLines(s)) lines.push_back(Value::String(std::move(line)));
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
        return Value::Int(hit == std::string::npos
                              ? -1
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
          Fail(absl::StrCat("sequence item ", i, ": expected str instance, ", items[i].TypeName(),
                            " found"));
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
    const int64_t i = obj.loop_index0();
    return args.args[static_cast<size_t>(i) % args.args.size()];
  }
  Fail(absl::StrCat("'", obj.TypeName(), " object' has no method '", name, "'"));
}

Value Renderer::CallBuiltin(Builtin b, CallArgs args) {
  switch (b) {
    case Builtin::kRaiseException: {
      const Value msg = Arg(args, 0, "message");
      throw RenderError{absl::StatusCode::kInvalidArgument, Str(msg), line_};
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
      const __int128 span =
          step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
      const __int128 stride = step > 0 ? step : -static_cast<__int128>(step);
      const __int128 wide = span > 0 ? (span + stride - 1) / stride : 0;
      if (wide > options_.max_loop_iterations) {
        FailLimit(absl::StrCat("range of more than ", options_.max_loop_iterations,
                               " items exceeds max_loop_iterations"));
      }
      const int64_t count = static_cast<int64_t>(wide);
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
        return Value::String(absl::FormatTime(
            fmt.str(), absl::FromCivil(*options_.now, absl::UTCTimeZone()), absl::UTCTimeZone()));
      }
      const absl::TimeZone local = absl::LocalTimeZone();
      return Value::String(absl::FormatTime(fmt.str(), absl::Now(), local));
    }
  }
  Fail("unknown builtin");
}

}  // namespace troupe::models::jinja
