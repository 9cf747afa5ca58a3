// Randomized stress test of KvManager + BlockPool + KvStore on a tiny pool: sequences drawn from
// a few shared prefixes and two tenants start, reserve, write, commit (fully or partly), cancel,
// fork and free in random order. After every operation the invariants are checked and every
// written position of every live sequence must read back the value written for it.
//
// The value written at position p is a function of (salt, tokens[0..p]) — what a real model's
// K/V depend on — so adopting a block of another prefix or tenant, writing into a shared block,
// or losing data across copy-on-write and eviction all show up as a wrong read.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "kv/kv_manager.h"

namespace edgelm::kv {
namespace {

constexpr int32_t kEmbd = 4;
constexpr int32_t kLayers = 2;
constexpr int32_t kMaxLen = 40;
constexpr size_t kMaxLive = 6;

uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 31)) * 0x7fb5d329728ea185ull;
  x = (x ^ (x >> 27)) * 0x81dadef4bc2dd44dull;
  return x ^ (x >> 33);
}

// Rolling fingerprints of a sequence's prefixes: [tokens.size()], entry p covers tokens[0..p].
std::vector<uint64_t> fingerprints(int salt, const std::vector<int32_t>& tokens) {
  std::vector<uint64_t> f(tokens.size());
  uint64_t h = mix(0x51u + static_cast<uint64_t>(salt));
  for (size_t p = 0; p < tokens.size(); ++p) f[p] = h = mix(h + static_cast<uint32_t>(tokens[p]) + 1);
  return f;
}

// [kEmbd] small integers (exact in f32) from the fingerprint, distinct for K and V and per layer.
std::vector<float> row_for(uint64_t fp, int32_t layer, bool v) {
  std::vector<float> r(kEmbd);
  const uint64_t h = mix(fp ^ (static_cast<uint64_t>(layer) << 1 | (v ? 1 : 0)));
  for (int32_t i = 0; i < kEmbd; ++i) r[static_cast<size_t>(i)] = static_cast<float>((h >> (16 * i)) & 0xffff);
  return r;
}

struct Live {
  SeqKv kv;
  int salt = 0;
  std::vector<int32_t> prompt;
  std::vector<int32_t> pending;  // tokens of the reserved positions, written at commit time
};

struct Stats {
  int64_t ops = 0, starts = 0, hit_tokens = 0, reserve_fails = 0, copies = 0, forks = 0, partial_commits = 0;
};

class Stress {
 public:
  Stress(uint32_t seed, int32_t n_blocks, int32_t block_size)
      : rng_(seed),
        bs_(block_size),
        pool_(n_blocks, block_size),
        store_(KvStore::create(config(), n_blocks, block_size, KvType::f32).value()),
        mgr_(pool_, store_) {
    std::uniform_int_distribution<int32_t> tok(0, 9);
    for (auto& p : prefixes_) {
      p.resize(12);
      for (int32_t& t : p) t = tok(rng_);
    }
  }

  void run(int n_ops) {
    for (int i = 0; i < n_ops; ++i) {
      SCOPED_TRACE(::testing::Message() << "op " << i);
      step();
      verify();
      if (::testing::Test::HasFatalFailure()) return;
    }
    while (!live_.empty()) drop(0);
    verify();
    EXPECT_EQ(pool_.n_used(), 0);
  }

  const Stats& stats() const { return stats_; }
  const BlockPool& pool() const { return pool_; }

 private:
  static model::ModelConfig config() {
    model::ModelConfig c;
    c.n_layer = kLayers;
    c.n_head = 1;
    c.n_head_kv = 1;
    c.head_dim = kEmbd;
    c.n_embd = kEmbd;
    return c;
  }

  int32_t rand(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }

