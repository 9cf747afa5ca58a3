// libFuzzer: random GBNF text (up to the first NUL byte) through parse_gbnf; when it compiles,
// the remaining bytes drive a Matcher byte by byte, checking fill_mask against allows()
// (except where the stack-set bound refuses a token: see Matcher::fill_mask).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/check.h"
#include "grammar/grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t cut = all.find('\0');
  const std::string_view text = all.substr(0, cut);
  const std::string_view input = cut == std::string_view::npos ? std::string_view() : all.substr(cut + 1);
  auto g = edgelm::grammar::parse_gbnf(text);
  if (!g.ok()) return 0;
  static const auto tokens = std::make_shared<edgelm::grammar::TokenIndex>(std::vector<std::string>{
      "", "a", "b", "ab", "\"", "{", "}", " ", "\xC3", "\xA9", "\xC3\xA9", "0", "12", "\xE4\xB8\xAD", "\xFF"});
  edgelm::grammar::Matcher m(*g, tokens);
  std::vector<uint8_t> mask(static_cast<size_t>(tokens->n_tokens()));
  for (size_t i = 0; i < input.size() && i < 64; ++i) {
    m.fill_mask(mask);
    for (int32_t id = 0; id < tokens->n_tokens(); ++id) {
      if (mask[static_cast<size_t>(id)] == (m.allows(id) ? 1 : 0)) continue;
      // The one documented difference: a token the cache accepts may still be refused because
      // the whole stack set would pass its bound.
      edgelm::grammar::Matcher c = m;
      EDGELM_CHECK(mask[static_cast<size_t>(id)] == 1 && !c.accept_token(id) && c.overflowed(),
                   "fill_mask != allows at token ", id);
    }
    (void)m.can_end();
    (void)m.must_end();
    const uint64_t need = m.min_bytes_to_end();
    EDGELM_CHECK((need == 0) == m.can_end(), "min_bytes_to_end ", need, " disagrees with can_end");
    if (!m.accept_bytes(input.substr(i, 1))) break;
  }
  return 0;
}
