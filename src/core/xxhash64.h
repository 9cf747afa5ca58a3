// XXH64: Yann Collet's 64-bit xxHash (the published algorithm, written here from its
// specification), for checksums of data written to disk (kv/disk_tier.h) and content hashes of
// large files. Not cryptographic: it detects torn writes and flipped bits, not tampering.
//
// Invariants: deterministic across hosts (input bytes are read little-endian); streaming
// (Xxh64::update in any pieces) gives the same value as one xxh64() call over the whole input.
// Cost: about memory bandwidth (4 independent 64-bit lanes of 8 bytes per round).
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgelm {

uint64_t xxh64(const void* data, size_t n, uint64_t seed = 0);

class Xxh64 {
 public:
  explicit Xxh64(uint64_t seed = 0);
  void update(const void* data, size_t n);
  uint64_t digest() const;

 private:
  uint64_t v_[4];
  uint64_t seed_;
  uint64_t total_ = 0;
  unsigned char buf_[32];
  size_t n_buf_ = 0;
};

}  // namespace edgelm
