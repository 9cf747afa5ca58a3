// Jinja parser: tokens (lexer.h) -> syntax tree (ast.h), jinja2's grammar and precedence:
//   cond: or ["if" or ["else" cond]];  or: and {"or" and};  and: not {"and" not};
//   not: "not" not | compare;  compare: math1 {("=="|"!="|"<"|">"|"<="|">="|"in"|"not" "in") math1};
//   math1: concat {("+"|"-") concat};  concat: math2 {"~" math2};  math2: pow {("*"|"/"|"//"|"%") pow};
//   pow: unary {"**" unary};  unary: ("-"|"+") unary | primary postfix* {("|" filter) | ("is" test)}.
// Statements: if/elif/else, for (targets, loop filter, else), set (also ns.attr, tuples, block
// set), macro, call, filter, break, continue, generation (a no-op block), raw (in the lexer).
//
// Invariants: errors name line:column and the problem ("line 3:14: expected 'endfor'").
#pragma once

#include <string_view>

#include "core/result.h"
#include "jinja/ast.h"

namespace edgelm::jinja {

Result<Body> parse_template(std::string_view source);

}  // namespace edgelm::jinja
