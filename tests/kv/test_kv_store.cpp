// KvStore: round trips per element type within each type's error budget, block copies, the
// validation of create(), and budget arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <cstdio>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

#include "kernels/fp16.h"
#include "kernels/quants_legacy.h"
#include "kv/kv_store.h"

namespace edgelm::kv {
namespace {

model::ModelConfig config(int32_t n_layer, int32_t n_head_kv, int32_t head_dim) {
  model::ModelConfig c;
  c.n_layer = n_layer;
  c.n_head = n_head_kv * 2;
  c.n_head_kv = n_head_kv;
  c.head_dim = head_dim;
  c.n_embd = c.n_head * head_dim;
  return c;
}

// [n] values in [-scale, scale], deterministic per seed.
std::vector<float> random_row(size_t n, uint32_t seed, float scale = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

KvStore make_store(const model::ModelConfig& c, int32_t n_blocks, int32_t block_size, KvType type) {
  auto s = KvStore::create(c, n_blocks, block_size, type);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return std::move(s).value();
}

TEST(KvStore, TypeNames) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0}) {
    auto parsed = kv_type_from_name(kv_type_name(t));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, t);
  }
  auto bad = kv_type_from_name("q4_0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("q4_0"), std::string::npos);
  EXPECT_NE(bad.error().message.find("f32, f16, q8_0"), std::string::npos);
}

TEST(KvStore, BytesPerTokenAndTotal) {
  const auto c = config(3, 2, 32);  // n_embd_kv 64
  EXPECT_EQ(kv_bytes_per_token(c, KvType::f32), 3u * 2 * 64 * 4);
  EXPECT_EQ(kv_bytes_per_token(c, KvType::f16), 3u * 2 * 64 * 2);
  EXPECT_EQ(kv_bytes_per_token(c, KvType::q8_0), 3u * 2 * 2 * 34);
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0}) {
    const KvStore s = make_store(c, 5, 16, t);
    EXPECT_EQ(s.n_bytes(), 5u * 16 * kv_bytes_per_token(c, t)) << kv_type_name(t);
    EXPECT_EQ(s.type(), t);
  }
}

TEST(KvStore, BlocksForBudget) {
  const auto c = config(2, 1, 32);  // 2 * 2 * 32 * 4 = 512 bytes per token in f32
  const size_t per_block = 8 * 512;
  EXPECT_EQ(KvStore::blocks_for_budget(c, 8, KvType::f32, 3 * per_block), 3);
  EXPECT_EQ(KvStore::blocks_for_budget(c, 8, KvType::f32, 4 * per_block - 1), 3);
  EXPECT_EQ(KvStore::blocks_for_budget(c, 8, KvType::f32, per_block - 1), 0);
  EXPECT_EQ(KvStore::blocks_for_budget(c, 8, KvType::f16, 3 * per_block), 6);
  EXPECT_EQ(KvStore::blocks_for_budget(c, 8, KvType::f32, SIZE_MAX), INT32_MAX);
  // The store made from the answer fits the budget.
  const int32_t n = KvStore::blocks_for_budget(c, 8, KvType::q8_0, 100000);
  EXPECT_LE(make_store(c, n, 8, KvType::q8_0).n_bytes(), 100000u);
  EXPECT_GT(make_store(c, n + 1, 8, KvType::q8_0).n_bytes(), 100000u);
}

TEST(KvStore, CreateRejectsBadShapes) {
  auto q8 = KvStore::create(config(2, 5, 8), 4, 16, KvType::q8_0);  // n_embd_kv 40
  ASSERT_FALSE(q8.ok());
  EXPECT_NE(q8.error().message.find("q8_0"), std::string::npos);
  EXPECT_NE(q8.error().message.find("40"), std::string::npos);
  EXPECT_TRUE(KvStore::create(config(2, 5, 8), 4, 16, KvType::f16).ok());  // fine for f16
  EXPECT_FALSE(KvStore::create(config(2, 1, 32), 0, 16, KvType::f32).ok());
  EXPECT_FALSE(KvStore::create(config(2, 1, 32), -3, 16, KvType::f32).ok());
  EXPECT_FALSE(KvStore::create(config(2, 1, 32), 4, 0, KvType::f32).ok());
  EXPECT_FALSE(KvStore::create(config(0, 1, 32), 4, 16, KvType::f32).ok());
  auto huge = KvStore::create(config(1 << 20, 64, 1 << 12), INT32_MAX, 1 << 20, KvType::f32);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("does not fit"), std::string::npos);
}

