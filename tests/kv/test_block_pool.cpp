// BlockPool: state transitions (free / cached / used), LRU eviction order, verified prefix
// lookups, duplicate publishing, exhaustion; and the prefix hash chain it is keyed by.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "kv/block_pool.h"
#include "kv/prefix_hash.h"

namespace edgelm::kv {
namespace {

std::vector<int32_t> toks(int32_t first, int32_t n = 4) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

TEST(PrefixHash, DeterministicAndSensitiveToEveryInput) {
  const auto a = toks(1), b = toks(2);
  const uint64_t root = prefix_root("");
  EXPECT_EQ(prefix_block_hash(root, a), prefix_block_hash(root, a));
  EXPECT_NE(prefix_block_hash(root, a), prefix_block_hash(root, b));
  EXPECT_NE(prefix_block_hash(root, a), prefix_block_hash(root + 1, a));
  // Order and length matter.
  const std::vector<int32_t> swapped = {2, 1, 3, 4}, shorter = {1, 2, 3};
  EXPECT_NE(prefix_block_hash(root, a), prefix_block_hash(root, swapped));
  EXPECT_NE(prefix_block_hash(root, a), prefix_block_hash(root, shorter));
  // Negative ids are folded as their 32-bit pattern, distinct from small positives.
  const std::vector<int32_t> neg = {-1, 2, 3, 4};
  EXPECT_NE(prefix_block_hash(root, a), prefix_block_hash(root, neg));
}

TEST(PrefixHash, MediaOverlappingTheBlockChangeItsHash) {
  const auto a = toks(1);  // block 2 of size 4: positions [8, 12)
  const uint64_t root = prefix_root("");
  const uint64_t plain = prefix_block_hash(root, a);
  const std::vector<PrefixMedia> none = {{0, 8, 7}, {12, 4, 7}};  // [0, 8) and [12, 16): outside
  EXPECT_EQ(prefix_block_hash(root, a, none, 2, 4), plain);
  const std::vector<PrefixMedia> x = {{10, 20, 0x1111}}, y = {{10, 20, 0x2222}}, later = {{11, 20, 0x1111}};
  EXPECT_NE(prefix_block_hash(root, a, x, 2, 4), plain);
  EXPECT_NE(prefix_block_hash(root, a, x, 2, 4), prefix_block_hash(root, a, y, 2, 4));      // another image
  EXPECT_NE(prefix_block_hash(root, a, x, 2, 4), prefix_block_hash(root, a, later, 2, 4));  // another place
  EXPECT_EQ(prefix_block_hash(root, a, x, 3, 4), prefix_block_hash(root, a, x, 3, 4));
  EXPECT_NE(prefix_block_hash(root, a, x, 3, 4), plain);  // a block inside the image
}

TEST(PrefixHash, SaltsStartDifferentChains) {
  std::set<uint64_t> roots;
  for (const char* salt : {"", "a", "b", "ab", "ba", "tenant-1", "tenant-2", "12345678", "123456789"})
    roots.insert(prefix_root(salt));
  EXPECT_EQ(roots.size(), 9u);
  EXPECT_NE(prefix_root(std::string_view("ab\0", 3)), prefix_root("ab"));
  // Different roots never meet again along the same tokens (the chain is a bijection of its start).
  uint64_t x = prefix_root(""), y = prefix_root("t");
  for (int i = 0; i < 100; ++i) {
    const auto t = toks(i * 7);
    x = prefix_block_hash(x, t);
    y = prefix_block_hash(y, t);
    ASSERT_NE(x, y);
  }
}

TEST(PrefixHash, NoCollisionsAmongManyBlocks) {
  std::set<uint64_t> seen;
  for (int32_t a = 0; a < 64; ++a)
    for (int32_t b = 0; b < 64; ++b) seen.insert(prefix_block_hash(prefix_root(""), std::vector<int32_t>{a, b}));
  EXPECT_EQ(seen.size(), 64u * 64u);
}

TEST(BlockPool, StartsFreeAndAllocatesInOrderUntilExhausted) {
  BlockPool pool(3, 4);
  EXPECT_EQ(pool.n_blocks(), 3);
  EXPECT_EQ(pool.block_size(), 4);
  EXPECT_EQ(pool.n_free(), 3);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.allocate(), std::nullopt);
  EXPECT_EQ(pool.n_used(), 3);
  EXPECT_EQ(pool.n_free(), 0);
  for (BlockId b = 0; b < 3; ++b) EXPECT_EQ(pool.ref_count(b), 1);
  pool.check_invariants();
}

TEST(BlockPool, RetainReleaseTransitions) {
  BlockPool pool(2, 4);
  const BlockId b = *pool.allocate();
  pool.retain(b);
  EXPECT_EQ(pool.ref_count(b), 2);
  pool.release(b);
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.n_used(), 1);
  pool.release(b);  // unhashed: back to free
  EXPECT_EQ(pool.ref_count(b), 0);
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.n_cached(), 0);
  EXPECT_EQ(pool.n_free(), 2);
  EXPECT_EQ(pool.allocate(), b);  // the most recently freed block is reused first
  pool.check_invariants();

  // A published block becomes cached, not free, and keeps its hash.
  const auto t = toks(10);
  pool.publish(b, 77, 5, t);
  EXPECT_TRUE(pool.is_published(b));
  pool.release(b);
  EXPECT_EQ(pool.n_cached(), 1);
  EXPECT_EQ(pool.n_free(), 2);  // cached blocks are allocatable
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_TRUE(pool.is_published(b));
  pool.check_invariants();
}

