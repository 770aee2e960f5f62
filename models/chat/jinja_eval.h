// The evaluator behind jinja::Template::Render (internal). One Renderer per render call: it holds
// the scopes, the output and the limit counters, so concurrent renders share nothing but the tree.
// Errors inside are thrown as RenderError and turned into a Status by Template::Render.
#ifndef TROUPE_MODELS_CHAT_JINJA_EVAL_H_
#define TROUPE_MODELS_CHAT_JINJA_EVAL_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "models/chat/jinja.h"
#include "models/chat/jinja_ast.h"
#include "models/chat/jinja_value.h"

namespace troupe::models::jinja {

struct RenderError {
  absl::StatusCode code;
  std::string message;
  int line;
};

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

class Renderer {
 public:
  Renderer(const RenderOptions& options, Value context)
      : options_(options),
        deadline_(options.max_render_time == absl::InfiniteDuration()
                      ? absl::InfiniteFuture()
                      : absl::Now() + options.max_render_time) {
    root_.context = std::move(context);
  }

  // Renders body into *out.
  void RenderRoot(const Body& body, std::string* out);
  int line() const { return line_; }

  // ---- used by the builtins (jinja_builtins.cc) ----
  [[noreturn]] void Fail(const std::string& message) const;
  [[noreturn]] void FailLimit(const std::string& message) const;
  // Throws UndefinedError-like errors for operations on an undefined value.
  void CheckDefined(const Value& v) const;
  // Fails past max_output_bytes; `bytes` (the size of a string just built) also counts as work
  // for max_render_time.
  void CheckSize(size_t bytes);
  void CountIterations(int64_t n);
  // str(v) (Value::ToString) within max_output_bytes: a list or dict whose text would be longer
  // fails without being printed in full.
  std::string Str(const Value& v);
  Value ApplyFilter(const std::string& name, const Value& v, CallArgs args);
  bool ApplyTest(const std::string& name, const Value& v, const CallArgs& args);
  Value CallMethod(const Value& obj, const std::string& name, CallArgs args);
  Value CallBuiltin(Builtin b, CallArgs args);
  Value GetAttr(const Value& obj, const std::string& name) const;
  Value GetItem(const Value& obj, const Value& key) const;
  // Python iteration: list items, dict keys, string characters; undefined is empty.
  std::vector<Value> Iterate(const Value& v) const;

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  // Counts one level of nesting for the scope's lifetime; fails past max_render_depth.
  class DepthGuard {
   public:
    explicit DepthGuard(Renderer* r) : r_(r) {
      r_->Step();
      if (ABSL_PREDICT_FALSE(++r_->depth_ > r_->options_.max_render_depth)) {
        --r_->depth_;
        r_->FailDepth();
      }
    }
    ~DepthGuard() { --r_->depth_; }

   private:
    Renderer* r_;
  };
  struct Scope {
    std::vector<std::pair<std::string, Value>> vars;
    Scope* parent = nullptr;
    Value context;  // root scope only: the render's top-level variables
    Value* Find(const std::string& name);
    void Set(const std::string& name, Value v);
  };

  // One step of work (max_steps); every 4096 steps, the clock (max_render_time).
  void Step() {
    if (ABSL_PREDICT_FALSE(++steps_ > options_.max_steps)) FailSteps();
    if (ABSL_PREDICT_FALSE((steps_ & 4095) == 0)) CheckDeadline();
  }
  // The failures of the checks above, out of line (they run once per render at most).
  [[noreturn]] ABSL_ATTRIBUTE_NOINLINE void FailSteps() const;
  [[noreturn]] ABSL_ATTRIBUTE_NOINLINE void FailDepth() const;
  [[noreturn]] ABSL_ATTRIBUTE_NOINLINE void FailValueDepth(const Expr& e);
  // `bytes` copied or built: the clock is read after every kClockBytes of them.
  void CountWork(size_t bytes) {
    work_bytes_ += bytes;
    if (work_bytes_ >= kClockBytes) {
      work_bytes_ = 0;
      CheckDeadline();
    }
  }
  void CheckDeadline() const;
  static constexpr size_t kClockBytes = 1u << 20;

  Flow RenderBody(const Body& body, Scope* scope, std::string* out);
  Flow RenderNode(const Node& node, Scope* scope, std::string* out);
  void RenderFor(const Node& node, Scope* scope, std::string* out);
  void Append(const std::string& s, std::string* out);
  // EvalNode, refusing a result that nests deeper than max_render_depth (so that ==, < and
  // tojson, which recurse into lists and dicts, stay within the stack).
  Value Eval(const Expr& e, Scope* scope) {
    Value v = EvalNode(e, scope);
    if (ABSL_PREDICT_FALSE(v.depth() > options_.max_render_depth)) FailValueDepth(e);
    return v;
  }
  Value EvalNode(const Expr& e, Scope* scope);
  Value Lookup(const std::string& name, Scope* scope);
  Value EvalCall(const Expr& e, Scope* scope);
  Value CallValue(const Value& callee, CallArgs args);
  Value CallMacro(const Node& macro, CallArgs args);
  Value Binary(const std::string& op, const Value& a, const Value& b);
  bool Compare(const std::string& op, const Value& a, const Value& b);
  Value Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
  CallArgs EvalArgs(const Expr& e, size_t first, Scope* scope);

  const RenderOptions& options_;
  Scope root_;
  int line_ = 0;
  int call_depth_ = 0;
  int depth_ = 0;  // see RenderOptions::max_render_depth
  int64_t iterations_ = 0;
  int64_t steps_ = 0;          // see RenderOptions::max_steps
  size_t work_bytes_ = 0;      // bytes built since the clock was last read
  const absl::Time deadline_;  // see RenderOptions::max_render_time
};

// Whether a filter / test of that name exists (checked before the operand is evaluated, as Jinja2
// checks names when it compiles).
bool IsKnownFilter(const std::string& name);
bool IsKnownTest(const std::string& name);

// ---- string helpers (jinja_text.cc), Python semantics on UTF-8 ----
std::vector<std::string> SplitCodePoints(const std::string& s);
size_t CountCodePoints(const std::string& s);
// str.strip / lstrip / rstrip: chars is a string of code points to strip, or anything else for
// whitespace (str.isspace: Unicode whitespace, jinja_unicode.h).
std::string Strip(const std::string& s, const Value& chars, bool left, bool right);
std::string AsciiUpper(std::string s);
std::string AsciiLower(std::string s);
std::string PyTitle(const std::string& s);     // str.title()
std::string JinjaTitle(const std::string& s);  // the title filter
std::string Capitalize(const std::string& s);
// str.replace; count < 0 = all.
std::string Replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count);
// str.split(sep, maxsplit); sep not a string = split on whitespace runs (str.isspace).
std::vector<Value> Split(const std::string& s, const Value& sep, int64_t maxsplit);
// str.splitlines(): lines end at \n, \r\n, \r, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029.
std::vector<std::string> SplitLines(const std::string& s);
// A keyword argument, or null.
const Value* Kwarg(const CallArgs& args, const std::string& name);
// The i-th argument, given by position or by name; `fallback` when absent.
Value Arg(const CallArgs& args, size_t i, const std::string& name, Value fallback = Value());

}  // namespace troupe::models::jinja

#endif  // TROUPE_MODELS_CHAT_JINJA_EVAL_H_