// Resident pages of [p, p + bytes) (mincore: the pages in this process's page tables).
size_t resident_pages(const std::byte* p, size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto base = reinterpret_cast<uintptr_t>(p) / page * page;
  const size_t len = reinterpret_cast<uintptr_t>(p) + bytes - base;
  std::vector<unsigned char> v((len + page - 1) / page);
  EXPECT_EQ(mincore(reinterpret_cast<void*>(base), len, v.data()), 0);
  size_t n = 0;
  for (const unsigned char c : v) n += c & 1;
  return n;
}

// A short use (one token in every layer) commits small pages, not a 2 MiB huge page per layer's
// K and V region as the whole-store huge-page advice alone would (where THP is on): the store's
// resident memory grows with the tokens written.
TEST(KvStore, OneTokenPerLayerCommitsSmallPagesOnly) {
  const auto c = config(6, 1, 256);  // n_embd_kv 256: f16 rows of 512 bytes
  KvStore s = make_store(c, 4096, 16, KvType::f16);  // 32 MiB per layer's K (and V)
  const auto k = random_row(256, 1), v = random_row(256, 2);
  for (int32_t l = 0; l < 6; ++l) s.write(l, 0, 0, k.data(), v.data());
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t resident = resident_pages(s.k_rows(0, 0), s.n_bytes()) * page;
  EXPECT_GE(resident, 6u * 2u * page);  // each layer's K and V page
  EXPECT_LE(resident, 6u * 2u * 4u * page) << "one token per layer committed " << resident << " bytes";
}

// The resident and the huge-page kB (Rss, AnonHugePages in /proc/self/smaps) of the mapping
// that holds p; {-1, -1} when no mapping does.
struct MappingKb {
  long rss = -1, huge = -1;
};
MappingKb mapping_kb(const void* p) {
  MappingKb m;
  std::FILE* f = std::fopen("/proc/self/smaps", "r");
  if (f == nullptr) return m;
  const auto a = reinterpret_cast<uintptr_t>(p);
  char line[512];
  bool in = false;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    unsigned long lo = 0, hi = 0;
    long kb = 0;
    if (std::sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && std::strchr(line, '-') < std::strchr(line, ' ')) {
      if (in) break;
      in = a >= lo && a < hi;
    } else if (in && std::sscanf(line, "Rss: %ld kB", &kb) == 1) {
      m.rss = kb;
    } else if (in && std::sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) {
      m.huge = kb;
    }
  }
  std::fclose(f);
  return m;
}

// Whether MADV_COLLAPSE turns a touched 2 MiB of small pages into a huge page here.
bool kernel_collapses() {
  constexpr size_t kHuge = HugePageBuffer::kHugePage;
  void* raw = mmap(nullptr, 2 * kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return false;
  auto* p = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(raw) + kHuge - 1) / kHuge * kHuge);
  std::memset(p, 1, kHuge);
  const bool ok = madvise(p, kHuge, 25 /* MADV_COLLAPSE */) == 0 && mapping_kb(p).huge > 0;
  munmap(raw, 2 * kHuge);
  return ok;
}