  void step() {
    ++stats_.ops;
    const int32_t op = rand(0, 99);
    if (live_.empty() || (op < 15 && live_.size() < kMaxLive)) return start();
    Live& s = *live_[static_cast<size_t>(rand(0, static_cast<int32_t>(live_.size()) - 1))];
    if (op < 22) return drop(index_of(s));
    if (op < 30 && s.pending.empty() && live_.size() < kMaxLive) return fork(s);
    if (s.pending.empty()) return reserve(s);
    if (op < 38) {
      mgr_.cancel(s.kv);
      s.pending.clear();
      return;
    }
    commit(s);
  }

  size_t index_of(const Live& s) const {
    for (size_t i = 0; i < live_.size(); ++i)
      if (live_[i].get() == &s) return i;
    return SIZE_MAX;
  }

  void start() {
    auto s = std::make_unique<Live>();
    s->salt = rand(0, 1);
    s->kv.root = prefix_root(s->salt == 0 ? "" : "tenant");
    s->kv.cache_prefix = rand(0, 9) != 0;
    const auto& prefix = prefixes_[static_cast<size_t>(rand(0, 2))];
    s->prompt.assign(prefix.begin(), prefix.begin() + rand(0, 12));
    for (int32_t n = rand(s->prompt.empty() ? 1 : 0, 6); n > 0; --n) s->prompt.push_back(rand(0, 9));
    const int32_t n = mgr_.match_prefix(s->kv, s->prompt);
    ++stats_.starts;
    stats_.hit_tokens += n;
    const auto len = static_cast<int32_t>(s->prompt.size());
    ASSERT_LT(n, len);
    ASSERT_TRUE(n % bs_ == 0 || n == len - 1) << n;
    if (!s->kv.cache_prefix) {
      ASSERT_EQ(n, 0);
    }
    ASSERT_EQ(s->kv.tokens, std::vector<int32_t>(s->prompt.begin(), s->prompt.begin() + n));
    live_.push_back(std::move(s));
  }

  void drop(size_t i) {
    mgr_.free(live_[i]->kv);
    EXPECT_TRUE(live_[i]->kv.blocks.empty());
    live_.erase(live_.begin() + static_cast<ptrdiff_t>(i));
  }

  void fork(const Live& src) {
    auto s = std::make_unique<Live>();
    s->salt = src.salt;
    s->prompt = src.prompt;
    mgr_.fork(src.kv, s->kv);
    ++stats_.forks;
    live_.push_back(std::move(s));
  }

  void reserve(Live& s) {
    const int32_t done = s.kv.n_tokens;
    const auto len = static_cast<int32_t>(s.prompt.size());
    const int32_t n = done < len ? std::min(rand(1, 6), len - done) : rand(1, 3);
    if (done + n > kMaxLen) return drop(index_of(s));  // finished
    const SeqKv before = s.kv;
    std::vector<int32_t> refs_before(static_cast<size_t>(pool_.n_blocks()));
    for (BlockId b = 0; b < pool_.n_blocks(); ++b) refs_before[static_cast<size_t>(b)] = pool_.ref_count(b);
    const int32_t cached_before = pool_.n_cached();
    const int32_t needed = mgr_.blocks_needed(s.kv, n);
    const bool copy =
        needed > static_cast<int32_t>((done + n + bs_ - 1) / bs_) - static_cast<int32_t>(s.kv.blocks.size());
    if (!mgr_.reserve(s.kv, n)) {
      ++stats_.reserve_fails;
      ASSERT_GT(needed, pool_.n_free());
      ASSERT_EQ(s.kv.blocks, before.blocks);
      ASSERT_EQ(s.kv.n_reserved, before.n_reserved);
      ASSERT_EQ(s.kv.tokens, before.tokens);
      ASSERT_EQ(pool_.n_cached(), cached_before);
      for (BlockId b = 0; b < pool_.n_blocks(); ++b)
        ASSERT_EQ(pool_.ref_count(b), refs_before[static_cast<size_t>(b)]) << "block " << b;
      if (rand(0, 1) == 0) drop(static_cast<size_t>(rand(0, static_cast<int32_t>(live_.size()) - 1)));  // preempt
      return;
    }
    stats_.copies += copy ? 1 : 0;
    for (int32_t i = 0; i < n; ++i)
      s.pending.push_back(done + i < len ? s.prompt[static_cast<size_t>(done + i)] : rand(0, 9));
  }

