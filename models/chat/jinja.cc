#include "models/chat/jinja.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/chat/jinja_ast.h"
#include "models/chat/jinja_eval.h"
#include "models/chat/jinja_value.h"

namespace troupe::models::jinja {

struct Template::Tree {
  Body body;
};

absl::StatusOr<Template> Template::Parse(std::string_view text, std::string source_name) {
  absl::StatusOr<Body> body = ParseTemplate(std::string(text), source_name, kMaxNesting);
  if (!body.ok()) return body.status();
  auto tree = std::make_shared<Tree>();
  tree->body = std::move(*body);
  Template t;
  t.tree_ = std::move(tree);
  t.source_name_ = std::make_shared<const std::string>(std::move(source_name));
  return t;
}

namespace {

absl::StatusOr<std::string> RenderValue(const Body& body, const std::string& source_name,
                                        Value context, const RenderOptions& options) {
  Renderer renderer(options, std::move(context));
  std::string out;
  try {
    renderer.RenderRoot(body, &out);
  } catch (const RenderError& e) {
    return absl::Status(e.code, absl::StrCat(source_name, ":", e.line, ": ", e.message));
  }
  return out;
}

// JSON as template values; ResourceExhausted past max_render_depth levels (the conversion
// recurses; no render could use such a value).
template <typename Json>
absl::StatusOr<Value> ContextValue(const std::string& source_name, const std::string& what,
                                   const Json& json, const RenderOptions& options) {
  bool too_deep = false;
  Value v = Value::FromJson(json, options.max_render_depth, &too_deep);
  if (!too_deep) return v;
  return absl::ResourceExhaustedError(absl::StrCat(source_name, ": ", what,
                                                   " nests deeper than max_render_depth (",
                                                   options.max_render_depth, ")"));
}

template <typename Json>
absl::StatusOr<std::string> RenderImpl(const Body& body, const std::string& source_name,
                                       const Json& context, const RenderOptions& options) {
  if (!context.is_null() && !context.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_name, ": the render context must be a JSON object"));
  }
  if (context.is_null()) return RenderValue(body, source_name, Value::MakeDict(Dict()), options);
  absl::StatusOr<Value> value = ContextValue(source_name, "the render context", context, options);
  if (!value.ok()) return value.status();
  return RenderValue(body, source_name, *std::move(value), options);
}

}  // namespace

absl::StatusOr<std::string> Template::RenderVariables(const Variables& variables,
                                                      const RenderOptions& options) const {
  Dict d;
  d.items.reserve(variables.size());
  for (const auto& [name, json] : variables) {
    if (json == nullptr) continue;
    absl::StatusOr<Value> value =
        ContextValue(*source_name_, absl::StrCat("variable '", name, "'"), *json, options);
    if (!value.ok()) return value.status();
    d.Set(name, *std::move(value));
  }
  return RenderValue(tree_->body, *source_name_, Value::MakeDict(std::move(d)), options);
}

absl::StatusOr<std::string> Template::Render(const nlohmann::json& context,
                                             const RenderOptions& options) const {
  return RenderImpl(tree_->body, *source_name_, context, options);
}

absl::StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context,
                                             const RenderOptions& options) const {
  return RenderImpl(tree_->body, *source_name_, context, options);
}

// ---------------------------------------------------------------------------------------------