// A region of 2 MiB or more starts on a huge page, its first huge page in small pages; a write
// past that page turns the page into a huge one (contents kept), for that layer's K and V.
// Smaller regions are packed one after another.
TEST(KvStore, FirstHugePageOfARegionGoesHugeOnceUsePassesIt) {
  constexpr size_t kHuge = HugePageBuffer::kHugePage;
  const auto c = config(3, 1, 256);  // f16 rows of 512 bytes: 16-token blocks of 8 KiB
  {
    KvStore small = make_store(c, 40, 16, KvType::f16);  // 320 KiB regions
    EXPECT_EQ(small.v_rows(0, 0) - small.k_rows(0, 0), 40 * 8192);
    EXPECT_EQ(small.k_rows(1, 0) - small.v_rows(0, 0), 40 * 8192);
  }
  KvStore s = make_store(c, 600, 16, KvType::f16);  // 4.7 MiB regions
  for (int32_t l = 0; l < 3; ++l)
    for (const std::byte* r : {s.k_rows(l, 0), s.v_rows(l, 0)})
      EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % kHuge, 0u) << "layer " << l;
  const auto k0 = random_row(256, 1), v0 = random_row(256, 2);
  for (int32_t l = 0; l < 3; ++l) s.write(l, 0, 0, k0.data(), v0.data());
  EXPECT_EQ(mapping_kb(s.k_rows(0, 0)).huge, 0) << "the first huge page of a region starts in small pages";
  const int32_t past = static_cast<int32_t>(kHuge / 8192);  // block 256 starts the second huge page
  s.write(1, past - 1, 3, k0.data(), v0.data());
  EXPECT_EQ(mapping_kb(s.k_rows(1, 0)).huge, 0) << "a write inside the first huge page leaves it small";
  s.write(1, past, 0, k0.data(), v0.data());
  std::vector<float> k(256), v(256);
  s.read_k(1, 0, 0, k.data());
  s.read_v(1, 0, 0, v.data());
  for (int i = 0; i < 256; ++i) {
    ASSERT_EQ(k[i], kernels::fp16_to_fp32(kernels::fp32_to_fp16(k0[i]))) << i;
    ASSERT_EQ(v[i], kernels::fp16_to_fp32(kernels::fp32_to_fp16(v0[i]))) << i;
  }
  EXPECT_EQ(mapping_kb(s.k_rows(0, 0)).huge, 0) << "layer 0 has not grown";
  if (!kernel_collapses()) GTEST_SKIP() << "SKIPPED: this kernel cannot collapse small pages (MADV_COLLAPSE, Linux 6.1, THP)";
  // Every resident page of the mappings that hold the first huge pages is huge: they were
  // collapsed (and merged with the huge rest of the region, where the kernel merges them).
  for (const std::byte* r : {s.k_rows(1, 0), s.v_rows(1, 0)}) {
    const MappingKb m = mapping_kb(r);
    EXPECT_GE(m.huge, 2048);
    EXPECT_EQ(m.huge, m.rss);
  }
}

TEST(KvStore, F32RoundTripIsExactAndSlotsAreIndependent) {
  const auto c = config(3, 2, 8);  // n_embd_kv 16
  KvStore s = make_store(c, 4, 4, KvType::f32);
  auto key = [](int32_t l, int32_t b, int32_t slot) { return static_cast<uint32_t>((l * 4 + b) * 4 + slot); };
  for (int32_t l = 0; l < 3; ++l)
    for (BlockId b = 0; b < 4; ++b)
      for (int32_t slot = 0; slot < 4; ++slot) {
        const auto k = random_row(16, key(l, b, slot)), v = random_row(16, key(l, b, slot) + 1000);
        s.write(l, b, slot, k.data(), v.data());
      }
  std::vector<float> out(16);
  for (int32_t l = 0; l < 3; ++l)
    for (BlockId b = 0; b < 4; ++b)
      for (int32_t slot = 0; slot < 4; ++slot) {
        s.read_k(l, b, slot, out.data());
        EXPECT_EQ(out, random_row(16, key(l, b, slot)));
        s.read_v(l, b, slot, out.data());
        EXPECT_EQ(out, random_row(16, key(l, b, slot) + 1000));
      }
}

TEST(KvStore, F16RoundTripWithinHalfPrecision) {
  const auto c = config(2, 2, 16);  // n_embd_kv 32
  KvStore s = make_store(c, 2, 2, KvType::f16);
  auto k = random_row(32, 1, 4.0f), v = random_row(32, 2, 100.0f);
  k[0] = 0.0f;
  v[1] = 65504.0f;  // the largest half is exact
  s.write(1, 1, 1, k.data(), v.data());
  std::vector<float> out(32);
  s.read_k(1, 1, 1, out.data());
  for (size_t i = 0; i < 32; ++i)  // round to nearest: relative error <= 2^-11, plus subnormal spacing
    EXPECT_LE(std::fabs(out[i] - k[i]), std::fabs(k[i]) * 0x1p-11f + 0x1p-25f) << i;
  EXPECT_EQ(out[0], 0.0f);
  s.read_v(1, 1, 1, out.data());
  for (size_t i = 0; i < 32; ++i) EXPECT_LE(std::fabs(out[i] - v[i]), std::fabs(v[i]) * 0x1p-11f) << i;
  EXPECT_EQ(out[1], 65504.0f);
  EXPECT_NE(out, v);  // values really were rounded (the test could tell f16 from f32)
}

