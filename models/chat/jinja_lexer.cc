#include "models/chat/jinja_lexer.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "models/chat/jinja_unicode.h"

namespace troupe::models::jinja {
namespace {

// Jinja's lexer: text, {{ }}, {% %}, {# #} with -/+ whitespace control, trim_blocks and

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Piece> Run() {
    std::vector<Piece> pieces;
    bool line_starting = true;
    size_t pos = 0;
    const size_t n = src_.size();
    while (pos < n) {
      size_t open = pos;
      while (true) {
        open = src_.find('{', open);
        if (open == std::string::npos || open + 1 >= n) {
          open = std::string::npos;
          break;
        }
        const char k = src_[open + 1];
        if (k == '{' || k == '%' || k == '#') break;
        ++open;
      }
      if (open == std::string::npos) {
        AddText(&pieces, src_.substr(pos), line_);
        break;
      }
      std::string text = src_.substr(pos, open - pos);
      const int text_line = line_;
      line_ += CountNewlines(pos, open);
      const char kind = src_[open + 1];
      const char mod = open + 2 < n ? src_[open + 2] : '\0';
      if (mod == '-') {
        // Jinja2: text.rstrip(), Python's whitespace.
        while (size_t len = PySpaceBefore(text, text.size())) text.resize(text.size() - len);
      } else if (mod != '+' && kind != '{') {
        const size_t l_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (l_pos > 0 || line_starting) {
          // Jinja2: \s+ matches the whole rest of the line.
          size_t i = l_pos;
          while (size_t len = PySpaceAt(text, i)) i += len;
          const bool blank = l_pos < text.size() && i == text.size();
          if (blank) text.resize(l_pos);
        }
      }
      AddText(&pieces, std::move(text), text_line);
      size_t p = open + 2 + ((mod == '-' || mod == '+') ? 1 : 0);
      char end_mod = '\0';
      size_t after;
      if (kind == '#') {
        const size_t close = src_.find("#}", p);
        if (close == std::string::npos) throw SyntaxError{line_, "missing end of comment tag"};
        if (close > p && (src_[close - 1] == '-' || src_[close - 1] == '+')) {
          end_mod = src_[close - 1];
        }
        line_ += CountNewlines(p, close);
        after = close + 2;
      } else {
        Piece piece;
        piece.type = kind == '{' ? Piece::Type::kVar : Piece::Type::kBlock;
        piece.line = line_;
        after = LexTag(p, kind == '{' ? '}' : '%', &piece.toks, &end_mod);
        pieces.push_back(std::move(piece));
      }
      const size_t tag_end = after;
      if (end_mod == '-') {
        while (size_t len = PySpaceAt(src_, after)) after += len;
      } else if (end_mod != '+' && kind != '{' && after < n && src_[after] == '\n') {
        ++after;
      }
      line_ += CountNewlines(tag_end, after);
      line_starting = after > tag_end && src_[after - 1] == '\n';
      pos = after;
    }
    return pieces;
  }

 private:
  int CountNewlines(size_t from, size_t to) const {
    int count = 0;
    for (size_t i = from; i < to; ++i) count += src_[i] == '\n';
    return count;
  }

  static void AddText(std::vector<Piece>* pieces, std::string text, int line) {
    if (text.empty()) return;
    Piece piece;
    piece.type = Piece::Type::kText;
    piece.text = std::move(text);
    piece.line = line;
    pieces->push_back(std::move(piece));
  }

