// Recursive-descent parser for the Jinja subset in jinja.h, over the pieces of jinja_lexer.h.
// Grammar and precedence follow Jinja2's parser (parse_condexpr > or > and > not > compare > + - >
// ~ > * / // % > ** > unary > primary, postfix, filters and tests). Syntax errors are thrown as
// SyntaxError and returned as InvalidArgument "SOURCE:LINE: message" by ParseTemplate.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/chat/jinja_ast.h"
#include "models/chat/jinja_lexer.h"

namespace troupe::models::jinja {
namespace {

class Parser {
 public:
  Parser(std::vector<Piece> pieces, int max_depth)
      : pieces_(std::move(pieces)), max_depth_(max_depth) {}

  Body ParseAll() {
    std::string tag;
    Body body = ParseBody({}, &tag);
    return body;
  }

 private:
  struct DepthGuard {
    DepthGuard(Parser* p, int line) : parser(p) {
      if (++parser->depth_ > parser->max_depth_) {
        throw SyntaxError{
            line, absl::StrCat("template nesting exceeds the depth limit of ", parser->max_depth_)};
      }
    }
    ~DepthGuard() { --parser->depth_; }
    Parser* parser;
  };

  // ---- token stream of the current tag ----
  const Tok& Cur() const { return (*toks_)[tpos_]; }
  const Tok& Peek(size_t k = 1) const {
    const size_t i = tpos_ + k < toks_->size() ? tpos_ + k : toks_->size() - 1;
    return (*toks_)[i];
  }
  void Next() {
    if (Cur().type != Tok::Type::kEnd) ++tpos_;
  }
  bool IsOp(const char* op) const { return Cur().type == Tok::Type::kOp && Cur().text == op; }
  bool IsName(const char* name) const {
    return Cur().type == Tok::Type::kName && Cur().text == name;
  }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(const char* name) {
    if (!IsName(name)) return false;
    Next();
    return true;
  }
  [[noreturn]] void Fail(const std::string& message) const {
    throw SyntaxError{Cur().line, message};
  }
  std::string Describe(const Tok& t) const {
    switch (t.type) {
      case Tok::Type::kEnd:
        return "end of statement block";
      case Tok::Type::kString:
        return "string";
      default:
        return absl::StrCat("'", t.text, "'");
    }
  }
  void ExpectOp(const char* op) {
    if (!SkipOp(op)) Fail(absl::StrCat("expected '", op, "', got ", Describe(Cur())));
  }
  std::string ExpectName() {
    if (Cur().type != Tok::Type::kName)
      Fail(absl::StrCat("expected a name, got ", Describe(Cur())));
    std::string name = Cur().text;
    Next();
    return name;
  }
  void ExpectEnd() {
    if (Cur().type != Tok::Type::kEnd) {
      Fail(absl::StrCat("expected end of tag, got ", Describe(Cur())));
    }
  }

  ExprPtr Make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements ----
  Body ParseBody(const absl::flat_hash_set<std::string>& end_tags, std::string* found) {
    Body body;
    while (ppos_ < pieces_.size()) {
      Piece& piece = pieces_[ppos_];
      if (piece.type == Piece::Type::kText) {
        auto node = std::make_unique<Node>();
        node->kind = Node::Kind::kText;
        node->line = piece.line;
        node->text = std::move(piece.text);
        body.push_back(std::move(node));
        ++ppos_;
        continue;
      }
      toks_ = &piece.toks;
      tpos_ = 0;
      if (piece.type == Piece::Type::kVar) {
        auto node = std::make_unique<Node>();
        node->kind = Node::Kind::kOutput;
        node->line = piece.line;
        if (Cur().type == Tok::Type::kEnd) Fail("expected an expression, got '}}'");
        node->expr = ParseTuple();
        ExpectEnd();
        body.push_back(std::move(node));
        ++ppos_;
        continue;
      }
      if (Cur().type != Tok::Type::kName) Fail("tag name expected");
      const std::string tag = Cur().text;
      if (end_tags.contains(tag)) {
        *found = tag;
        return body;
      }
      ++ppos_;
      Next();
      body.push_back(ParseStatement(tag, piece.line));
    }
    if (!end_tags.empty()) {
      std::vector<std::string> names(end_tags.begin(), end_tags.end());
      std::sort(names.begin(), names.end());
      const int line = pieces_.empty() ? 1 : pieces_.back().line;
      throw SyntaxError{line, absl::StrCat("unexpected end of template; expected one of '",
                                           absl::StrJoin(names, "', '"), "'")};
    }
    return body;
  }

  // Moves to the tag that ParseBody stopped at (after its name).
  void EnterStopTag() {
    toks_ = &pieces_[ppos_].toks;
    tpos_ = 1;
    ++ppos_;
  }

