// jinja::Value: the dynamically typed values of the Jinja interpreter (models/chat/jinja.h), with
// the Python semantics that chat templates rely on: truthiness, ==, ordering, str() and repr()
// (what `{{ x }}` prints), and json.dumps as transformers' `tojson` filter calls it.
//
// Lists and dicts are shared, immutable once built (Hugging Face renders in an immutable
// sandbox); namespaces are the one mutable container (`{% set ns.x = 1 %}`). Dicts keep insertion
// order and have string keys. Internal to the interpreter: callers of jinja.h pass nlohmann::json.
//
// Thread-safety: a Value may be read from many threads; a namespace is only written by the render
// that created it.
#ifndef TROUPE_MODELS_CHAT_JINJA_VALUE_H_
#define TROUPE_MODELS_CHAT_JINJA_VALUE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace troupe::models::jinja {

struct Node;
class Value;

// Insertion-ordered string-keyed map (a Python dict as chat templates see it).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* Find(const std::string& key) const;
  Value* Find(const std::string& key);
  void Set(const std::string& key, Value value);
};

// Global functions the interpreter provides.
enum class Builtin : uint8_t { kRaiseException, kRange, kNamespace, kDict, kStrftimeNow };

class Value {
 public:
  enum class Kind : uint8_t {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kMacro,
    kBuiltin,
    kLoop,
  };

  Value() = default;  // undefined
  Value(const Value&) = default;
  Value(Value&&) = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) = default;
  // Releasing the last reference to a deeply nested value (lists in lists, or a chain of
  // namespaces) frees it level by level in a loop, not by recursion as deep as the nesting.
  ~Value() {
    if (!flat_) ReleaseContainers();
  }
  static Value Undefined(std::string hint);
  static Value None();
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double f);
  static Value String(std::string s);
  static Value List(std::vector<Value> items);
  // A list that prints as a Python tuple: (1, 2) — what dict.items() yields.
  static Value Tuple(std::vector<Value> items);
  static Value MakeDict(Dict d);
  static Value Namespace(Dict d);
  static Value Macro(const Node* node);
  static Value MakeBuiltin(Builtin b);
  // The `loop` object of a for loop at item index0 of items (attributes computed on access).
  static Value Loop(int64_t index0, std::shared_ptr<const std::vector<Value>> items);

  // JSON in (objects keep the order of the json type: sorted for nlohmann::json, insertion for
  // ordered_json). Arrays and objects nested deeper than max_depth levels are not converted (the
  // conversion recurses): *too_deep is set and the value must not be used.
  static Value FromJson(const nlohmann::json& j, int max_depth, bool* too_deep);
  static Value FromJson(const nlohmann::ordered_json& j, int max_depth, bool* too_deep);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_tuple() const { return kind_ == Kind::kList && tuple_; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_mapping() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kMacro || kind_ == Kind::kBuiltin; }
  // Levels of lists and dicts: 0 for anything else, 1 + the deepest item for a list or dict.
  // Namespaces (mutable, compared by identity, never serialised) count as 0: this is how deep
  // ==, < and tojson recurse into the value.
  int depth() const { return static_cast<int>(depth_); }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::kBool ? (b_ ? 1 : 0) : i_; }
  double as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }
  // The string of a string kind, or an undefined's hint ("'x' is undefined").
  const std::string& str() const { return s_ != nullptr ? *s_ : DefaultHint(); }
  const std::vector<Value>& list() const { return *list_; }
  const Dict& dict() const { return *dict_; }
  Dict& mutable_namespace() const { return *dict_; }  // namespace kind only
  const Node* macro() const { return macro_; }
  int64_t loop_index0() const { return i_; }                       // loop kind only
  const std::vector<Value>& loop_items() const { return *list_; }  // loop kind only
  Builtin builtin() const { return builtin_; }

  // Python's bool(x).
  bool Truthy() const;
  // Python's str(x): what {{ x }} prints ("" for undefined, "None", "True", "1.0", "['a', 1]";
  // a container inside itself prints as "[...]" / "{...}", as Python's does). Containers nested
  // deeper than kMaxPrintDepth are cut short.
  std::string ToString() const;
  void AppendString(std::string* out) const;
  // The same, stopping (false) once *out holds more than `limit` bytes or containers nest deeper
  // than max_depth (then *too_deep is set, if given).
  bool AppendString(std::string* out, size_t limit, int max_depth, bool* too_deep) const;
  static constexpr int kMaxPrintDepth = 1000;
  // Python's repr(x).
  std::string Repr() const;
  // Python's type name as Jinja reports it in errors ("dict", "str", "int", ...).
  std::string TypeName() const;
  // json.dumps(x, ensure_ascii=False, indent=indent (<0: None), separators, sort_keys).
  // Returns false (and sets *error) for a value JSON cannot hold.
  bool ToJson(int indent, const std::string& item_sep, const std::string& key_sep, bool sort_keys,
              std::string* out, std::string* error) const;

 private:
  class Printer;
  static const std::string& DefaultHint();
  // ~Value's slow path: hands a last reference to a container to this thread's free loop.
  void ReleaseContainers();
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  bool tuple_ = false;
  Builtin builtin_ = Builtin::kRange;
  // Whether freeing this value frees no container inside a container: true for scalars, strings
  // and lists/dicts of those; false for namespaces and loops (their contents change).
  bool flat_ = true;
  uint16_t depth_ = 0;  // see depth(); saturates at 65535 (in the padding before i_)
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<const std::vector<Value>> list_;
  std::shared_ptr<Dict> dict_;
  const Node* macro_ = nullptr;
};

// Python ==.
bool Equals(const Value& a, const Value& b);
// Python <: sets *ok to false (and returns false) when the types cannot be ordered.
bool LessThan(const Value& a, const Value& b, bool* ok);
// Python's repr of a float (shortest round-trip: 0.1, 1.0, 1e-05, 1e+16).
std::string FloatRepr(double f);
// A string quoted as json.dumps(ensure_ascii=False) writes it.
void AppendJsonString(const std::string& s, std::string* out);

}  // namespace troupe::models::jinja

#endif  // TROUPE_MODELS_CHAT_JINJA_VALUE_H_
