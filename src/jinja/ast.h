// The syntax tree of a parsed Jinja template (parser.h builds it, eval.cpp runs it).
//
// Invariants: a tree is immutable once parsed and shared by every render; every node carries the
// 1-based line:column of its first token for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace edgelm::jinja {

struct Pos {
  int line = 1, col = 1;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class K {
    literal,  // lit
    name,     // name
    list,     // kids: items
    dict,     // kids: key, value, key, value, ...
    getattr,  // kids[0].name
    getitem,  // kids[0][kids[1]]
    slice,    // kids[0][kids[1]:kids[2]:kids[3]] (null parts allowed)
    call,     // kids[0](kids[1..], kwargs)
    filter,   // kids[0] | name(kids[1..], kwargs); kids[0] null in a filter block
    test,     // kids[0] is [not] name(kids[1..]); negated
    not_,     // not kids[0]
    neg,      // -kids[0]
    pos,      // +kids[0]
    binop,    // kids[0] name kids[1]: + - * / // % ** ~ == != < > <= >= in notin and or
    cond,     // kids[0] if kids[1] else kids[2] (kids[2] may be null)
  };
  K k;
  Pos pos;
  json lit;
  std::string name;
  bool negated = false;
  std::vector<ExprPtr> kids;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroParam {
  std::string name;
  ExprPtr def;  // may be null
};

struct Stmt {
  enum class K {
    data,          // text
    output,        // {{ expr }}
    if_,           // branches (cond null for else)
    for_,          // targets in expr [if cond] body [else else_body]
    set,           // targets (or ns.attr: targets[0], attr) = expr
    set_block,     // targets[0] = rendered body (| filter expr with null operand)
    macro,         // name(params) body
    call_block,    // expr (a call) with caller(params) = body
    filter_block,  // expr (filter chain, innermost operand null) over body
    break_,
    continue_,
  };
  K k;
  Pos pos;
  std::string text;
  ExprPtr expr, cond;
  std::vector<std::string> targets;
  std::string attr;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body, else_body;
  std::vector<MacroParam> params;
};

}  // namespace edgelm::jinja
