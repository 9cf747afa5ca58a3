// The Jinja evaluator: statements and expressions over Values (see eval.h, template.h).
#include "jinja/eval.h"

#include <fmt/format.h>

#include "jinja/lexer.h"
#include "jinja/parser.h"

namespace edgelm::jinja {

Args Interp::eval_args(const Expr& e, size_t first, const ScopePtr& scope) {
  Args a;
  for (size_t i = first; i < e.kids.size(); ++i) a.pos.push_back(eval(*e.kids[i], scope));
  for (const auto& kv : e.kwargs) a.kw.emplace_back(kv.first, eval(*kv.second, scope));
  return a;
}

Value Interp::call(const Value& f, const Args& args) {
  if (f.is_callable()) return f.fn().fn(*this, args);
  if (f.is_undefined()) fail_undefined(f);
  throw RenderException(fmt::format("'{}' object is not callable", f.type_name()));
}

Value Interp::eval(const Expr& e, const ScopePtr& scope) {
  switch (e.k) {
    case Expr::K::literal: return Value(e.lit);
    case Expr::K::name: {
      const Value* v = scope->find(e.name);
      return v ? *v : Value::undefined(fmt::format("'{}' is undefined", e.name));
    }
    case Expr::K::list: {
      json arr = json::array();
      for (const auto& k : e.kids) {
        Value v = eval(*k, scope);
        arr.push_back(v.is_undefined() ? json(nullptr) : to_json(v));
      }
      return Value(std::move(arr));
    }
    case Expr::K::dict: {
      json obj = json::object();
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        Value k = eval(*e.kids[i], scope), v = eval(*e.kids[i + 1], scope);
        obj[k.is_string() ? k.str() : py_str(k)] = v.is_undefined() ? json(nullptr) : to_json(v);
      }
      return Value(std::move(obj));
    }
    case Expr::K::getattr: return get_attr(eval(*e.kids[0], scope), e.name);
    case Expr::K::getitem: return get_item(eval(*e.kids[0], scope), eval(*e.kids[1], scope));
    case Expr::K::slice: {
      Value obj = eval(*e.kids[0], scope);
      Value parts[3];
      for (int i = 0; i < 3; ++i)
        if (e.kids[1 + static_cast<size_t>(i)]) parts[i] = eval(*e.kids[1 + static_cast<size_t>(i)], scope);
      return slice_value(obj, parts[0], parts[1], parts[2]);
    }
    case Expr::K::call: {
      Value f = eval(*e.kids[0], scope);
      return call(f, eval_args(e, 1, scope));
    }
    case Expr::K::filter: {
      Value v;
      if (e.kids[0])
        v = eval(*e.kids[0], scope);
      else if (filter_input_)
        v = *filter_input_;
      return apply_filter(*this, e.name, v, eval_args(e, 1, scope));
    }
    case Expr::K::test: {
      Value v = eval(*e.kids[0], scope);
      return Value(json(apply_test(*this, e.name, v, eval_args(e, 1, scope)) != e.negated));
    }
    case Expr::K::not_: return Value(json(!eval(*e.kids[0], scope).truthy()));
    case Expr::K::neg: return binary_op("-", Value(json(0)), eval(*e.kids[0], scope));
    case Expr::K::pos: return binary_op("+", Value(json(0)), eval(*e.kids[0], scope));
    case Expr::K::binop: {
      if (e.name == "and" || e.name == "or") {
        Value a = eval(*e.kids[0], scope);
        if (a.truthy() == (e.name == "or")) return a;
        return eval(*e.kids[1], scope);
      }
      Value a = eval(*e.kids[0], scope);
      return binary_op(e.name, a, eval(*e.kids[1], scope));
    }
    case Expr::K::cond: {
      if (eval(*e.kids[1], scope).truthy()) return eval(*e.kids[0], scope);
      return e.kids[2] ? eval(*e.kids[2], scope) : Value::undefined("the inline if-expression evaluated to false");
    }
  }
  return Value();
}