// f32 and f16 in blocks of a multiple of 16 store K transposed: element i of slot's K row at
// [i, slot] of the block's [n_embd_kv, block_size] keys (what the attention kernels read), V as
// rows; every slot round-trips and the others are left alone. Other block sizes, and q8_0 with
// heads that are not whole groups of 32, keep K as rows.
TEST(KvStore, F32AndF16KeysAreStoredTransposedInBlocksOf16) {
  const auto c = config(2, 2, 8);  // n_embd_kv 16
  for (const KvType type : {KvType::f32, KvType::f16}) {
    KvStore s = make_store(c, 3, 16, type);
    ASSERT_TRUE(s.k_transposed());
    for (int32_t slot = 0; slot < 16; ++slot) {
      const auto k = random_row(16, 40 + static_cast<uint32_t>(slot), 2.0f);
      const auto v = random_row(16, 90 + static_cast<uint32_t>(slot), 2.0f);
      s.write(1, 2, slot, k.data(), v.data());
    }
    const float tol = type == KvType::f32 ? 0.0f : 2e-3f;
    std::vector<float> kr(16), vr(16);
    for (int32_t slot = 0; slot < 16; ++slot) {
      const auto k = random_row(16, 40 + static_cast<uint32_t>(slot), 2.0f);
      const auto v = random_row(16, 90 + static_cast<uint32_t>(slot), 2.0f);
      s.read_k(1, 2, slot, kr.data());
      s.read_v(1, 2, slot, vr.data());
      for (size_t i = 0; i < 16; ++i) {
        EXPECT_NEAR(kr[i], k[i], tol) << slot << " " << i;
        EXPECT_NEAR(vr[i], v[i], tol) << slot << " " << i;
      }
      // The raw keys: element i of this slot at [i, slot].
      const size_t elem = type == KvType::f32 ? 4 : 2;
      for (int32_t i = 0; i < 16; ++i) {
        const std::byte* e = s.k_rows(1, 2) + (static_cast<size_t>(i) * 16 + static_cast<size_t>(slot)) * elem;
        float x;
        if (type == KvType::f32) {
          std::memcpy(&x, e, 4);
        } else {
          uint16_t h;
          std::memcpy(&h, e, 2);
          x = kernels::fp16_to_fp32(h);
        }
        EXPECT_NEAR(x, k[static_cast<size_t>(i)], tol) << slot << " " << i;
      }
    }
  }
  EXPECT_FALSE(make_store(c, 3, 12, KvType::f16).k_transposed());
  EXPECT_FALSE(make_store(config(2, 2, 16), 3, 16, KvType::q8_0).k_transposed());
}

// q8_0 with heads of a multiple of 32 elements in blocks of 16 stores K transposed in groups of
// 32 elements: per group, the 16 slots' fp16 scales, then 32 x 16 int8 quants (element-major),
// each slot's quants and scale those of its row's BlockQ8_0 (so a key reads back exactly as the
// row layout's q8_0_to_float gives it). The addresses are spelled out here, not taken from
// kernels::KtLayout, so a wrong layout there fails.
TEST(KvStore, Q8_0KeysAreStoredTransposedInGroupsOf32) {
  const auto c = config(2, 2, 32);  // n_embd_kv 64: two groups
  KvStore s = make_store(c, 3, 16, KvType::q8_0);
  ASSERT_TRUE(s.k_transposed());
  std::vector<std::vector<float>> ks;
  for (int32_t slot = 0; slot < 16; ++slot) {
    ks.push_back(random_row(64, 140 + static_cast<uint32_t>(slot), 1.0f + static_cast<float>(slot)));
    const auto v = random_row(64, 190 + static_cast<uint32_t>(slot), 2.0f);
    s.write(1, 2, slot, ks.back().data(), v.data());
  }
  std::vector<float> out(64), want(64);
  for (int32_t slot = 0; slot < 16; ++slot) {
    const auto& k = ks[static_cast<size_t>(slot)];
    kernels::BlockQ8_0 row[2];
    kernels::q8_0_from_float(k.data(), row, 64);
    kernels::q8_0_to_float(row, want.data(), 64);
    s.read_k(1, 2, slot, out.data());
    EXPECT_EQ(out, want) << "slot " << slot;
    for (int g = 0; g < 2; ++g) {
      const std::byte* group = s.k_rows(1, 2) + static_cast<size_t>(g) * 34 * 16;
      uint16_t d;
      std::memcpy(&d, group + 2 * slot, 2);
      EXPECT_EQ(d, row[g].d) << "slot " << slot << " group " << g;
      for (int j = 0; j < 32; ++j)
        EXPECT_EQ(static_cast<int8_t>(group[32 + j * 16 + slot]), row[g].qs[j]) << slot << " " << g << " " << j;
    }
  }
  EXPECT_FALSE(make_store(c, 3, 12, KvType::q8_0).k_transposed());          // blocks not of 16
  EXPECT_FALSE(make_store(config(2, 2, 48), 3, 16, KvType::q8_0).k_transposed());  // heads not of 32
}