  // Tokens from p up to the closing "}}" / "%}" (end_char is '}' or '%'); returns the position
  // after it and sets *end_mod to '-' or '+' when the tag ends with "-}}" / "+%}".
  size_t LexTag(size_t p, char end_char, std::vector<Tok>* toks, char* end_mod) {
    const size_t n = src_.size();
    int balance = 0;
    while (true) {
      while (size_t len = PySpaceAt(src_, p)) {
        if (src_[p] == '\n') ++line_;
        p += len;
      }
      if (p >= n) {
        throw SyntaxError{line_, end_char == '}' ? "unexpected end of template, expected '}}'"
                                                 : "unexpected end of template, expected '%}'"};
      }
      if (balance == 0) {
        for (const char m : {'-', '+'}) {
          if (src_[p] == m && p + 2 < n && src_[p + 1] == end_char && src_[p + 2] == '}' &&
              (m == '-' || end_char == '%')) {
            *end_mod = m;
            toks->push_back(Tok{Tok::Type::kEnd, "", Value(), line_});
            return p + 3;
          }
        }
        if (src_[p] == end_char && p + 1 < n && src_[p + 1] == '}') {
          toks->push_back(Tok{Tok::Type::kEnd, "", Value(), line_});
          return p + 2;
        }
      }
      const char c = src_[p];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t q = p;
        while (q < n && (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
        toks->push_back(Tok{Tok::Type::kName, src_.substr(p, q - p), Value(), line_});
        p = q;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        p = LexNumber(p, toks);
      } else if (c == '\'' || c == '"') {
        p = LexString(p, toks);
      } else {
        static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*",
                                           "/",  "%",  "~",  "(",  ")",  "[",  "]", "{", "}",
                                           ",",  ".",  ":",  "|",  "=",  "<",  ">"};
        std::string op;
        for (const char* candidate : kOps) {
          if (src_.compare(p, std::char_traits<char>::length(candidate), candidate) == 0) {
            op = candidate;
            break;
          }
        }
        if (op.empty())
          throw SyntaxError{line_, absl::StrCat("unexpected char '", std::string(1, c), "'")};
        if (op == "(" || op == "[" || op == "{") ++balance;
        if (op == ")" || op == "]" || op == "}") --balance;
        toks->push_back(Tok{Tok::Type::kOp, op, Value(), line_});
        p += op.size();
      }
    }
  }

  size_t LexNumber(size_t p, std::vector<Tok>* toks) {
    const size_t n = src_.size();
    std::string digits;
    bool is_float = false;
    auto take_digits = [&] {
      while (p < n && (std::isdigit(static_cast<unsigned char>(src_[p])) || src_[p] == '_')) {
        if (src_[p] != '_') digits.push_back(src_[p]);
        ++p;
      }
    };
    take_digits();
    if (p + 1 < n && src_[p] == '.' && std::isdigit(static_cast<unsigned char>(src_[p + 1]))) {
      is_float = true;
      digits.push_back('.');
      ++p;
      take_digits();
    }
    if (p < n && (src_[p] == 'e' || src_[p] == 'E')) {
      size_t q = p + 1;
      if (q < n && (src_[q] == '+' || src_[q] == '-')) ++q;
      if (q < n && std::isdigit(static_cast<unsigned char>(src_[q]))) {
        is_float = true;
        digits.append(src_, p, q - p);
        p = q;
        take_digits();
      }
    }
    Tok tok{is_float ? Tok::Type::kFloat : Tok::Type::kInt, digits, Value(), line_};
    if (is_float) {
      tok.number = Value::Float(std::strtod(digits.c_str(), nullptr));
    } else {
      errno = 0;
      const long long v = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) throw SyntaxError{line_, absl::StrCat("integer too large: ", digits)};
      tok.number = Value::Int(v);
    }
    toks->push_back(std::move(tok));
    return p;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  // A Python-style string literal with backslash escapes (unknown escapes stay as written).
  size_t LexString(size_t p, std::vector<Tok>* toks) {
    const int start_line = line_;
    const char quote = src_[p++];
    std::string out;
    const size_t n = src_.size();
    while (true) {
      if (p >= n) throw SyntaxError{start_line, "unexpected end of string"};
      const char c = src_[p];
      if (c == quote) {
        ++p;
        break;
      }
      if (c == '\n') ++line_;
      if (c != '\\' || p + 1 >= n) {
        out.push_back(c);
        ++p;
        continue;
      }
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case 'n':
          out.push_back('\n');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case '\\':
        case '\'':
        case '"':
          out.push_back(e);
          break;
        case '\n':
          ++line_;
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t len = e == 'x' ? 2 : (e == 'u' ? 4 : 8);
          if (p + len > n) throw SyntaxError{line_, "truncated escape in string"};
          const std::string hex = src_.substr(p, len);
          char* end = nullptr;
          const unsigned long cp = std::strtoul(hex.c_str(), &end, 16);
          if (end != hex.c_str() + len) throw SyntaxError{line_, "bad escape in string"};
          AppendUtf8(static_cast<uint32_t>(cp), &out);
          p += len;
          break;
        }
        default:
          out.push_back('\\');
          out.push_back(e);
      }
    }
    toks->push_back(Tok{Tok::Type::kString, std::move(out), Value(), start_line});
    return p;
  }

  std::string src_;
  int line_ = 1;
};

}  // namespace

std::vector<Piece> Lex(std::string src) { return Lexer(std::move(src)).Run(); }

}  // namespace troupe::models::jinja