Interp::~Interp() {
  // Break the macro <-> scope cycles: every variable of a captured scope and of its ancestors
  // (where `set` may have stored the macro) goes; the scopes themselves then free normally.
  for (const ScopePtr& s : macro_scopes_)
    for (Scope* p = s.get(); p != nullptr; p = p->parent.get()) p->vars.clear();
}

Value Interp::make_macro(const Stmt& s, const ScopePtr& scope, const Body* body, const std::vector<MacroParam>* params,
                         std::string name) {
  macro_scopes_.push_back(scope);
  return Value::callable(name, [body, params, scope, name](Interp& in, const Args& args) -> Value {
    if (++in.depth > 200) throw RenderException("maximum macro recursion depth exceeded");
    auto local = std::make_shared<Scope>();
    local->parent = scope;
    json varargs = json::array(), kwargs = json::object();
    for (size_t i = params->size(); i < args.pos.size(); ++i) varargs.push_back(to_json(args.pos[i]));
    for (size_t i = 0; i < params->size(); ++i) {
      const MacroParam& p = (*params)[i];
      if (i < args.pos.size()) {
        local->vars[p.name] = args.pos[i];
        continue;
      }
      const Value* kw = nullptr;
      for (const auto& [k, v] : args.kw)
        if (k == p.name) kw = &v;
      if (kw)
        local->vars[p.name] = *kw;
      else if (p.def)
        local->vars[p.name] = in.eval(*p.def, local);
      else
        local->vars[p.name] = Value::undefined(fmt::format("parameter '{}' was not provided", p.name));
    }
    for (const auto& [k, v] : args.kw) {
      bool known = k == "caller";
      for (const MacroParam& p : *params) known = known || p.name == k;
      if (k == "caller")
        local->vars["caller"] = v;
      else if (!known)
        kwargs[k] = to_json(v);
    }
    local->vars["varargs"] = Value(std::move(varargs));
    local->vars["kwargs"] = Value(std::move(kwargs));
    std::string out;
    in.exec(*body, local, out);
    --in.depth;
    return Value(json(std::move(out)));
  });
}

Interp::Flow Interp::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  std::vector<Value> items = iterate(eval(*s.expr, scope));
  auto bind = [&](Scope& sc, const Value& item) {
    if (s.targets.size() == 1) {
      sc.vars[s.targets[0]] = item;
      return;
    }
    std::vector<Value> parts = iterate(item);
    if (parts.size() != s.targets.size())
      throw RenderException(
          fmt::format("cannot unpack {} values into {} loop variables", parts.size(), s.targets.size()));
    for (size_t i = 0; i < parts.size(); ++i) sc.vars[s.targets[i]] = parts[i];
  };
  if (s.cond) {
    std::vector<Value> kept;
    for (const Value& it : items) {
      auto sc = std::make_shared<Scope>();
      sc->parent = scope;
      bind(*sc, it);
      if (eval(*s.cond, sc).truthy()) kept.push_back(it);
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    auto sc = std::make_shared<Scope>();
    sc->parent = scope;
    bind(*sc, items[static_cast<size_t>(i)]);
    auto loop = std::make_shared<Object>();
    loop->type = "loop";
    loop->attrs["index"] = Value(json(i + 1));
    loop->attrs["index0"] = Value(json(i));
    loop->attrs["revindex"] = Value(json(n - i));
    loop->attrs["revindex0"] = Value(json(n - i - 1));
    loop->attrs["first"] = Value(json(i == 0));
    loop->attrs["last"] = Value(json(i == n - 1));
    loop->attrs["length"] = Value(json(n));
    loop->attrs["depth"] = Value(json(1));
    loop->attrs["depth0"] = Value(json(0));
    loop->attrs["previtem"] = i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item");
    loop->attrs["nextitem"] = i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item");
    loop->attrs["cycle"] = Value::callable("cycle", [i](Interp&, const Args& a) -> Value {
      if (a.pos.empty()) throw RenderException("no items for cycling given");
      return a.pos[static_cast<size_t>(i) % a.pos.size()];
    });
    sc->vars["loop"] = Value::object(loop);
    if (exec(s.body, sc, out) == Flow::brk) break;
  }
  if (n == 0 && !s.else_body.empty()) {
    auto sc = std::make_shared<Scope>();
    sc->parent = scope;
    return exec(s.else_body, sc, out);
  }
  return Flow::normal;
}

