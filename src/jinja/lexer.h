// Jinja lexer: template source -> tokens, configured as Hugging Face configures jinja2
// (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, default delimiters).
//
// Whitespace control is applied here: "{%-"/"{{-"/"{#-" strip the whitespace before a tag,
// "-%}"/"-}}"/"-#}" the whitespace after it, "+" disables lstrip/trim for that side; trim_blocks
// drops the first newline after a block or comment tag, lstrip_blocks the spaces and tabs
// between a line start and a block or comment tag. Comments vanish; {% raw %} becomes data.
// Newlines are normalized to "\n" and one trailing newline is dropped, as jinja2 does.
//
// Invariants: tokens are data | var_begin ... var_end | block_begin ... block_end, then eof;
// end delimiters are recognized only outside brackets; errors carry line:column.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "jinja/ast.h"

namespace edgelm::jinja {

struct Token {
  enum class T { data, var_begin, var_end, block_begin, block_end, name, string, integer, floating, op, eof };
  T t;
  std::string s;  // data text, name, decoded string, number text, operator
  Pos pos;
};

Result<std::vector<Token>> lex(std::string_view source);

}  // namespace edgelm::jinja