TEST(BlockPool, FindCachedRevivesACachedBlock) {
  BlockPool pool(2, 4);
  const BlockId b = *pool.allocate();
  const auto t = toks(3);
  pool.publish(b, 1234, 99, t);
  pool.release(b);
  ASSERT_EQ(pool.n_cached(), 1);
  EXPECT_EQ(pool.find_cached(1234, 99, t), b);
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_EQ(pool.n_cached(), 0);
  EXPECT_EQ(pool.n_used(), 1);
  // A used published block is shared by another lookup.
  EXPECT_EQ(pool.find_cached(1234, 99, t), b);
  EXPECT_EQ(pool.ref_count(b), 2);
  EXPECT_EQ(pool.prefix_queries(), 2);
  EXPECT_EQ(pool.prefix_hits(), 2);
  EXPECT_EQ(pool.find_cached(4321, 99, t), std::nullopt);
  EXPECT_EQ(pool.prefix_queries(), 3);
  EXPECT_EQ(pool.prefix_hits(), 2);
  pool.check_invariants();
}

TEST(BlockPool, FindCachedRejectsAForgedHash) {
  BlockPool pool(2, 4);
  const BlockId b = *pool.allocate();
  const auto t = toks(3), other = toks(4);
  pool.publish(b, 555, 7, t);
  pool.release(b);
  // Same hash, different tokens or parent: a collision must not return the block.
  EXPECT_EQ(pool.find_cached(555, 7, other), std::nullopt);
  EXPECT_EQ(pool.find_cached(555, 8, t), std::nullopt);
  EXPECT_EQ(pool.find_cached(555, 7, std::vector<int32_t>{3, 4, 5}), std::nullopt);  // wrong length
  EXPECT_EQ(pool.ref_count(b), 0);
  EXPECT_EQ(pool.n_cached(), 1);
  EXPECT_EQ(pool.prefix_hits(), 0);
  EXPECT_EQ(pool.find_cached(555, 7, t), b);
  pool.check_invariants();
}

