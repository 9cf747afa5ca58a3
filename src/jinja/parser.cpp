// Jinja parser (see parser.h).
#include "jinja/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>

#include "jinja/lexer.h"

namespace edgelm::jinja {
namespace {

struct ParseError {
  Pos pos;
  std::string what;
};

using T = Token::T;

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}

  Body parse_all() {
    Body b = parse_body({});
    if (cur().t != T::eof) fail("unexpected '" + cur().s + "'");
    return b;
  }

 private:
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  [[noreturn]] void fail(const std::string& what) const { throw ParseError{cur().pos, what}; }
  std::string describe(const Token& t) const {
    switch (t.t) {
      case T::eof: return "end of template";
      case T::block_end: return "end of statement block";
      case T::var_end: return "end of print statement";
      case T::data: return "template data";
      case T::string: return "string";
      default: return "'" + t.s + "'";
    }
  }
  bool is_op(const char* s) const { return cur().t == T::op && cur().s == s; }
  bool is_name(const char* s) const { return cur().t == T::name && cur().s == s; }
  bool accept_op(const char* s) {
    if (!is_op(s)) return false;
    ++i_;
    return true;
  }
  bool accept_name(const char* s) {
    if (!is_name(s)) return false;
    ++i_;
    return true;
  }
  void expect_op(const char* s) {
    if (!accept_op(s)) fail(fmt::format("expected '{}', got {}", s, describe(cur())));
  }
  std::string expect_name() {
    if (cur().t != T::name) fail("expected a name, got " + describe(cur()));
    return toks_[i_++].s;
  }
  void expect_block_end() {
    if (cur().t != T::block_end) fail("expected end of statement block, got " + describe(cur()));
    ++i_;
  }

  ExprPtr node(Expr::K k, Pos p) {
    auto e = std::make_unique<Expr>();
    e->k = k;
    e->pos = p;
    return e;
  }