  NodePtr ParseStatement(const std::string& tag, int line) {
    DepthGuard guard(this, line);
    auto node = std::make_unique<Node>();
    node->line = line;
    std::string found;
    if (tag == "if") {
      node->kind = Node::Kind::kIf;
      ExprPtr cond = ParseExpression();
      ExpectEnd();
      while (true) {
        Body body = ParseBody({"elif", "else", "endif"}, &found);
        node->branches.emplace_back(std::move(cond), std::move(body));
        EnterStopTag();
        if (found == "elif") {
          cond = ParseExpression();
          ExpectEnd();
        } else if (found == "else") {
          ExpectEnd();
          Body else_body = ParseBody({"endif"}, &found);
          node->branches.emplace_back(nullptr, std::move(else_body));
          EnterStopTag();
          ExpectEnd();
          break;
        } else {
          ExpectEnd();
          break;
        }
      }
    } else if (tag == "for") {
      node->kind = Node::Kind::kFor;
      node->targets.push_back(ExpectName());
      while (SkipOp(",")) node->targets.push_back(ExpectName());
      if (!SkipName("in")) Fail(absl::StrCat("expected 'in', got ", Describe(Cur())));
      node->expr = ParseTuple(/*with_condexpr=*/false);
      if (SkipName("if")) node->filter = ParseExpression();
      if (IsName("recursive")) Fail("recursive for loops are not supported");
      ExpectEnd();
      ++loop_depth_;
      node->body = ParseBody({"else", "endfor"}, &found);
      --loop_depth_;
      EnterStopTag();
      ExpectEnd();
      if (found == "else") {
        node->else_body = ParseBody({"endfor"}, &found);
        EnterStopTag();
        ExpectEnd();
      }
    } else if (tag == "set") {
      node->targets.push_back(ExpectName());
      if (SkipOp(".")) {
        node->attr = ExpectName();
      } else {
        while (SkipOp(",")) node->targets.push_back(ExpectName());
      }
      if (SkipOp("=")) {
        node->kind = Node::Kind::kSet;
        node->expr = ParseTuple();
        ExpectEnd();
      } else {
        if (node->targets.size() != 1 || !node->attr.empty()) Fail("expected '='");
        ExpectEnd();
        node->kind = Node::Kind::kSetBlock;
        node->body = ParseBody({"endset"}, &found);
        EnterStopTag();
        ExpectEnd();
      }
    } else if (tag == "macro") {
      node->kind = Node::Kind::kMacro;
      node->name = ExpectName();
      ExpectOp("(");
      while (!SkipOp(")")) {
        if (!node->params.empty()) ExpectOp(",");
        if (SkipOp(")")) break;
        node->params.push_back(ExpectName());
        node->defaults.push_back(SkipOp("=") ? ParseExpression() : nullptr);
      }
      ExpectEnd();
      const int saved_loops = loop_depth_;
      loop_depth_ = 0;
      node->body = ParseBody({"endmacro"}, &found);
      loop_depth_ = saved_loops;
      EnterStopTag();
      ExpectEnd();
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) Fail(absl::StrCat("'", tag, "' outside of a for loop"));
      node->kind = tag == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      ExpectEnd();
    } else if (tag == "generation") {
      node->kind = Node::Kind::kScope;
      ExpectEnd();
      node->body = ParseBody({"endgeneration"}, &found);
      EnterStopTag();
      ExpectEnd();
    } else if (tag.rfind("end", 0) == 0 || tag == "elif" || tag == "else") {
      throw SyntaxError{line, absl::StrCat("unexpected '", tag, "'")};
    } else {
      throw SyntaxError{line, absl::StrCat("unknown tag '", tag, "'")};
    }
    return node;
  }

  // ---- expressions ----
  ExprPtr ParseTuple(bool with_condexpr = true) {
    const int line = Cur().line;
    ExprPtr first = with_condexpr ? ParseExpression() : ParseOr();
    if (!IsOp(",")) return first;
    auto list = Make(Expr::Kind::kList, line);
    list->name = "tuple";
    list->children.push_back(std::move(first));
    while (SkipOp(",")) {
      if (Cur().type == Tok::Type::kEnd || IsOp(")") || IsName("if")) break;
      list->children.push_back(with_condexpr ? ParseExpression() : ParseOr());
    }
    return list;
  }

  ExprPtr ParseExpression() {
    DepthGuard guard(this, Cur().line);
    ExprPtr expr = ParseOr();
    while (IsName("if")) {
      const int line = Cur().line;
      Next();
      auto cond = Make(Expr::Kind::kCondExpr, line);
      cond->children.push_back(ParseOr());
      cond->children.push_back(std::move(expr));
      cond->children.push_back(SkipName("else") ? ParseExpression() : nullptr);
      expr = std::move(cond);
    }
    return expr;
  }