TEST(KvStore, Q8_0RoundTripWithinBudget) {
  const auto c = config(2, 2, 32);  // n_embd_kv 64: two quant blocks per row
  KvStore s = make_store(c, 2, 4, KvType::q8_0);
  auto k = random_row(64, 5, 1.0f), v = random_row(64, 6, 50.0f);
  for (size_t i = 32; i < 64; ++i) k[i] *= 0.01f;  // blocks are scaled independently
  s.write(0, 1, 3, k.data(), v.data());
  std::vector<float> out(64);
  // x' = q * fp16(d), d = amax / 127, q = round(x / d): |x' - x| <= d / 2 + 127 * |fp16(d) - d|
  // <= d * (1/2 + 127 * 2^-11) < 0.57 d, per 32-element block.
  auto check = [&](const std::vector<float>& x) {
    for (size_t blk = 0; blk < 2; ++blk) {
      float amax = 0.0f;
      for (size_t i = blk * 32; i < blk * 32 + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
      for (size_t i = blk * 32; i < blk * 32 + 32; ++i)
        EXPECT_LE(std::fabs(out[i] - x[i]), 0.57f * amax / 127) << "element " << i;
    }
  };
  s.read_k(0, 1, 3, out.data());
  check(k);
  EXPECT_LE(std::fabs(out[40]), 0.011f);  // the small block kept its own fine scale
  s.read_v(0, 1, 3, out.data());
  check(v);
}

TEST(KvStore, CopyBlockCopiesEveryLayerKAndV) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0}) {
    const auto c = config(3, 1, 32);
    KvStore s = make_store(c, 3, 2, t);
    std::vector<float> out(32), expect(32);
    for (int32_t l = 0; l < 3; ++l)
      for (int32_t slot = 0; slot < 2; ++slot)
        for (BlockId b : {0, 2}) {
          const auto k = random_row(32, static_cast<uint32_t>(l * 10 + slot + b * 100));
          const auto v = random_row(32, static_cast<uint32_t>(l * 10 + slot + b * 100 + 50));
          s.write(l, b, slot, k.data(), v.data());
        }
    s.copy_block(2, 0);
    for (int32_t l = 0; l < 3; ++l)
      for (int32_t slot = 0; slot < 2; ++slot) {
        s.read_k(l, 0, slot, expect.data());
        s.read_k(l, 2, slot, out.data());
        EXPECT_EQ(out, expect) << kv_type_name(t) << " layer " << l << " slot " << slot;
        s.read_v(l, 0, slot, expect.data());
        s.read_v(l, 2, slot, out.data());
        EXPECT_EQ(out, expect) << kv_type_name(t) << " layer " << l << " slot " << slot;
      }
    // The source still holds its own data.
    s.read_v(2, 0, 1, out.data());
    const auto v_src = random_row(32, 2 * 10 + 1 + 50);
    for (size_t i = 0; i < 32; ++i) EXPECT_NEAR(out[i], v_src[i], 0.03f) << kv_type_name(t);
  }
}

TEST(KvStoreDeathTest, OutOfRangeAccessIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  KvStore s = make_store(config(2, 1, 32), 2, 4, KvType::f32);
  std::vector<float> x(32);
  EXPECT_DEATH(s.write(2, 0, 0, x.data(), x.data()), "layer 2 out of range");
  EXPECT_DEATH(s.read_k(0, 2, 0, x.data()), "block 2 out of range");
  EXPECT_DEATH(s.read_v(0, 0, 4, x.data()), "slot 4 out of range");
  EXPECT_DEATH(s.copy_block(1, 1), "onto itself");
}

}  // namespace
}  // namespace edgelm::kv