Value* Renderer::Scope::Find(const std::string& name) {
  for (auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Renderer::Scope::Set(const std::string& name, Value v) {
  if (Value* slot = Find(name)) {
    *slot = std::move(v);
  } else {
    vars.emplace_back(name, std::move(v));
  }
}

void Renderer::Fail(const std::string& message) const {
  throw RenderError{absl::StatusCode::kInvalidArgument, message, line_};
}

void Renderer::FailLimit(const std::string& message) const {
  throw RenderError{absl::StatusCode::kResourceExhausted, message, line_};
}

void Renderer::CheckDefined(const Value& v) const {
  if (v.is_undefined()) Fail(v.str());
}

void Renderer::CheckSize(size_t bytes) {
  if (bytes > options_.max_output_bytes) {
    FailLimit(absl::StrCat("output exceeds max_output_bytes (", options_.max_output_bytes, ")"));
  }
  CountWork(bytes);
}

void Renderer::FailSteps() const {
  FailLimit(absl::StrCat("render steps exceed max_steps (", options_.max_steps, ")"));
}

void Renderer::FailDepth() const {
  FailLimit(
      absl::StrCat("template nesting exceeds max_render_depth (", options_.max_render_depth, ")"));
}

void Renderer::FailValueDepth(const Expr& e) {
  line_ = e.line;
  FailLimit(absl::StrCat("a list or dict nests deeper than max_render_depth (",
                         options_.max_render_depth, ")"));
}

void Renderer::CheckDeadline() const {
  if (absl::Now() > deadline_) {
    FailLimit(absl::StrCat("render time exceeds max_render_time (",
                           absl::FormatDuration(options_.max_render_time), ")"));
  }
}

std::string Renderer::Str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  bool too_deep = false;
  if (!v.AppendString(&out, options_.max_output_bytes, options_.max_render_depth, &too_deep)) {
    if (too_deep) {
      FailLimit(absl::StrCat("printing a value nested deeper than max_render_depth (",
                             options_.max_render_depth, ")"));
    }
    CheckSize(options_.max_output_bytes + 1);
  }
  CountWork(out.size());
  return out;
}

void Renderer::CountIterations(int64_t n) {
  iterations_ += n;
  if (iterations_ > options_.max_loop_iterations) {
    FailLimit(absl::StrCat("loop iterations exceed max_loop_iterations (",
                           options_.max_loop_iterations, ")"));
  }
}

void Renderer::RenderRoot(const Body& body, std::string* out) { RenderBody(body, &root_, out); }

void Renderer::Append(const std::string& s, std::string* out) {
  if (out->size() + s.size() > options_.max_output_bytes) CheckSize(out->size() + s.size());
  CountWork(s.size());
  out->append(s);
}

Renderer::Flow Renderer::RenderBody(const Body& body, Scope* scope, std::string* out) {
  for (const NodePtr& node : body) {
    const Flow flow = RenderNode(*node, scope, out);
    if (flow != Flow::kNormal) return flow;
  }
  return Flow::kNormal;
}

Renderer::Flow Renderer::RenderNode(const Node& node, Scope* scope, std::string* out) {
  DepthGuard guard(this);
  line_ = node.line;
  switch (node.kind) {
    case Node::Kind::kText:
      Append(node.text, out);
      return Flow::kNormal;
    case Node::Kind::kOutput: {
      const Value v = Eval(*node.expr, scope);
      if (v.is_string()) {
        Append(v.str(), out);
      } else {
        Append(Str(v), out);
      }
      return Flow::kNormal;
    }
    case Node::Kind::kIf:
      for (const auto& [cond, body] : node.branches) {
        if (cond == nullptr || Eval(*cond, scope).Truthy()) return RenderBody(body, scope, out);
      }
      return Flow::kNormal;
    case Node::Kind::kFor:
      RenderFor(node, scope, out);
      return Flow::kNormal;
    case Node::Kind::kSet: {
      Value v = Eval(*node.expr, scope);
      if (!node.attr.empty()) {
        const Value ns = Lookup(node.targets[0], scope);
        if (ns.kind() != Value::Kind::kNamespace) {
          line_ = node.line;
          Fail("cannot assign attribute on non-namespace object");
        }
        ns.mutable_namespace().Set(node.attr, std::move(v));
      } else if (node.targets.size() == 1) {
        scope->Set(node.targets[0], std::move(v));
      } else {
        const std::vector<Value> items = Iterate(v);
        if (items.size() != node.targets.size()) {
          Fail(absl::StrCat(items.size() < node.targets.size() ? "not enough" : "too many",
                            " values to unpack (expected ", node.targets.size(), ")"));
        }
        for (size_t i = 0; i < items.size(); ++i) scope->Set(node.targets[i], items[i]);
      }
      return Flow::kNormal;
    }
    case Node::Kind::kSetBlock: {
      std::string captured;
      RenderBody(node.body, scope, &captured);
      scope->Set(node.targets[0], Value::String(std::move(captured)));
      return Flow::kNormal;
    }
    case Node::Kind::kMacro:
      scope->Set(node.name, Value::Macro(&node));
      return Flow::kNormal;
    case Node::Kind::kBreak:
      return Flow::kBreak;
    case Node::Kind::kContinue:
      return Flow::kContinue;
    case Node::Kind::kScope:
      return RenderBody(node.body, scope, out);
  }
  return Flow::kNormal;
}

void Renderer::RenderFor(const Node& node, Scope* scope, std::string* out) {
  const Value iterable = Eval(*node.expr, scope);
  if (iterable.is_none() || iterable.is_number()) {
    Fail(absl::StrCat("'", iterable.TypeName(), "' object is not iterable"));
  }
  std::vector<Value> items = Iterate(iterable);
  Scope loop_scope;
  loop_scope.parent = scope;
  auto bind = [&](const Value& item) {
    if (node.targets.size() == 1) {
      loop_scope.Set(node.targets[0], item);
      return;
    }
    const std::vector<Value> parts = Iterate(item);
    if (parts.size() != node.targets.size()) {
      Fail(absl::StrCat(parts.size() < node.targets.size() ? "not enough" : "too many",
                        " values to unpack (expected ", node.targets.size(), ")"));
    }
    for (size_t i = 0; i < parts.size(); ++i) loop_scope.Set(node.targets[i], parts[i]);
  };
  if (node.filter != nullptr) {
    std::vector<Value> kept;
    for (const Value& item : items) {
      CountIterations(1);
      bind(item);
      if (Eval(*node.filter, &loop_scope).Truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    RenderBody(node.else_body, scope, out);
    return;
  }
  const int64_t n = static_cast<int64_t>(items.size());
  auto shared_items = std::make_shared<const std::vector<Value>>(std::move(items));
  for (int64_t i = 0; i < n; ++i) {
    CountIterations(1);
    loop_scope.vars.clear();  // each iteration starts afresh, as in Jinja2
    bind((*shared_items)[i]);
    loop_scope.Set("loop", Value::Loop(i, shared_items));
    if (RenderBody(node.body, &loop_scope, out) == Flow::kBreak) break;
  }
}

Value Renderer::Lookup(const std::string& name, Scope* scope) {
  for (Scope* s = scope; s != nullptr; s = s->parent) {
    if (Value* v = s->Find(name)) return *v;
  }
  if (const Value* v = root_.context.dict().Find(name)) return *v;
  if (name == "raise_exception") return Value::MakeBuiltin(Builtin::kRaiseException);
  if (name == "range") return Value::MakeBuiltin(Builtin::kRange);
  if (name == "namespace") return Value::MakeBuiltin(Builtin::kNamespace);
  if (name == "dict") return Value::MakeBuiltin(Builtin::kDict);
  if (name == "strftime_now") return Value::MakeBuiltin(Builtin::kStrftimeNow);
  return Value::Undefined(absl::StrCat("'", name, "' is undefined"));
}

CallArgs Renderer::EvalArgs(const Expr& e, size_t first, Scope* scope) {
  CallArgs args;
  for (size_t i = first; i < e.children.size(); ++i) {
    args.args.push_back(Eval(*e.children[i], scope));
  }
  for (const auto& [k, v] : e.kwargs) args.kwargs.emplace_back(k, Eval(*v, scope));
  return args;
}

Value Renderer::EvalNode(const Expr& e, Scope* scope) {
  DepthGuard guard(this);
  line_ = e.line;
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName:
      return Lookup(e.name, scope);
    case Expr::Kind::kList: {
      std::vector<Value> items;
      items.reserve(e.children.size());
      for (const ExprPtr& c : e.children) items.push_back(Eval(*c, scope));
      return e.name == "tuple" ? Value::Tuple(std::move(items)) : Value::List(std::move(items));
    }
    case Expr::Kind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        const Value k = Eval(*e.children[i], scope);
        if (!k.is_string()) Fail("dict literals support string keys only");
        d.Set(k.str(), Eval(*e.children[i + 1], scope));
      }
      return Value::MakeDict(std::move(d));
    }
    case Expr::Kind::kAttr: {
      const Value obj = Eval(*e.children[0], scope);
      line_ = e.line;
      return GetAttr(obj, e.name);
    }
    case Expr::Kind::kItem: {
      const Value obj = Eval(*e.children[0], scope);
      const Value key = Eval(*e.children[1], scope);
      line_ = e.line;
      return GetItem(obj, key);
    }
    case Expr::Kind::kSlice: {
      const Value obj = Eval(*e.children[0], scope);
      auto opt = [&](int i) { return e.children[i] ? Eval(*e.children[i], scope) : Value::None(); };
      const Value start = opt(1), stop = opt(2), step = opt(3);
      line_ = e.line;
      return Slice(obj, start, stop, step);
    }
    case Expr::Kind::kCall:
      return EvalCall(e, scope);
    case Expr::Kind::kFilter: {
      if (!IsKnownFilter(e.name)) Fail(absl::StrCat("No filter named '", e.name, "'."));
      const Value v = Eval(*e.children[0], scope);
      CallArgs args = EvalArgs(e, 1, scope);
      line_ = e.line;
      return ApplyFilter(e.name, v, std::move(args));
    }
    case Expr::Kind::kTest: {
      if (!IsKnownTest(e.name)) Fail(absl::StrCat("No test named '", e.name, "'."));
      const Value v = Eval(*e.children[0], scope);
      CallArgs args = EvalArgs(e, 1, scope);
      line_ = e.line;
      return Value::Bool(ApplyTest(e.name, v, args) != e.negated);
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      const Value v = Eval(*e.children[0], scope);
      CheckDefined(v);
      if (!v.is_number()) {
        Fail(absl::StrCat("bad operand type for unary ", e.kind == Expr::Kind::kNeg ? "-" : "+",
                          ": '", v.TypeName(), "'"));
      }
      if (e.kind == Expr::Kind::kPos)
        return v.kind() == Value::Kind::kBool ? Value::Int(v.as_int()) : v;
      if (v.kind() == Value::Kind::kFloat) return Value::Float(-v.as_float());
      if (v.as_int() == INT64_MIN) Fail("integer overflow in unary - (64-bit integers)");
      return Value::Int(-v.as_int());
    }
    case Expr::Kind::kNot:
      return Value::Bool(!Eval(*e.children[0], scope).Truthy());
    case Expr::Kind::kAnd: {
      Value a = Eval(*e.children[0], scope);
      return a.Truthy() ? Eval(*e.children[1], scope) : a;
    }
    case Expr::Kind::kOr: {
      Value a = Eval(*e.children[0], scope);
      return a.Truthy() ? a : Eval(*e.children[1], scope);
    }
    case Expr::Kind::kBinary: {
      const Value a = Eval(*e.children[0], scope);
      const Value b = Eval(*e.children[1], scope);
      line_ = e.line;
      return Binary(e.name, a, b);
    }
    case Expr::Kind::kCompare: {
      Value left = Eval(*e.children[0], scope);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = Eval(*e.children[i + 1], scope);
        line_ = e.line;
        if (!Compare(e.ops[i], left, right)) return Value::Bool(false);
        left = std::move(right);
      }
      return Value::Bool(true);
    }
    case Expr::Kind::kCondExpr:
      if (Eval(*e.children[0], scope).Truthy()) return Eval(*e.children[1], scope);
      if (e.children[2]) return Eval(*e.children[2], scope);
      return Value::Undefined(
          "the inline if-expression evaluated to false and no else section was defined");
  }
  return Value();
}