TEST(BlockPool, PublishDuplicateLeavesTheSecondBlockUnhashed) {
  BlockPool pool(3, 4);
  const BlockId a = *pool.allocate(), b = *pool.allocate();
  const auto t = toks(1);
  pool.publish(a, 42, 0, t);
  pool.publish(b, 42, 0, t);
  EXPECT_TRUE(pool.is_published(a));
  EXPECT_FALSE(pool.is_published(b));
  pool.publish(a, 42, 0, t);  // again under its own hash: no-op
  EXPECT_TRUE(pool.is_published(a));
  pool.release(b);
  EXPECT_EQ(pool.n_cached(), 0);  // the duplicate went straight to the free list
  pool.release(a);
  EXPECT_EQ(pool.n_cached(), 1);
  EXPECT_EQ(pool.find_cached(42, 0, t), a);
  pool.check_invariants();
}

TEST(BlockPool, EvictsLeastRecentlyReleasedCachedBlockAfterFreeOnes) {
  BlockPool pool(4, 2);
  std::vector<BlockId> b;
  for (int i = 0; i < 4; ++i) b.push_back(*pool.allocate());
  for (int i = 0; i < 3; ++i) pool.publish(b[i], 100 + i, 0, toks(i, 2));
  // Release order 2, 0, 1 (LRU order), and the unhashed 3 last.
  pool.release(b[2]);
  pool.release(b[0]);
  pool.release(b[1]);
  pool.release(b[3]);
  EXPECT_EQ(pool.n_cached(), 3);
  EXPECT_EQ(pool.n_free(), 4);
  EXPECT_EQ(pool.allocate(), b[3]);  // free first
  EXPECT_EQ(pool.n_evictions(), 0);
  EXPECT_EQ(pool.allocate(), b[2]);  // then the least recently released
  EXPECT_FALSE(pool.is_published(b[2]));
  EXPECT_EQ(pool.find_cached(102, 0, toks(2, 2)), std::nullopt);  // its hash is gone
  // A lookup refreshes nothing by itself, but taking and releasing moves to most recent.
  ASSERT_EQ(pool.find_cached(100, 0, toks(0, 2)), b[0]);
  pool.release(b[0]);  // LRU order now: 1, 0
  EXPECT_EQ(pool.allocate(), b[1]);
  EXPECT_EQ(pool.allocate(), b[0]);
  EXPECT_EQ(pool.allocate(), std::nullopt);
  EXPECT_EQ(pool.n_evictions(), 3);
  pool.check_invariants();
}

TEST(BlockPool, HashMapSurvivesChurnWithCollidingHomes) {
  // Many publish / evict cycles with sequential keys exercise probing and backward-shift deletion.
  BlockPool pool(8, 1);
  std::vector<BlockId> held;
  uint64_t key = 0;
  for (int round = 0; round < 200; ++round) {
    while (auto b = pool.allocate()) {
      pool.publish(*b, key, 0, std::vector<int32_t>{static_cast<int32_t>(key)});
      ++key;
      held.push_back(*b);
    }
    for (size_t i = 0; i < held.size(); ++i) pool.release(held[(i * 3 + static_cast<size_t>(round)) % held.size()]);
    held.clear();
    pool.check_invariants();
    // The 8 most recent keys are all still findable.
    for (uint64_t k = key - 8; k < key; ++k) {
      auto b = pool.find_cached(k, 0, std::vector<int32_t>{static_cast<int32_t>(k)});
      ASSERT_TRUE(b.has_value()) << "key " << k;
      held.push_back(*b);
    }
    for (BlockId b : held) pool.release(b);
    held.clear();
  }
  pool.check_invariants();
}

TEST(BlockPoolDeathTest, MisuseIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  BlockPool pool(2, 4);
  EXPECT_DEATH(pool.release(0), "not in use");
  EXPECT_DEATH(pool.retain(1), "not in use");
  EXPECT_DEATH((void)pool.ref_count(2), "out of range");
  const BlockId b = *pool.allocate();
  EXPECT_DEATH(pool.publish(b, 1, 0, std::vector<int32_t>{1, 2}), "block of 4");
  pool.publish(b, 1, 0, toks(0));
  EXPECT_DEATH(pool.publish(b, 2, 0, toks(0)), "different hash");
}

}  // namespace
}  // namespace edgelm::kv
