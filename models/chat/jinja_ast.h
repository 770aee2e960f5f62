// The syntax tree of a parsed Jinja template (models/chat/jinja.h), and the parser that builds it.
// Internal to the interpreter. The tree is immutable after ParseTemplate returns: rendering reads
// it from any number of threads.
//
// Whitespace control follows Jinja2 with trim_blocks=True and lstrip_blocks=True (what
// transformers' apply_chat_template uses) and keep_trailing_newline=False: the lexer strips the
// text before turning it into nodes, so the evaluator only ever appends Text nodes verbatim.
#ifndef TROUPE_MODELS_CHAT_JINJA_AST_H_
#define TROUPE_MODELS_CHAT_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "models/chat/jinja_value.h"

namespace troupe::models::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,   // literal
    kName,      // name
    kList,      // children; name "tuple" for (a, b) and a, b
    kDict,      // children: key, value, key, value, ...
    kAttr,      // children[0] . name
    kItem,      // children[0] [ children[1] ]
    kSlice,     // children[0] [ children[1] : children[2] : children[3] ]  (null = omitted)
    kCall,      // children[0] ( children[1..], kwargs )
    kFilter,    // children[0] | name ( children[1..], kwargs )
    kTest,      // children[0] is [not] name ( children[1..], kwargs ); negated
    kNeg,       // - children[0]
    kPos,       // + children[0]
    kNot,       // not children[0]
    kAnd,       // children[0] and children[1]
    kOr,        // children[0] or children[1]
    kBinary,    // children[0] name children[1]; name in + - * / // % ** ~
    kCompare,   // children[0] ops[0] children[1] ops[1] children[2] ...
    kCondExpr,  // children[1] if children[0] else children[2] (children[2] may be null)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
};

struct Node;
using NodePtr = std::unique_ptr<Node>;
using Body = std::vector<NodePtr>;

struct Node {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches: (condition, body); the else branch has a null condition
    kFor,       // for targets in expr [if filter]: body [else: else_body]
    kSet,       // set targets = expr, or set targets[0].attr = expr (attr non-empty)
    kSetBlock,  // set targets[0] %} body {% endset
    kMacro,     // macro name(params = defaults): body
    kBreak,
    kContinue,
    kScope,  // a body rendered as is ({% generation %})
  };
  Kind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::pair<ExprPtr, Body>> branches;
  std::vector<std::string> targets;
  std::string attr;
  Body body;
  Body else_body;
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null when none
};

// Parses template source. Errors: InvalidArgument "SOURCE:LINE: message".
// max_depth bounds the nesting of expressions and blocks.
absl::StatusOr<Body> ParseTemplate(const std::string& source, const std::string& source_name,
                                   int max_depth);

}  // namespace troupe::models::jinja

#endif  // TROUPE_MODELS_CHAT_JINJA_AST_H_
