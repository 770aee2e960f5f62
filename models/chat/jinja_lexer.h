// The lexer of the Jinja interpreter (internal): splits template source into text, {{ }} and
// {% %} pieces, applying whitespace control as Jinja2 does with trim_blocks=True and
// lstrip_blocks=True ({%- -%} strip all whitespace, {%+ keeps it, comments vanish), and turns the
// inside of each tag into tokens. Errors are thrown as SyntaxError; ParseTemplate (jinja_parser.cc)
// catches them.
#ifndef TROUPE_MODELS_CHAT_JINJA_LEXER_H_
#define TROUPE_MODELS_CHAT_JINJA_LEXER_H_

#include <string>
#include <vector>

#include "models/chat/jinja_value.h"

namespace troupe::models::jinja {

struct SyntaxError {
  int line;
  std::string message;
};

struct Tok {
  enum class Type { kName, kString, kInt, kFloat, kOp, kEnd };
  Type type;
  std::string text;  // name, operator, or the decoded string
  Value number;
  int line;
};

struct Piece {
  enum class Type { kText, kVar, kBlock };
  Type type;
  std::string text;
  std::vector<Tok> toks;  // ends with a kEnd token
  int line;
};

// Pieces of src (newlines already normalised to \n); throws SyntaxError.
std::vector<Piece> Lex(std::string src);

}  // namespace troupe::models::jinja

#endif  // TROUPE_MODELS_CHAT_JINJA_LEXER_H_
