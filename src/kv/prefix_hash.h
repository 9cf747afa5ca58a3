// Prefix hashing: the chain of 64-bit hashes that names every full KV block by its whole prefix.
//
// Job: block i of a sequence is named hash_i = prefix_block_hash(hash_{i-1}, tokens of block i),
// with hash_{-1} = prefix_root(salt). Two sequences can share block i only when their hashes
// agree, i.e. (up to a 64-bit collision, which BlockPool::find_cached guards against by also
// comparing the parent hash and the tokens) when their whole prefixes and salts agree.
//
// Invariants:
//  - Deterministic across runs, platforms and builds (no std::hash, no pointer values), so a
//    hash can be logged, compared in tests or persisted.
//  - For a fixed token block, prefix_block_hash is a bijection of the parent hash: two different
//    parents (e.g. two tenants' roots) never give the same child hash for the same tokens, so
//    chains that start from different roots stay apart for their whole length.
//  - prefix_root("") is the shared default chain; any other salt starts a different chain
//    (distinct for distinct salts up to a 64-bit collision of the root itself).
// Cost: O(len) per call, a few multiplies per token; no allocation.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace edgelm::kv {

// The chain's starting value for a tenant salt ("" = the shared default chain).
uint64_t prefix_root(std::string_view salt);

// Hash of one full block of `tokens` whose predecessor's hash is `parent` (prefix_root for
// block 0). Any number of tokens is accepted; the length is part of the hash.
uint64_t prefix_block_hash(uint64_t parent, std::span<const int32_t> tokens);

// Supplied content inside a sequence that its tokens do not name (an image whose soft tokens
// are all one placeholder id): positions [pos0, pos0 + n_tokens) and a hash of the content
// (the image bytes' SHA-256, truncated). vLLM's rule: a block's hash also covers the content
// of every span that overlaps it, so equal tokens with different images never share a block.
struct PrefixMedia {
  int32_t pos0 = 0;
  int32_t n_tokens = 0;
  uint64_t hash = 0;
};

// prefix_block_hash of block `index` (of block_size positions) with the hash, start and length
// of each of `media` that overlaps the block absorbed after the tokens; equal to
// prefix_block_hash when none does. Still a bijection of the parent.
uint64_t prefix_block_hash(uint64_t parent, std::span<const int32_t> tokens, std::span<const PrefixMedia> media,
                           int64_t index, int32_t block_size);

}  // namespace edgelm::kv