  // Statements until a block tag named in `ends` (left unconsumed: the caller reads the name).
  Body parse_body(std::initializer_list<const char*> ends) {
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.t == T::eof) {
        if (ends.size() == 0) return body;
        std::string names;
        for (const char* e : ends) names += (names.empty() ? "'" : " or '") + std::string(e) + "'";
        fail("unexpected end of template, expected " + names);
      }
      if (t.t == T::data) {
        auto s = std::make_unique<Stmt>();
        s->k = Stmt::K::data;
        s->pos = t.pos;
        s->text = t.s;
        body.push_back(std::move(s));
        ++i_;
      } else if (t.t == T::var_begin) {
        auto s = std::make_unique<Stmt>();
        s->k = Stmt::K::output;
        s->pos = t.pos;
        ++i_;
        s->expr = parse_tuple();
        if (cur().t != T::var_end) fail("expected end of print statement, got " + describe(cur()));
        ++i_;
        body.push_back(std::move(s));
      } else if (t.t == T::block_begin) {
        const Token& n = peek();
        if (n.t == T::name && std::any_of(ends.begin(), ends.end(), [&](const char* e) { return n.s == e; })) {
          ++i_;
          return body;
        }
        ++i_;
        if (StmtPtr s = parse_statement()) body.push_back(std::move(s));
      } else {
        fail("unexpected " + describe(t));
      }
    }
  }

  // After the body's end tag name: consumes the name and the block end.
  std::string end_tag() {
    std::string n = expect_name();
    expect_block_end();
    return n;
  }

  StmtPtr parse_statement() {
    const Pos p = cur().pos;
    if (cur().t != T::name) fail("tag name expected");
    const std::string tag = toks_[i_++].s;
    auto s = std::make_unique<Stmt>();
    s->pos = p;
    if (tag == "if") {
      s->k = Stmt::K::if_;
      ExprPtr c = parse_expression();
      expect_block_end();
      while (true) {
        Body b = parse_body({"elif", "else", "endif"});
        const std::string n = expect_name();
        s->branches.emplace_back(std::move(c), std::move(b));
        if (n == "elif") {
          c = parse_expression();
          expect_block_end();
        } else if (n == "else") {
          expect_block_end();
          s->branches.emplace_back(nullptr, parse_body({"endif"}));
          end_tag();
          break;
        } else {
          expect_block_end();
          break;
        }
      }
    } else if (tag == "for") {
      s->k = Stmt::K::for_;
      do {
        s->targets.push_back(expect_name());
      } while (accept_op(","));
      if (!accept_name("in")) fail("expected 'in', got " + describe(cur()));
      s->expr = parse_tuple(/*condexpr=*/false);
      if (accept_name("if")) s->cond = parse_expression();
      if (accept_name("recursive")) fail("recursive loops are not supported");
      expect_block_end();
      s->body = parse_body({"endfor", "else"});
      if (expect_name() == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"});
        end_tag();
      } else {
        expect_block_end();
      }
    } else if (tag == "set") {
      std::string first = expect_name();
      if (accept_op(".")) {
        s->k = Stmt::K::set;
        s->targets.push_back(first);
        s->attr = expect_name();
        expect_op("=");
        s->expr = parse_tuple();
        expect_block_end();
        return s;
      }
      s->targets.push_back(first);
      while (accept_op(",")) s->targets.push_back(expect_name());
      if (accept_op("=")) {
        s->k = Stmt::K::set;
        s->expr = parse_tuple();
        expect_block_end();
        return s;
      }
      if (s->targets.size() != 1) fail("expected '='");
      s->k = Stmt::K::set_block;
      if (is_op("|")) s->expr = parse_filters(nullptr);
      expect_block_end();
      s->body = parse_body({"endset"});
      end_tag();
    } else if (tag == "macro") {
      s->k = Stmt::K::macro;
      s->attr = expect_name();
      parse_params(s->params);
      expect_block_end();
      s->body = parse_body({"endmacro"});
      end_tag();
    } else if (tag == "call") {
      s->k = Stmt::K::call_block;
      if (is_op("(")) parse_params(s->params);
      s->expr = parse_expression();
      if (s->expr->k != Expr::K::call) fail("expected a macro call");
      expect_block_end();
      s->body = parse_body({"endcall"});
      end_tag();
    } else if (tag == "filter") {
      s->k = Stmt::K::filter_block;
      --i_;  // parse_filters expects to sit on a filter name after '|'
      toks_[i_] = Token{T::op, "|", p};
      s->expr = parse_filters(nullptr);
      expect_block_end();
      s->body = parse_body({"endfilter"});
      end_tag();
    } else if (tag == "break" || tag == "continue") {
      s->k = tag == "break" ? Stmt::K::break_ : Stmt::K::continue_;
      expect_block_end();
    } else if (tag == "generation") {
      // Hugging Face's AssistantTracker tag: renders its body unchanged.
      expect_block_end();
      s->k = Stmt::K::if_;
      auto t = node(Expr::K::literal, p);
      t->lit = true;
      s->branches.emplace_back(std::move(t), parse_body({"endgeneration"}));
      end_tag();
    } else {
      i_--;
      fail("encountered unknown tag '" + tag + "'");
    }
    return s;
  }

  void parse_params(std::vector<MacroParam>& params) {
    expect_op("(");
    while (!accept_op(")")) {
      if (!params.empty()) expect_op(",");
      if (accept_op(")")) break;
      MacroParam mp;
      mp.name = expect_name();
      if (accept_op("=")) mp.def = parse_expression();
      params.push_back(std::move(mp));
    }
  }

  // A comma-separated tuple (as a list) or a single expression.
  ExprPtr parse_tuple(bool condexpr = true) {
    const Pos p = cur().pos;
    ExprPtr first = condexpr ? parse_expression() : parse_or();
    if (!is_op(",")) return first;
    auto l = node(Expr::K::list, p);
    l->kids.push_back(std::move(first));
    while (accept_op(",")) {
      if (cur().t == T::var_end || cur().t == T::block_end || is_name("if")) break;
      l->kids.push_back(condexpr ? parse_expression() : parse_or());
    }
    return l;
  }

  ExprPtr parse_expression() {
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const Pos p = cur().pos;
      ++i_;
      auto c = node(Expr::K::cond, p);
      c->kids.push_back(std::move(e));
      c->kids.push_back(parse_or());
      c->kids.push_back(accept_name("else") ? parse_expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binop(std::string op, ExprPtr a, ExprPtr b, Pos p) {
    auto e = node(Expr::K::binop, p);
    e->name = std::move(op);
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr e = parse_and();
    while (is_name("or")) {
      const Pos p = cur().pos;
      ++i_;
      e = binop("or", std::move(e), parse_and(), p);
    }
    return e;
  }
  ExprPtr parse_and() {
    ExprPtr e = parse_not();
    while (is_name("and")) {
      const Pos p = cur().pos;
      ++i_;
      e = binop("and", std::move(e), parse_not(), p);
    }
    return e;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      auto e = node(Expr::K::not_, cur().pos);
      ++i_;
      e->kids.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr e = parse_math1();
    while (true) {
      const Pos p = cur().pos;
      std::string op;
      if (cur().t == T::op && (cur().s == "==" || cur().s == "!=" || cur().s == "<" || cur().s == ">" ||
                               cur().s == "<=" || cur().s == ">=")) {
        op = cur().s;
        ++i_;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is_name("not") && peek().t == T::name && peek().s == "in") {
        op = "notin";
        i_ += 2;
      } else {
        return e;
      }
      e = binop(op, std::move(e), parse_math1(), p);
    }
  }
  ExprPtr parse_math1() {
    ExprPtr e = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Pos p = cur().pos;
      std::string op = toks_[i_++].s;
      e = binop(op, std::move(e), parse_concat(), p);
    }
    return e;
  }
  ExprPtr parse_concat() {
    ExprPtr e = parse_math2();
    while (is_op("~")) {
      const Pos p = cur().pos;
      ++i_;
      e = binop("~", std::move(e), parse_math2(), p);
    }
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Pos p = cur().pos;
      std::string op = toks_[i_++].s;
      e = binop(op, std::move(e), parse_pow(), p);
    }
    return e;
  }
  ExprPtr parse_pow() {
    ExprPtr e = parse_unary(true);
    while (is_op("**")) {
      const Pos p = cur().pos;
      ++i_;
      e = binop("**", std::move(e), parse_unary(true), p);
    }
    return e;
  }
  ExprPtr parse_unary(bool with_filter) {
    const Pos p = cur().pos;
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = node(is_op("-") ? Expr::K::neg : Expr::K::pos, p);
      ++i_;
      e->kids.push_back(parse_unary(false));
    } else {
      e = parse_postfix(parse_primary());
    }
    return with_filter ? parse_filters(std::move(e)) : std::move(e);
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    const Pos p = t.pos;
    if (t.t == T::name) {
      ++i_;
      auto e = node(Expr::K::literal, p);
      if (t.s == "true" || t.s == "True")
        e->lit = true;
      else if (t.s == "false" || t.s == "False")
        e->lit = false;
      else if (t.s == "none" || t.s == "None")
        e->lit = nullptr;
      else {
        e->k = Expr::K::name;
        e->name = t.s;
      }
      return e;
    }
    if (t.t == T::string) {
      auto e = node(Expr::K::literal, p);
      std::string s;
      while (cur().t == T::string) s += toks_[i_++].s;  // adjacent strings concatenate
      e->lit = s;
      return e;
    }
    if (t.t == T::integer || t.t == T::floating) {
      ++i_;
      auto e = node(Expr::K::literal, p);
      if (t.t == T::floating) {
        e->lit = std::stod(t.s);
      } else {
        try {
          e->lit = std::stoll(t.s);
        } catch (const std::out_of_range&) {
          fail("integer literal out of range");
        }
      }
      return e;
    }
    if (accept_op("(")) {
      if (accept_op(")")) return node(Expr::K::list, p);  // empty tuple
      ExprPtr e = parse_expression();
      if (is_op(",")) {
        auto l = node(Expr::K::list, p);
        l->kids.push_back(std::move(e));
        while (accept_op(",")) {
          if (is_op(")")) break;
          l->kids.push_back(parse_expression());
        }
        e = std::move(l);
      }
      expect_op(")");
      return e;
    }
    if (accept_op("[")) {
      auto l = node(Expr::K::list, p);
      while (!accept_op("]")) {
        if (!l->kids.empty()) expect_op(",");
        if (accept_op("]")) break;
        l->kids.push_back(parse_expression());
      }
      return l;
    }
    if (accept_op("{")) {
      auto d = node(Expr::K::dict, p);
      while (!accept_op("}")) {
        if (!d->kids.empty()) expect_op(",");
        if (accept_op("}")) break;
        d->kids.push_back(parse_expression());
        expect_op(":");
        d->kids.push_back(parse_expression());
      }
      return d;
    }
    fail("unexpected " + describe(t));
  }

  // After '(': positional arguments, then keyword arguments, into call.kids / call.kwargs.
  void parse_call_args(Expr& call) {
    bool first = true;
    while (!accept_op(")")) {
      if (!first) {
        expect_op(",");
        if (accept_op(")")) break;
      }
      first = false;
      if (cur().t == T::name && peek().t == T::op && peek().s == "=") {
        std::string k = toks_[i_].s;
        i_ += 2;
        call.kwargs.emplace_back(std::move(k), parse_expression());
      } else {
        if (!call.kwargs.empty()) fail("positional argument after keyword argument");
        call.kids.push_back(parse_expression());
      }
    }
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      const Pos p = cur().pos;
      if (accept_op(".")) {
        auto g = node(Expr::K::getattr, p);
        if (cur().t == T::integer) {
          g->k = Expr::K::getitem;
          auto idx = node(Expr::K::literal, cur().pos);
          idx->lit = std::stoll(toks_[i_++].s);
          g->kids.push_back(std::move(e));
          g->kids.push_back(std::move(idx));
        } else {
          g->name = expect_name();
          g->kids.push_back(std::move(e));
        }
        e = std::move(g);
      } else if (accept_op("[")) {
        ExprPtr parts[3];
        bool is_slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!is_op(":") && !is_op("]")) parts[k] = parse_expression();
          if (k < 2 && accept_op(":")) {
            is_slice = true;
            continue;
          }
          break;
        }
        expect_op("]");
        auto g = node(is_slice ? Expr::K::slice : Expr::K::getitem, p);
        g->kids.push_back(std::move(e));
        if (!is_slice && !parts[0]) fail("expected a subscript");
        for (int k = 0; k < (is_slice ? 3 : 1); ++k) g->kids.push_back(std::move(parts[k]));
        e = std::move(g);
      } else if (accept_op("(")) {
        auto c = node(Expr::K::call, p);
        c->kids.push_back(std::move(e));
        parse_call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_filters(ExprPtr e) {
    while (true) {
      const Pos p = cur().pos;
      if (accept_op("|")) {
        auto f = node(Expr::K::filter, p);
        f->name = expect_name();
        while (accept_op(".")) f->name += "." + expect_name();
        f->kids.push_back(std::move(e));
        if (accept_op("(")) parse_call_args(*f);
        e = std::move(f);
      } else if (is_name("is")) {
        ++i_;
        auto t = node(Expr::K::test, p);
        t->negated = accept_name("not");
        t->name = expect_name();
        t->kids.push_back(std::move(e));
        if (accept_op("(")) {
          parse_call_args(*t);
        } else if ((cur().t == T::name || cur().t == T::string || cur().t == T::integer || cur().t == T::floating ||
                    is_op("[") || is_op("{") || is_op("(")) &&
                   !(is_name("else") || is_name("or") || is_name("and") || is_name("if"))) {
          t->kids.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  std::vector<Token> toks_;
  size_t i_ = 0;
};

}  // namespace

Result<Body> parse_template(std::string_view source) {
  Result<std::vector<Token>> toks = lex(source);
  if (!toks.ok()) return toks.error();
  try {
    return Parser(std::move(*toks)).parse_all();
  } catch (const ParseError& e) {
    return make_error("line {}:{}: {}", e.pos.line, e.pos.col, e.what);
  }
}

}  // namespace edgelm::jinja