Value Renderer::EvalCall(const Expr& e, Scope* scope) {
  const Expr& callee = *e.children[0];
  if (callee.kind == Expr::Kind::kAttr) {
    const Value obj = Eval(*callee.children[0], scope);
    if (obj.is_string() || obj.is_list() || obj.kind() == Value::Kind::kDict ||
        obj.kind() == Value::Kind::kLoop) {
      CallArgs args = EvalArgs(e, 1, scope);
      line_ = e.line;
      return CallMethod(obj, callee.name, std::move(args));
    }
    line_ = e.line;
    const Value fn = GetAttr(obj, callee.name);
    CallArgs args = EvalArgs(e, 1, scope);
    line_ = e.line;
    return CallValue(fn, std::move(args));
  }
  const Value fn = Eval(callee, scope);
  CallArgs args = EvalArgs(e, 1, scope);
  line_ = e.line;
  return CallValue(fn, std::move(args));
}

Value Renderer::CallValue(const Value& callee, CallArgs args) {
  CheckDefined(callee);
  if (callee.kind() == Value::Kind::kMacro) return CallMacro(*callee.macro(), std::move(args));
  if (callee.kind() == Value::Kind::kBuiltin) return CallBuiltin(callee.builtin(), std::move(args));
  Fail(absl::StrCat("'", callee.TypeName(), "' object is not callable"));
}

