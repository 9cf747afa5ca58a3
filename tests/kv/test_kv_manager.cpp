// KvManager: prefix hits, whole-prompt hits with copy-on-write, all-or-nothing reservation,
// tenant isolation, opting out of the prefix cache, forking, freeing and eviction.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/kv_manager.h"

namespace edgelm::kv {
namespace {

constexpr int32_t kBs = 4;
constexpr int32_t kEmbd = 4;
constexpr int32_t kLayers = 2;

model::ModelConfig tiny_config() {
  model::ModelConfig c;
  c.n_layer = kLayers;
  c.n_head = 2;
  c.n_head_kv = 1;
  c.head_dim = kEmbd;
  c.n_embd = 8;
  return c;
}

// The K (v = false) or V row a position would hold: unique per (token, pos, layer), exact in f32.
std::vector<float> row_for(int32_t token, int32_t pos, int32_t layer, bool v) {
  std::vector<float> r(kEmbd);
  for (int32_t i = 0; i < kEmbd; ++i)
    r[static_cast<size_t>(i)] = static_cast<float>(token * 1000 + pos * 10 + layer) + (v ? 0.5f : 0.0f) + i * 0.125f;
  return r;
}

std::vector<int32_t> range(int32_t first, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

class KvManagerTest : public ::testing::Test {
 protected:
  explicit KvManagerTest(int32_t n_blocks = 8)
      : pool_(n_blocks, kBs),
        store_(KvStore::create(tiny_config(), n_blocks, kBs, KvType::f32).value()),
        mgr_(pool_, store_) {}

  // One engine step: reserve, write K/V of the new positions, commit. False when out of room.
  bool feed(SeqKv& seq, const std::vector<int32_t>& tokens) {
    if (!mgr_.reserve(seq, static_cast<int32_t>(tokens.size()))) return false;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const int32_t pos = seq.n_tokens + static_cast<int32_t>(i);
      const auto [block, slot] = mgr_.slot(seq, pos);
      for (int32_t l = 0; l < kLayers; ++l)
        store_.write(l, block, slot, row_for(tokens[i], pos, l, false).data(), row_for(tokens[i], pos, l, true).data());
    }
    mgr_.commit(seq, tokens);
    return true;
  }

  // Prefill the part of `prompt` that match_prefix did not cover.
  void prefill(SeqKv& seq, const std::vector<int32_t>& prompt) {
    const int32_t done = mgr_.match_prefix(seq, prompt);
    ASSERT_TRUE(feed(seq, std::vector<int32_t>(prompt.begin() + done, prompt.end())));
  }

  // Every written position of seq reads back what row_for says.
  void expect_data(const SeqKv& seq) {
    std::vector<float> out(kEmbd);
    for (int32_t pos = 0; pos < seq.n_tokens; ++pos) {
      const auto [block, slot] = mgr_.slot(seq, pos);
      for (int32_t l = 0; l < kLayers; ++l) {
        store_.read_k(l, block, slot, out.data());
        EXPECT_EQ(out, row_for(seq.tokens[static_cast<size_t>(pos)], pos, l, false)) << "pos " << pos;
        store_.read_v(l, block, slot, out.data());
        EXPECT_EQ(out, row_for(seq.tokens[static_cast<size_t>(pos)], pos, l, true)) << "pos " << pos;
      }
    }
  }

  void check(std::initializer_list<const SeqKv*> live) {
    mgr_.check_invariants(std::span<const SeqKv* const>(live.begin(), live.size()));
  }

  BlockPool pool_;
  KvStore store_;
  KvManager mgr_;
};

TEST_F(KvManagerTest, CommitPublishesFullBlocksAndAPrefixHitSharesThem) {
  SeqKv a;
  prefill(a, range(10, 10));  // blocks [10..13] [14..17] [18 19]
  EXPECT_EQ(a.n_tokens, 10);
  EXPECT_EQ(a.blocks.size(), 3u);
  EXPECT_EQ(a.n_published, 2);
  EXPECT_TRUE(pool_.is_published(a.blocks[0]));
  EXPECT_TRUE(pool_.is_published(a.blocks[1]));
  EXPECT_FALSE(pool_.is_published(a.blocks[2]));
  check({&a});

  SeqKv b;
  auto prompt = range(10, 9);
  prompt.push_back(99);  // shares two full blocks, then differs
  EXPECT_EQ(mgr_.match_prefix(b, prompt), 8);
  EXPECT_EQ(b.n_tokens, 8);
  EXPECT_EQ(b.tokens, range(10, 8));
  ASSERT_EQ(b.blocks.size(), 2u);
  EXPECT_EQ(b.blocks[0], a.blocks[0]);
  EXPECT_EQ(b.blocks[1], a.blocks[1]);
  EXPECT_EQ(pool_.ref_count(a.blocks[0]), 2);
  EXPECT_EQ(mgr_.n_prompt_tokens_queried(), 20);  // a's 10, b's 10
  EXPECT_EQ(mgr_.n_prompt_tokens_hit(), 8);
  check({&a, &b});
  expect_data(b);
  ASSERT_TRUE(feed(b, {18, 99}));
  EXPECT_NE(b.blocks[2], a.blocks[2]);
  expect_data(a);
  expect_data(b);
  check({&a, &b});
}

TEST_F(KvManagerTest, WholePromptHitRecomputesTheLastTokenIntoACopy) {
  SeqKv a;
  const auto prompt = range(1, 8);
  prefill(a, prompt);
  SeqKv b;
  EXPECT_EQ(mgr_.match_prefix(b, prompt), 7);
  EXPECT_EQ(b.tokens, range(1, 7));
  ASSERT_EQ(b.blocks, a.blocks);
  check({&a, &b});
  const BlockId shared = a.blocks[1];
  EXPECT_EQ(pool_.ref_count(shared), 2);
  EXPECT_EQ(mgr_.blocks_needed(b, 1), 1);  // the copy
  const int32_t free_before = pool_.n_free();

  ASSERT_TRUE(mgr_.reserve(b, 1));
  EXPECT_EQ(pool_.n_free(), free_before - 1);
  const BlockId copy = b.blocks[1];
  EXPECT_NE(copy, shared);
  EXPECT_EQ(b.blocks[0], a.blocks[0]);
  EXPECT_EQ(pool_.ref_count(shared), 1);
  EXPECT_EQ(pool_.ref_count(copy), 1);
  check({&a, &b});
  // The copy holds the shared block's data, every slot and layer.
  std::vector<float> x(kEmbd), y(kEmbd);
  for (int32_t l = 0; l < kLayers; ++l)
    for (int32_t s = 0; s < kBs; ++s) {
      store_.read_k(l, shared, s, x.data());
      store_.read_k(l, copy, s, y.data());
      EXPECT_EQ(x, y);
      store_.read_v(l, shared, s, x.data());
      store_.read_v(l, copy, s, y.data());
      EXPECT_EQ(x, y);
    }
  // Recompute the last token into the copy with a different value: the original keeps its own.
  for (int32_t l = 0; l < kLayers; ++l) {
    const auto k = row_for(777, 7, l, false);
    store_.write(l, copy, 3, k.data(), k.data());
  }
  mgr_.commit(b, std::vector<int32_t>{8});
  expect_data(a);
  EXPECT_TRUE(pool_.is_published(shared));
  EXPECT_FALSE(pool_.is_published(copy));  // a duplicate of the published block
  check({&a, &b});
}

TEST_F(KvManagerTest, WholePromptHitOnACachedBlockStillCopies) {
  SeqKv a;
  const auto prompt = range(1, 8);
  prefill(a, prompt);
  const BlockId last = a.blocks[1];
  mgr_.free(a);
  EXPECT_EQ(pool_.n_cached(), 2);
  SeqKv b;
  EXPECT_EQ(mgr_.match_prefix(b, prompt), 7);
  EXPECT_EQ(pool_.ref_count(last), 1);
  EXPECT_EQ(mgr_.blocks_needed(b, 1), 1);  // published content is never written in place
  ASSERT_TRUE(feed(b, {8}));
  EXPECT_NE(b.blocks[1], last);
  EXPECT_EQ(pool_.ref_count(last), 0);
  EXPECT_EQ(pool_.n_cached(), 1);  // back in the cache, content intact
  expect_data(b);
  check({&b});
}

TEST_F(KvManagerTest, ReserveIsAllOrNothing) {
  SeqKv a, b;
  prefill(a, range(0, 22));  // 6 of 8 blocks
  EXPECT_EQ(pool_.n_free(), 2);
  ASSERT_TRUE(mgr_.reserve(b, 8));  // exactly the 2 left
  mgr_.cancel(b);
  EXPECT_EQ(pool_.n_free(), 2);
  const SeqKv a_before = a;
  EXPECT_FALSE(mgr_.reserve(a, 2 + 2 * kBs + 1));  // would need 3 new blocks
  EXPECT_EQ(a.blocks, a_before.blocks);
  EXPECT_EQ(a.n_reserved, 0);
  EXPECT_EQ(pool_.n_free(), 2);
  EXPECT_EQ(pool_.n_used(), 6);
  check({&a, &b});

  // With a copy-on-write pending: a fork needs the copy plus a new block.
  SeqKv c;
  mgr_.fork(a, c);                        // c shares a's partial last block
  ASSERT_TRUE(mgr_.reserve(c, 2 + kBs));  // the copy + 1 new = the 2 left
  EXPECT_EQ(pool_.n_free(), 0);
  mgr_.cancel(c);
  EXPECT_EQ(pool_.n_free(), 1);  // the copy is kept (it holds c's tokens), the new block returned
  SeqKv d;
  mgr_.fork(a, d);
  EXPECT_EQ(mgr_.blocks_needed(d, 3), 2);
  const SeqKv d_before = d;
  EXPECT_FALSE(mgr_.reserve(d, 3));
  EXPECT_EQ(d.blocks, d_before.blocks);
  EXPECT_EQ(pool_.ref_count(a.blocks.back()), 2);
  check({&a, &b, &c, &d});
  expect_data(c);
}

TEST_F(KvManagerTest, DifferentSaltsNeverShare) {
  SeqKv a;
  a.root = prefix_root("tenant-a");
  prefill(a, range(5, 9));
  SeqKv b;  // default salt
  EXPECT_EQ(mgr_.match_prefix(b, range(5, 9)), 0);
  EXPECT_TRUE(b.blocks.empty());
  SeqKv c;
  c.root = prefix_root("tenant-b");
  EXPECT_EQ(mgr_.match_prefix(c, range(5, 9)), 0);
  SeqKv d;
  d.root = prefix_root("tenant-a");
  EXPECT_EQ(mgr_.match_prefix(d, range(5, 9)), 8);
  check({&a, &b, &c, &d});
}

TEST_F(KvManagerTest, CachePrefixFalseNeitherPublishesNorFinds) {
  SeqKv a;
  a.cache_prefix = false;
  prefill(a, range(0, 8));
  EXPECT_EQ(a.n_published, 0);
  EXPECT_FALSE(pool_.is_published(a.blocks[0]));
  SeqKv b;
  EXPECT_EQ(mgr_.match_prefix(b, range(0, 9)), 0);
  prefill(b, range(0, 9));  // publishes
  SeqKv c;
  c.cache_prefix = false;
  EXPECT_EQ(mgr_.match_prefix(c, range(0, 9)), 0);
  check({&a, &b, &c});
  mgr_.free(a);
  EXPECT_EQ(pool_.n_cached(), 0);  // a's blocks were never published: straight to free
}

TEST_F(KvManagerTest, FreeReturnsEveryBlock) {
  SeqKv a, b, c;
  prefill(a, range(0, 10));
  prefill(b, range(0, 13));
  mgr_.fork(b, c);
  ASSERT_TRUE(feed(c, {1, 2, 3}));
  check({&a, &b, &c});
  for (SeqKv* s : {&a, &b, &c}) mgr_.free(*s);
  EXPECT_EQ(pool_.n_used(), 0);
  EXPECT_EQ(pool_.n_free(), pool_.n_blocks());
  // Published: [0..3] [4..7] (shared by all), [8..11] (b's, shared with c) and c's copy of the
  // block after it, which its three tokens filled: [12 1 2 3].
  EXPECT_EQ(pool_.n_cached(), 4);
  EXPECT_TRUE(a.blocks.empty());
  EXPECT_EQ(a.n_tokens, 0);
  EXPECT_TRUE(a.tokens.empty());
  check({});
  // A freed sequence is reusable (preempt by recompute): its prompt hits the cache.
  EXPECT_EQ(mgr_.match_prefix(a, range(0, 10)), 8);
  check({&a});
}

TEST_F(KvManagerTest, ForkSharesThenCopiesOnWrite) {
  SeqKv a, b;
  prefill(a, range(0, 6));
  mgr_.fork(a, b);
  EXPECT_EQ(b.blocks, a.blocks);
  EXPECT_EQ(b.tokens, a.tokens);
  EXPECT_EQ(pool_.ref_count(a.blocks[1]), 2);
  check({&a, &b});
  ASSERT_TRUE(feed(b, {50, 51}));
  ASSERT_TRUE(feed(a, {60}));
  EXPECT_NE(a.blocks[1], b.blocks[1]);
  EXPECT_EQ(a.blocks[0], b.blocks[0]);
  expect_data(a);
  expect_data(b);
  check({&a, &b});
}

TEST_F(KvManagerTest, EvictionUnderPressureReusesCachedBlocks) {
  SeqKv a;
  prefill(a, range(0, 32));  // all 8 blocks, all published
  mgr_.free(a);
  EXPECT_EQ(pool_.n_cached(), 8);
  SeqKv b;
  EXPECT_EQ(mgr_.match_prefix(b, range(100, 12)), 0);
  ASSERT_TRUE(feed(b, range(100, 12)));  // evicts 3: the tail of a's prompt goes first
  EXPECT_EQ(pool_.n_cached(), 5);
  EXPECT_EQ(pool_.n_evictions(), 3);
  check({&b});
  SeqKv c;
  EXPECT_EQ(mgr_.match_prefix(c, range(0, 32)), 5 * kBs);  // the head survived
  expect_data(c);
  check({&b, &c});
}

TEST_F(KvManagerTest, SlotMapsPositionsThroughTheTable) {
  SeqKv a;
  prefill(a, range(0, 9));
  EXPECT_EQ(mgr_.slot(a, 0), std::make_pair(a.blocks[0], 0));
  EXPECT_EQ(mgr_.slot(a, 5), std::make_pair(a.blocks[1], 1));
  EXPECT_EQ(mgr_.slot(a, 8), std::make_pair(a.blocks[2], 0));
  EXPECT_EQ(mgr_.blocks_needed(a, 3), 0);  // fits in the partial block
  EXPECT_EQ(mgr_.blocks_needed(a, 4), 1);
  EXPECT_EQ(mgr_.blocks_needed(a, 0), 0);
}

TEST_F(KvManagerTest, CommitOfFewerTokensThanReservedDropsTheRest) {
  SeqKv a;
  prefill(a, range(0, 3));
  ASSERT_TRUE(mgr_.reserve(a, 6));  // positions 3..8: blocks 0, 1, 2
  EXPECT_EQ(a.blocks.size(), 3u);
  check({&a});
  mgr_.commit(a, std::vector<int32_t>{3, 4});  // a rejected speculative tail
  EXPECT_EQ(a.n_tokens, 5);
  EXPECT_EQ(a.blocks.size(), 2u);
  EXPECT_EQ(a.n_published, 1);
  check({&a});
}

using KvManagerDeathTest = KvManagerTest;

TEST_F(KvManagerDeathTest, InvariantsCatchLeaksAndMisuse) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SeqKv a, b;
  prefill(a, range(0, 6));
  mgr_.fork(a, b);
  EXPECT_DEATH(check({&a}), "refcount 2 but 1 table entries");  // b left out: looks leaked
  EXPECT_DEATH(mgr_.commit(a, std::vector<int32_t>{1}), "reserved");
  EXPECT_DEATH(mgr_.match_prefix(a, range(0, 4)), "already holds");
  ASSERT_TRUE(mgr_.reserve(a, 1));
  SeqKv c;
  EXPECT_DEATH(mgr_.fork(a, c), "reserved positions");
}

}  // namespace
}  // namespace edgelm::kv