Interp::Flow Interp::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  for (const StmtPtr& sp : body) {
    const Stmt& s = *sp;
    switch (s.k) {
      case Stmt::K::data: out += s.text; break;
      case Stmt::K::output: out += py_str(eval(*s.expr, scope)); break;
      case Stmt::K::if_:
        for (const auto& [cond, b] : s.branches) {
          if (!cond || eval(*cond, scope).truthy()) {
            Flow f = exec(b, scope, out);
            if (f != Flow::normal) return f;
            break;
          }
        }
        break;
      case Stmt::K::for_: exec_for(s, scope, out); break;
      case Stmt::K::set: {
        Value v = eval(*s.expr, scope);
        if (!s.attr.empty()) {
          const Value* ns = scope->find(s.targets[0]);
          if (!ns || !ns->is_object() || ns->obj().type != "namespace")
            throw RenderException("cannot assign attribute on non-namespace object");
          ns->obj().attrs[s.attr] = v;
        } else if (s.targets.size() == 1) {
          scope->vars[s.targets[0]] = v;
        } else {
          std::vector<Value> parts = iterate(v);
          if (parts.size() != s.targets.size())
            throw RenderException(fmt::format("cannot unpack {} values into {} names", parts.size(), s.targets.size()));
          for (size_t i = 0; i < parts.size(); ++i) scope->vars[s.targets[i]] = parts[i];
        }
        break;
      }
      case Stmt::K::set_block: {
        std::string text;
        exec(s.body, scope, text);
        Value v(json(std::move(text)));
        if (s.expr) {
          std::optional<Value> saved = filter_input_;
          filter_input_ = v;
          v = eval(*s.expr, scope);
          filter_input_ = saved;
        }
        scope->vars[s.targets[0]] = v;
        break;
      }
      case Stmt::K::macro: scope->vars[s.attr] = make_macro(s, scope, &s.body, &s.params, s.attr); break;
      case Stmt::K::call_block: {
        const Expr& c = *s.expr;
        Value f = eval(*c.kids[0], scope);
        Args a = eval_args(c, 1, scope);
        a.kw.emplace_back("caller", make_macro(s, scope, &s.body, &s.params, "caller"));
        out += py_str(call(f, a));
        break;
      }
      case Stmt::K::filter_block: {
        std::string text;
        exec(s.body, scope, text);
        std::optional<Value> saved = filter_input_;
        filter_input_ = Value(json(std::move(text)));
        out += py_str(eval(*s.expr, scope));
        filter_input_ = saved;
        break;
      }
      case Stmt::K::break_: return Flow::brk;
      case Stmt::K::continue_: return Flow::cont;
    }
  }
  return Flow::normal;
}

Result<Template> Template::parse(std::string_view source) {
  Result<Body> body = parse_template(source);
  if (!body.ok()) return body.error();
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(*body));
  t.source_ = std::make_shared<const std::string>(source);
  return t;
}

RenderResult Template::render(const json& context, const RenderOptions& opts) const {
  RenderResult r;
  auto globals = std::make_shared<Scope>();
  add_globals(*globals, opts);
  auto top = std::make_shared<Scope>();
  top->parent = globals;
  if (context.is_object())
    for (auto it = context.begin(); it != context.end(); ++it) top->vars[it.key()] = Value(it.value());
  Interp in;
  in.opts = &opts;
  try {
    in.exec(*body_, top, r.text);
  } catch (const RenderException& e) {
    r.text.clear();
    r.error = RenderError{e.what(), e.raised};
  }
  return r;
}

bool Template::mentions(std::string_view name) const {
  Result<std::vector<Token>> toks = lex(*source_);
  if (!toks.ok()) return false;
  for (const Token& t : *toks)
    if (t.t == Token::T::name && t.s == name) return true;
  return false;
}

}  // namespace edgelm::jinja