Value Renderer::CallMacro(const Node& macro, CallArgs args) {
  if (call_depth_ >= options_.max_call_depth) {
    FailLimit(absl::StrCat("macro calls nest deeper than max_call_depth (", options_.max_call_depth,
                           ")"));
  }
  if (args.args.size() > macro.params.size()) {
    Fail(absl::StrCat("macro '", macro.name, "' takes not more than ", macro.params.size(),
                      " argument(s)"));
  }
  Scope scope;
  scope.parent = &root_;
  for (size_t i = 0; i < macro.params.size(); ++i) {
    if (i < args.args.size()) {
      scope.Set(macro.params[i], args.args[i]);
    }
  }
  for (auto& [k, v] : args.kwargs) {
    bool known = false;
    for (const std::string& p : macro.params) known = known || p == k;
    if (!known) Fail(absl::StrCat("macro '", macro.name, "' takes no keyword argument '", k, "'"));
    scope.Set(k, std::move(v));
  }
  for (size_t i = 0; i < macro.params.size(); ++i) {
    if (scope.Find(macro.params[i]) != nullptr) continue;
    if (macro.defaults[i] != nullptr) {
      scope.Set(macro.params[i], Eval(*macro.defaults[i], &scope));
    } else {
      scope.Set(macro.params[i], Value::Undefined(absl::StrCat("parameter '", macro.params[i],
                                                               "' was not provided")));
    }
  }
  ++call_depth_;
  std::string out;
  const int saved_line = line_;
  RenderBody(macro.body, &scope, &out);
  line_ = saved_line;
  --call_depth_;
  return Value::String(std::move(out));
}

}  // namespace troupe::models::jinja
