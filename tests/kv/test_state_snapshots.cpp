// StateSnapshots (kv/state_snapshots.h): reserve / publish / discard, one entry per hash, LRU
// reuse when full (never of pending entries), eviction with the BlockPool's blocks through the
// EvictListener; and KvManager::shrink_prefix / block_hashes, which the engine uses to stop a
// prefix match at a snapshot.
#include <gtest/gtest.h>

#include <vector>

#include "kv/block_pool.h"
#include "kv/kv_manager.h"
#include "kv/state_snapshots.h"
#include "model/arch.h"

namespace edgelm::kv {
namespace {

void fill(StateSnapshots& s, int32_t e, float v) { std::fill_n(s.data(e), 8, v); }

TEST(StateSnapshots, ReservePublishFindDiscard) {
  StateSnapshots s(8, 3);
  const int32_t a = s.reserve(100);
  ASSERT_GE(a, 0);
  EXPECT_EQ(s.reserve(100), -1) << "one entry per hash, pending ones included";
  EXPECT_EQ(s.find(100), nullptr) << "pending entries are not findable";
  fill(s, a, 1.5f);
  s.publish(a, 16);
  int32_t n = 0;
  const float* d = s.find(100, &n);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(n, 16);
  EXPECT_EQ(d[7], 1.5f);
  EXPECT_EQ(s.n_snapshots(), 1);
  const int32_t b = s.reserve(200);
  s.discard(b);
  EXPECT_FALSE(s.contains(200));
  EXPECT_EQ(s.n_snapshots(), 1);
  EXPECT_EQ(s.n_bytes(), 2 * 8 * sizeof(float)) << "memory is allocated per entry on first use and kept";
  s.check_invariants();
  StateSnapshots off(8, 0);
  EXPECT_FALSE(off.enabled());
  EXPECT_EQ(off.reserve(1), -1);
}

TEST(StateSnapshots, FullStoreReusesTheLeastRecentlyUsedButNeverAPendingEntry) {
  StateSnapshots s(4, 3);
  for (uint64_t h : {1, 2, 3}) s.publish(s.reserve(h), static_cast<int32_t>(h) * 4);
  ASSERT_NE(s.find(1), nullptr);  // 1 is now the most recent; 2 the least
  const int32_t e = s.reserve(4);
  ASSERT_GE(e, 0);
  EXPECT_FALSE(s.contains(2));
  EXPECT_TRUE(s.contains(1));
  EXPECT_TRUE(s.contains(3));
  EXPECT_EQ(s.n_evictions(), 1);
  // With 4 pending, two more reservations take 3 and 1, and a third finds nothing to take.
  EXPECT_GE(s.reserve(5), 0);
  EXPECT_GE(s.reserve(6), 0);
  EXPECT_EQ(s.reserve(7), -1);
  EXPECT_EQ(s.n_snapshots(), 0);
  s.check_invariants();
  s.publish(e, 16);
  EXPECT_TRUE(s.contains(4));
  s.check_invariants();
}

TEST(StateSnapshots, GoWithTheirEvictedBlocks) {
  BlockPool pool(2, 4);
  StateSnapshots s(4, 4);
  pool.set_evict_listener(&s);
  const std::vector<int32_t> t1 = {1, 2, 3, 4}, t2 = {5, 6, 7, 8};
  const BlockId b1 = *pool.allocate(), b2 = *pool.allocate();
  pool.publish(b1, 11, 0, t1);
  pool.publish(b2, 22, 0, t2);
  s.publish(s.reserve(11), 4);
  s.publish(s.reserve(22), 4);
  const int32_t pending = s.reserve(33);  // a pending entry is not touched by evictions
  pool.release(b1);
  pool.release(b2);
  EXPECT_EQ(pool.n_cached(), 2);
  ASSERT_TRUE(pool.allocate().has_value());  // evicts b1 (least recently released)
  EXPECT_FALSE(s.contains(11));
  EXPECT_TRUE(s.contains(22));
  ASSERT_TRUE(pool.allocate().has_value());
  EXPECT_FALSE(s.contains(22));
  EXPECT_EQ(s.n_snapshots(), 0);
  s.discard(pending);
  s.check_invariants(&pool);
  pool.check_invariants();
  // A snapshot whose hash no block is published under breaks the invariant check.
  s.publish(s.reserve(44), 4);
  EXPECT_DEATH(s.check_invariants(&pool), "outlives its KV block");
}

TEST(KvManagerShrinkPrefix, KeepsTheFirstTokensAndTheirChain) {
  model::ModelConfig c;
  c.n_layer = 1;
  c.n_head = 1;
  c.n_head_kv = 1;
  c.n_embd = 4;
  c.head_dim = 4;
  auto store = KvStore::create(c, 8, 2, KvType::f32);
  ASSERT_TRUE(store.ok()) << store.error().message;
  BlockPool pool(8, 2);
  KvManager kv(pool, *store);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7};
  SeqKv a;
  ASSERT_TRUE(kv.reserve(a, 7));
  kv.commit(a, prompt);
  SeqKv b;
  EXPECT_EQ(kv.match_prefix(b, prompt), 6);
  std::vector<uint64_t> hashes(3);
  kv.block_hashes(b, prompt, hashes);
  EXPECT_EQ(hashes[2], b.last_hash);
  EXPECT_EQ(kv.block_hash(b, prompt, 1), hashes[1]);
  kv.shrink_prefix(b, 2);
  EXPECT_EQ(b.n_tokens, 2);
  EXPECT_EQ(b.blocks.size(), 1u);
  EXPECT_EQ(b.n_published, 1);
  EXPECT_EQ(b.last_hash, hashes[0]);
  EXPECT_EQ(kv.n_prompt_tokens_hit(), 2);
  EXPECT_EQ(kv.block_hash(b, prompt, 2), hashes[2]) << "continues the chain from the kept block";
  const std::vector<const SeqKv*> live = {&a, &b};
  kv.check_invariants(live);
  kv.shrink_prefix(b, 0);
  EXPECT_TRUE(b.blocks.empty());
  kv.free(a);
  kv.check_invariants({});
}

}  // namespace
}  // namespace edgelm::kv
