// The syntax tree of a GBNF text (gbnf_parser.cpp builds it, compile.cpp lowers it to a Program).
// Every node knows where it started in the text, for error messages.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace edgelm::grammar::detail {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr uint32_t kRepeatInf = UINT32_MAX;
inline constexpr uint32_t kMaxRepeat = 10000;  // largest accepted bound of {m,n}

struct Expr {
  enum class Kind : uint8_t { kSeq, kAlt, kChars, kRef, kRepeat };
  Kind kind = Kind::kSeq;
  int line = 0, col = 0;
  std::vector<Expr> children;                         // kSeq / kAlt items; kRepeat: one child
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // kChars: sorted, disjoint, non-empty
  std::string name;                                   // kRef
  uint32_t min = 0, max = 0;                          // kRepeat (max may be kRepeatInf)
};

struct RuleDef {
  std::string name;
  int line = 0, col = 0;
  Expr body;  // kAlt
};

Result<std::vector<RuleDef>> parse_gbnf_ast(std::string_view text);

}  // namespace edgelm::grammar::detail
