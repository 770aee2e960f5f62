// String helpers of the Jinja interpreter (declared in jinja_eval.h): UTF-8 code points and the
// Python str operations (strip, split, replace, title, ...) that filters and methods share.
#include <string>
#include <string_view>
#include <vector>

#include "models/chat/jinja_eval.h"
#include "models/chat/jinja_unicode.h"

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
std::string Strip(const std::string& s, const Value& chars, bool left, bool right) {
  // Python strips code points: those of `chars`, or whitespace (str.isspace) without it.
  std::vector<std::string> set;
  if (chars.is_string()) set = SplitCodePoints(chars.str());
  auto in_set = [&](size_t pos, size_t len) {
    for (const std::string& c : set) {
      if (c.size() == len && s.compare(pos, len, c) == 0) return true;
    }
    return false;
  };
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t len;
      if (chars.is_string()) {
        DecodeUtf8(s, b, &len);
        if (!in_set(b, len)) break;
      } else if ((len = PySpaceAt(s, b)) == 0) {
        break;
      }
      b += len;
    }
  }
  if (right) {
    while (e > b) {
      size_t len = 0;
      if (chars.is_string()) {
        len = 1;  // the code point that ends at e: step back over continuation bytes
        while (len < 4 && len < e - b && (static_cast<unsigned char>(s[e - len]) & 0xc0) == 0x80) {
          ++len;
        }
        if (!in_set(e - len, len)) break;
      } else if ((len = PySpaceBefore(std::string_view(s).substr(b), e - b)) == 0) {
        break;
      }
      e -= len;
    }
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

static bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

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

// Jinja's title filter: the text split at runs of whitespace (Python's \s), '-', '(', '{', '[' or
// '<'; each piece's first code point upper-cased and the rest lower-cased.
std::string JinjaTitle(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (size_t i = 0; i < out.size();) {
    size_t len;
    const char32_t cp = DecodeUtf8(out, i, &len);
    const bool separator =
        PySpaceAt(out, i) > 0 || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    if (!separator && cp < 0x80 && IsAlpha(out[i])) {
      out[i] =
          start ? AsciiUpper(std::string(1, out[i]))[0] : AsciiLower(std::string(1, out[i]))[0];
    }
    start = separator;
    i += len;
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
    // Runs of whitespace (str.isspace) separate; after maxsplit splits the rest is one piece,
    // leading whitespace dropped and trailing whitespace kept, as Python does.
    size_t i = 0;
    int64_t splits = 0;
    while (true) {
      while (size_t len = PySpaceAt(s, i)) i += len;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && splits >= maxsplit) {
        out.push_back(Value::String(s.substr(i)));
        break;
      }
      size_t j = i;
      while (j < s.size() && PySpaceAt(s, j) == 0) {
        size_t len;
        DecodeUtf8(s, j, &len);
        j += len;
      }
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

std::vector<std::string> SplitLines(const std::string& s) {
  std::vector<std::string> lines;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    size_t len;
    const char32_t cp = DecodeUtf8(s, i, &len);
    if ((len > 1 || cp < 0x80) && IsPyLineBreak(cp)) {
      lines.push_back(s.substr(start, i - start));
      i += len;
      if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
      start = i;
    } else {
      i += len;
    }
  }
  if (start < s.size()) lines.push_back(s.substr(start));
  return lines;
}

const Value* Kwarg(const CallArgs& args, const std::string& name) {
  for (const auto& [k, v] : args.kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

// The i-th argument, given by position or by name; `fallback` when absent.
Value Arg(const CallArgs& args, size_t i, const std::string& name, Value fallback) {
  if (i < args.args.size()) return args.args[i];
  if (const Value* v = Kwarg(args, name)) return *v;
  return fallback;
}

}  // namespace troupe::models::jinja