  ExprPtr Binary(Expr::Kind kind, const std::string& op, ExprPtr a, ExprPtr b, int line) {
    auto e = Make(kind, line);
    e->name = op;
    e->children.push_back(std::move(a));
    e->children.push_back(std::move(b));
    return e;
  }

  ExprPtr ParseOr() {
    ExprPtr e = ParseAnd();
    while (IsName("or")) {
      const int line = Cur().line;
      Next();
      e = Binary(Expr::Kind::kOr, "or", std::move(e), ParseAnd(), line);
    }
    return e;
  }

  ExprPtr ParseAnd() {
    ExprPtr e = ParseNot();
    while (IsName("and")) {
      const int line = Cur().line;
      Next();
      e = Binary(Expr::Kind::kAnd, "and", std::move(e), ParseNot(), line);
    }
    return e;
  }

  ExprPtr ParseNot() {
    if (IsName("not")) {
      DepthGuard guard(this, Cur().line);
      auto e = Make(Expr::Kind::kNot, Cur().line);
      Next();
      e->children.push_back(ParseNot());
      return e;
    }
    return ParseCompare();
  }

  ExprPtr ParseCompare() {
    const int line = Cur().line;
    ExprPtr first = ParseMath1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Cur().type == Tok::Type::kOp &&
          (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" || Cur().text == "<=" ||
           Cur().text == ">" || Cur().text == ">=")) {
        op = Cur().text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && Peek().type == Tok::Type::kName && Peek().text == "in") {
        op = "not in";
        Next();
        Next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = Make(Expr::Kind::kCompare, line);
        cmp->children.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->children.push_back(ParseMath1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  ExprPtr ParseMath1() {
    ExprPtr e = ParseConcat();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = Cur().text;
      const int line = Cur().line;
      Next();
      e = Binary(Expr::Kind::kBinary, op, std::move(e), ParseConcat(), line);
    }
    return e;
  }

  ExprPtr ParseConcat() {
    ExprPtr e = ParseMath2();
    while (IsOp("~")) {
      const int line = Cur().line;
      Next();
      e = Binary(Expr::Kind::kBinary, "~", std::move(e), ParseMath2(), line);
    }
    return e;
  }

  ExprPtr ParseMath2() {
    ExprPtr e = ParsePow();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = Cur().text;
      const int line = Cur().line;
      Next();
      e = Binary(Expr::Kind::kBinary, op, std::move(e), ParsePow(), line);
    }
    return e;
  }

  ExprPtr ParsePow() {
    ExprPtr e = ParseUnary(true);
    while (IsOp("**")) {
      const int line = Cur().line;
      Next();
      e = Binary(Expr::Kind::kBinary, "**", std::move(e), ParseUnary(true), line);
    }
    return e;
  }

  ExprPtr ParseUnary(bool with_filter) {
    DepthGuard guard(this, Cur().line);
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      node = Make(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, Cur().line);
      Next();
      node->children.push_back(ParseUnary(false));
    } else {
      node = ParsePrimary();
    }
    node = ParsePostfix(std::move(node));
    if (with_filter) node = ParseFilterExpr(std::move(node));
    return node;
  }

  ExprPtr ParsePrimary() {
    const Tok& t = Cur();
    const int line = t.line;
    if (t.type == Tok::Type::kName) {
      const std::string name = t.text;
      Next();
      auto e = Make(Expr::Kind::kLiteral, line);
      if (name == "true" || name == "True") {
        e->literal = Value::Bool(true);
      } else if (name == "false" || name == "False") {
        e->literal = Value::Bool(false);
      } else if (name == "none" || name == "None") {
        e->literal = Value::None();
      } else {
        e->kind = Expr::Kind::kName;
        e->name = name;
      }
      return e;
    }
    if (t.type == Tok::Type::kString) {
      std::string s;
      while (Cur().type == Tok::Type::kString) {
        s += Cur().text;
        Next();
      }
      auto e = Make(Expr::Kind::kLiteral, line);
      e->literal = Value::String(std::move(s));
      return e;
    }
    if (t.type == Tok::Type::kInt || t.type == Tok::Type::kFloat) {
      auto e = Make(Expr::Kind::kLiteral, line);
      e->literal = t.number;
      Next();
      return e;
    }
    if (SkipOp("(")) {
      if (SkipOp(")")) {
        auto empty = Make(Expr::Kind::kList, line);
        empty->name = "tuple";
        return empty;
      }
      ExprPtr inner = ParseTuple();
      ExpectOp(")");
      return inner;
    }
    if (SkipOp("[")) {
      auto e = Make(Expr::Kind::kList, line);
      while (!SkipOp("]")) {
        if (!e->children.empty()) ExpectOp(",");
        if (SkipOp("]")) break;
        e->children.push_back(ParseExpression());
      }
      return e;
    }
    if (SkipOp("{")) {
      auto e = Make(Expr::Kind::kDict, line);
      while (!SkipOp("}")) {
        if (!e->children.empty()) ExpectOp(",");
        if (SkipOp("}")) break;
        e->children.push_back(ParseExpression());
        ExpectOp(":");
        e->children.push_back(ParseExpression());
      }
      return e;
    }
    Fail(absl::StrCat("unexpected ", Describe(t)));
  }

