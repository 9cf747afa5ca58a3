#include "kv/prefix_hash.h"

namespace edgelm::kv {
namespace {

// Odd multipliers with well spread bits, and seeds taken from the digits of pi and the golden
// ratio (nothing up the sleeve). kStep keeps a zero state from staying zero.
constexpr uint64_t kStep = 0x9e3779b97f4a7c15ull;  // 2^64 / golden ratio
constexpr uint64_t kMulA = 0xd6e8feb86659fd93ull;
constexpr uint64_t kMulB = 0xa0761d6478bd642full;
constexpr uint64_t kRootSeed = 0x243f6a8885a308d3ull;   // pi
constexpr uint64_t kBlockSeed = 0x13198a2e03707344ull;  // pi, continued

// A bijective 64-bit finalizer (xor-shift / odd multiply rounds): every input bit affects every
// output bit with probability close to 1/2.
constexpr uint64_t mix(uint64_t x) {
  x ^= x >> 32;
  x *= kMulA;
  x ^= x >> 29;
  x *= kMulB;
  x ^= x >> 32;
  return x;
}

// One absorb step. For a fixed word, x -> mix((x + kStep) ^ word) is a bijection, which is what
// makes the whole chain a bijection of its starting value.
constexpr uint64_t absorb(uint64_t state, uint64_t word) { return mix((state + kStep) ^ word); }

}  // namespace

uint64_t prefix_root(std::string_view salt) {
  // Bytes are packed little-endian by hand (not memcpy) so the value is the same on every host.
  uint64_t state = mix(kRootSeed);
  uint64_t word = 0;
  for (size_t i = 0; i < salt.size(); ++i) {
    word |= static_cast<uint64_t>(static_cast<unsigned char>(salt[i])) << (8 * (i % 8));
    if (i % 8 == 7) {
      state = absorb(state, word);
      word = 0;
    }
  }
  if (salt.size() % 8 != 0) state = absorb(state, word);
  // The length tells "ab" from "ab\0" (same packed words).
  return absorb(state, static_cast<uint64_t>(salt.size()));
}

uint64_t prefix_block_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t state = absorb(parent, kBlockSeed);
  for (int32_t t : tokens) state = absorb(state, static_cast<uint32_t>(t));
  return absorb(state, static_cast<uint64_t>(tokens.size()));
}

uint64_t prefix_block_hash(uint64_t parent, std::span<const int32_t> tokens, std::span<const PrefixMedia> media,
                           int64_t index, int32_t block_size) {
  uint64_t state = prefix_block_hash(parent, tokens);
  const int64_t lo = index * block_size, hi = lo + block_size;
  for (const PrefixMedia& m : media) {
    if (m.pos0 >= hi || int64_t{m.pos0} + m.n_tokens <= lo) continue;
    state = absorb(state, m.hash);
    state = absorb(state, (static_cast<uint64_t>(static_cast<uint32_t>(m.pos0)) << 32) | static_cast<uint32_t>(m.n_tokens));
  }
  return state;
}

}  // namespace edgelm::kv