  void commit(Live& s) {
    // Write every reserved position (as the forward pass would), then keep all or a prefix.
    std::vector<int32_t> all = s.kv.tokens;
    all.insert(all.end(), s.pending.begin(), s.pending.end());
    const auto fp = fingerprints(s.salt, all);
    for (size_t i = s.kv.tokens.size(); i < all.size(); ++i) {
      const auto [block, slot] = mgr_.slot(s.kv, static_cast<int32_t>(i));
      for (int32_t l = 0; l < kLayers; ++l)
        store_.write(l, block, slot, row_for(fp[i], l, false).data(), row_for(fp[i], l, true).data());
    }
    size_t keep = s.pending.size();
    if (rand(0, 4) == 0) {
      keep = static_cast<size_t>(rand(0, static_cast<int32_t>(keep)));
      ++stats_.partial_commits;
    }
    mgr_.commit(s.kv, std::span<const int32_t>(s.pending.data(), keep));
    s.pending.clear();
  }

  void verify() {
    std::vector<const SeqKv*> live;
    for (const auto& s : live_) live.push_back(&s->kv);
    mgr_.check_invariants(live);
    std::vector<float> out(kEmbd);
    for (const auto& s : live_) {
      const auto fp = fingerprints(s->salt, s->kv.tokens);
      for (int32_t p = 0; p < s->kv.n_tokens; ++p) {
        const auto [block, slot] = mgr_.slot(s->kv, p);
        for (int32_t l = 0; l < kLayers; ++l) {
          store_.read_k(l, block, slot, out.data());
          ASSERT_EQ(out, row_for(fp[static_cast<size_t>(p)], l, false)) << "pos " << p << " block " << block;
          store_.read_v(l, block, slot, out.data());
          ASSERT_EQ(out, row_for(fp[static_cast<size_t>(p)], l, true)) << "pos " << p << " block " << block;
        }
      }
    }
  }

  std::mt19937 rng_;
  int32_t bs_;
  BlockPool pool_;
  KvStore store_;
  KvManager mgr_;
  std::vector<int32_t> prefixes_[3];
  std::vector<std::unique_ptr<Live>> live_;
  Stats stats_;
};

struct StressCase {
  uint32_t seed;
  int32_t n_blocks;
  int32_t block_size;
};

class KvStress : public ::testing::TestWithParam<StressCase> {};

TEST_P(KvStress, RandomOpsKeepInvariantsAndData) {
  const StressCase c = GetParam();
  Stress stress(c.seed, c.n_blocks, c.block_size);
  stress.run(4000);
  // The run must have exercised every path it claims to test.
  const Stats& st = stress.stats();
  EXPECT_GT(st.hit_tokens, 0);
  EXPECT_GT(st.reserve_fails, 0);
  if (c.block_size > 1) {
    EXPECT_GT(st.copies, 0);  // with 1-token blocks no block is ever partly shared
  }
  EXPECT_GT(st.forks, 0);
  EXPECT_GT(st.partial_commits, 0);
  EXPECT_GT(stress.pool().n_evictions(), 0);
  EXPECT_GT(stress.pool().prefix_hits(), 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, KvStress,
                         ::testing::Values(StressCase{1, 8, 4}, StressCase{2, 12, 4}, StressCase{3, 16, 4},
                                           StressCase{4, 10, 3}, StressCase{5, 16, 2}, StressCase{6, 8, 1}),
                         [](const auto& info) {
                           return "seed" + std::to_string(info.param.seed) + "_blocks" +
                                  std::to_string(info.param.n_blocks) + "_bs" + std::to_string(info.param.block_size);
                         });

}  // namespace
}  // namespace edgelm::kv
