// The Jinja evaluator's state and the builtins it calls (filters, tests, attributes, globals).
//
// Scopes follow jinja2: the template's top level is one scope (if blocks share it), every for
// loop iteration, macro call and call-block body gets a child scope, so `set` inside them does
// not leak out (namespace() objects are the way out, as in jinja2).
//
// Invariants: an Interp renders one template once; errors are RenderException. A macro holds the
// scope it was defined in, and that scope (or an ancestor, through `set`) holds the macro: the
// Interp remembers those scopes and empties them when the render ends, so no cycle outlives it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "jinja/ast.h"
#include "jinja/template.h"
#include "jinja/value.h"

namespace edgelm::jinja {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

struct Interp {
  Interp() = default;
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;
  ~Interp();

  const RenderOptions* opts = nullptr;
  int depth = 0;  // macro recursion guard

  enum class Flow { normal, brk, cont };
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
  Value eval(const Expr& e, const ScopePtr& scope);
  Value call(const Value& f, const Args& args);

 private:
  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  Value make_macro(const Stmt& s, const ScopePtr& scope, const Body* body, const std::vector<MacroParam>* params,
                   std::string name);
  Args eval_args(const Expr& e, size_t first, const ScopePtr& scope);
  std::optional<Value> filter_input_;
  std::vector<ScopePtr> macro_scopes_;  // scopes captured by macros (emptied by ~Interp)
};

// Builtins (builtins.cpp).
[[noreturn]] void fail_undefined(const Value& v);
Value get_attr(const Value& obj, const std::string& name);  // obj.name: attribute, then item
Value get_item(const Value& obj, const Value& key);         // obj[key]: item, then attribute
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);
std::vector<Value> iterate(const Value& v);  // for loops, filters over sequences
Value apply_filter(Interp& in, const std::string& name, const Value& v, const Args& args);
bool apply_test(Interp& in, const std::string& name, const Value& v, const Args& args);
Value binary_op(const std::string& op, const Value& a, const Value& b);
void add_globals(Scope& s, const RenderOptions& opts);

}  // namespace edgelm::jinja
