// Jinja templates for chat prompts: a parse-once, render-many interpreter of the Jinja2 subset that
// the chat templates of open models use (ChatML/Qwen, Llama 3.x, Gemma, Mistral, ...).
//
//   absl::StatusOr<jinja::Template> t = jinja::Template::Parse(text, "tokenizer_config.json");
//   nlohmann::json context = {{"messages", messages}, {"add_generation_prompt", true}};
//   absl::StatusOr<std::string> prompt = t->Render(context);
//
// Environment: what transformers' apply_chat_template uses — trim_blocks=True, lstrip_blocks=True,
// keep_trailing_newline=False, no autoescape, Jinja2's default Undefined (prints as "", is false,
// iterates as empty; an attribute or item of it is an error), loopcontrols (break/continue) and
// the {% generation %} tag (rendered as its body).
//
// Supported: {% if/elif/else %}, {% for a[, b] in xs [if cond] %}...{% else %}, loop.index/index0/
// revindex/revindex0/first/last/length/previtem/nextitem/cycle, {% set %} (tuples, ns.attr, block
// set), {% macro %} and calls, {# #}, whitespace control (-, +); literals, lists, dicts,
// attributes, subscripts, slices, + - * / // % ** ~, comparisons, in / not in, and/or/not,
// conditional expressions; the tests and string / dict methods listed in jinja_builtins.cc and
// the filters listed in jinja_filters.cc;
// globals raise_exception(msg), range, namespace, dict, strftime_now(fmt).
// Refused with an error naming it: any other tag, filter, test or method; recursive loops.
// Strings are UTF-8; length, indexing and slicing count code points; upper/lower/title/capitalize
// change ASCII letters only. Whitespace is Python's (str.isspace: U+00A0, U+2003, U+3000, U+2028,
// \v, \f, \x1c-\x1f, ...) wherever Python's str methods or Jinja2's lexer look for it: trim, strip,
// lstrip, rstrip, split(), the title filter, {%- -%} and lstrip_blocks; splitlines and indent
// break lines where str.splitlines does. A list or dict prints as Python's repr, escaping what
// str.isprintable rejects ('\u3000', '\xa0', '\u200b', ...).
//
// Errors: InvalidArgument "SOURCE:LINE: message" for syntax errors (the template's own line), for
// raise_exception (its message), for undefined access and type errors; ResourceExhausted naming
// the limit of RenderOptions that a render exceeded (output bytes, loop iterations, steps, render
// time, call or render depth). Integers are 64-bit: an overflow is an error where Python would
// grow.
//
// Thread-safety: a Template is immutable; Render is const and may run concurrently. Copies share
// the parsed tree.
#ifndef TROUPE_MODELS_CHAT_JINJA_H_
#define TROUPE_MODELS_CHAT_JINJA_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace troupe::models::jinja {

struct Node;

// Bounds on one render, so that a hostile template cannot hang or exhaust memory. A render past
// any of them fails with ResourceExhausted "SOURCE:LINE: ... exceeds <field> (<value>)". The
// chat templates of open models render a conversation in well under a millisecond, a few
// thousand steps and a few KiB: the defaults leave them orders of magnitude of room.
struct RenderOptions {
  // Bytes of output, and of any string a template builds (or prints: a list's or dict's text).
  size_t max_output_bytes = 32u << 20;
  // For-loop iterations over the whole render (also bounds range() and list sizes).
  int64_t max_loop_iterations = 1'000'000;
  // Evaluation steps over the whole render: each block, expression and loop iteration is one. A
  // bound on the work that does not depend on the machine (recursive macros that branch, long
  // chains of expressions).
  int64_t max_steps = 10'000'000;
  // Wall-clock time of the render, from the call to Render; absl::InfiniteDuration() = none.
  // Checked every 4096 steps and whenever 1 MiB more has been copied or built, so a render
  // stops within a few milliseconds of it.
  absl::Duration max_render_time = absl::Seconds(1);
  // Nested macro calls.
  int max_call_depth = 64;
  // Nested blocks, expressions and macro calls together: bounds the stack a render uses
  // (roughly 1 KiB a level). Also the deepest nesting of lists and dicts a render may build or be
  // given (==, tojson and printing recurse into them); values count at most 65535 levels.
  int max_render_depth = 1000;
  // What strftime_now() formats; unset = the current local time.
  std::optional<absl::CivilSecond> now;
};

class Template {
 public:
  // Deepest nesting of blocks and expressions a template may have (parse-time bound).
  static constexpr int kMaxNesting = 128;

  // Parses text; source_name prefixes error messages. InvalidArgument "SOURCE:LINE: message".
  static absl::StatusOr<Template> Parse(std::string_view text, std::string source_name);

  // Renders with the top-level variables of context (a JSON object; null = none).
  absl::StatusOr<std::string> Render(const nlohmann::json& context,
                                     const RenderOptions& options = {}) const;
  // The same, keeping the key order of an ordered_json (tojson prints keys in that order).
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context,
                                     const RenderOptions& options = {}) const;

  // Top-level variables given by reference, in order (a later name overrides an earlier one):
  // renders without first copying them into one JSON object. Null pointers are skipped.
  using Variables = std::vector<std::pair<std::string, const nlohmann::ordered_json*>>;
  absl::StatusOr<std::string> RenderVariables(const Variables& variables,
                                              const RenderOptions& options = {}) const;

  const std::string& source_name() const { return *source_name_; }

 private:
  struct Tree;
  Template() = default;
  std::shared_ptr<const Tree> tree_;
  std::shared_ptr<const std::string> source_name_;
};

}  // namespace troupe::models::jinja

#endif  // TROUPE_MODELS_CHAT_JINJA_H_