  void ParseCallArgs(Expr* e) {
    // '(' already consumed.
    bool first = true;
    while (!SkipOp(")")) {
      if (!first) ExpectOp(",");
      first = false;
      if (SkipOp(")")) break;
      if (Cur().type == Tok::Type::kName && Peek().type == Tok::Type::kOp && Peek().text == "=") {
        std::string key = Cur().text;
        Next();
        Next();
        e->kwargs.emplace_back(std::move(key), ParseExpression());
      } else {
        if (!e->kwargs.empty()) Fail("positional argument follows keyword argument");
        e->children.push_back(ParseExpression());
      }
    }
  }

  ExprPtr ParsePostfix(ExprPtr node) {
    while (true) {
      const int line = Cur().line;
      if (SkipOp(".")) {
        auto e = Make(Expr::Kind::kAttr, line);
        if (Cur().type == Tok::Type::kName) {
          e->name = Cur().text;
          Next();
        } else if (Cur().type == Tok::Type::kInt) {
          e->kind = Expr::Kind::kItem;
          auto idx = Make(Expr::Kind::kLiteral, line);
          idx->literal = Cur().number;
          Next();
          e->children.push_back(std::move(node));
          e->children.push_back(std::move(idx));
          node = std::move(e);
          continue;
        } else {
          Fail("expected an attribute name after '.'");
        }
        e->children.push_back(std::move(node));
        node = std::move(e);
      } else if (SkipOp("[")) {
        ExprPtr start, stop, step;
        bool is_slice = false;
        if (!IsOp(":")) start = ParseExpression();
        if (SkipOp(":")) {
          is_slice = true;
          if (!IsOp("]") && !IsOp(":")) stop = ParseExpression();
          if (SkipOp(":") && !IsOp("]")) step = ParseExpression();
        }
        ExpectOp("]");
        auto e = Make(is_slice ? Expr::Kind::kSlice : Expr::Kind::kItem, line);
        e->children.push_back(std::move(node));
        e->children.push_back(std::move(start));
        if (is_slice) {
          e->children.push_back(std::move(stop));
          e->children.push_back(std::move(step));
        }
        node = std::move(e);
      } else if (SkipOp("(")) {
        auto e = Make(Expr::Kind::kCall, line);
        e->children.push_back(std::move(node));
        ParseCallArgs(e.get());
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  ExprPtr ParseFilterExpr(ExprPtr node) {
    while (true) {
      const int line = Cur().line;
      if (SkipOp("|")) {
        auto e = Make(Expr::Kind::kFilter, line);
        e->name = ExpectName();
        while (SkipOp(".")) e->name += "." + ExpectName();
        e->children.push_back(std::move(node));
        if (SkipOp("(")) ParseCallArgs(e.get());
        node = std::move(e);
      } else if (SkipName("is")) {
        auto e = Make(Expr::Kind::kTest, line);
        e->negated = SkipName("not");
        e->name = ExpectName();
        while (SkipOp(".")) e->name += "." + ExpectName();
        e->children.push_back(std::move(node));
        const Tok& c = Cur();
        if (SkipOp("(")) {
          ParseCallArgs(e.get());
        } else if ((c.type == Tok::Type::kName || c.type == Tok::Type::kString ||
                    c.type == Tok::Type::kInt || c.type == Tok::Type::kFloat || IsOp("[") ||
                    IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          if (IsName("is")) Fail("You cannot chain multiple tests with is");
          e->children.push_back(ParsePostfix(ParsePrimary()));
        }
        node = std::move(e);
      } else if (SkipOp("(")) {
        auto e = Make(Expr::Kind::kCall, line);
        e->children.push_back(std::move(node));
        ParseCallArgs(e.get());
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  std::vector<Piece> pieces_;
  size_t ppos_ = 0;
  std::vector<Tok>* toks_ = nullptr;
  size_t tpos_ = 0;
  int max_depth_;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> ParseTemplate(const std::string& source, const std::string& source_name,
                                   int max_depth) {
  // Newlines normalised to \n; one trailing newline dropped (keep_trailing_newline=False).
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src.push_back(source[i]);
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  try {
    Parser parser(Lex(std::move(src)), max_depth);
    return parser.ParseAll();
  } catch (const SyntaxError& e) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ":", e.line, ": ", e.message));
  }
}

}  // namespace troupe::models::jinja
