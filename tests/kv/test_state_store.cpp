// StateStore (kv/state_store.h): slots zeroed on acquire and reset, distinct memory per slot,
// reuse after release, load(); a slot of at least a huge page in a 2 MiB-aligned HugePageBuffer
// (Qwen3.5-0.8B's 18 MB slots: streamed in and out by every decode step), a smaller one on the
// heap. Both sizes run the same checks.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/huge_pages.h"
#include "kv/state_store.h"

namespace edgelm::kv {
namespace {

// 3 recurrent layers (every 4th attends); heads x dims set the slot size.
model::ModelConfig hybrid(int32_t heads, int32_t dim) {
  model::ModelConfig c;
  c.n_layer = 4;
  c.deltanet = {4, 4, heads, heads, dim, dim};
  return c;
}

class StateStoreSizes : public ::testing::TestWithParam<std::pair<int32_t, int32_t>> {};

TEST_P(StateStoreSizes, SlotsAreZeroedDistinctAndReused) {
  const auto [heads, dim] = GetParam();
  StateStore s(hybrid(heads, dim));
  ASSERT_TRUE(s.enabled());
  const int64_t n = s.slot_floats();
  ASSERT_EQ(s.slot_bytes(), static_cast<size_t>(n) * sizeof(float));
  const bool huge = s.slot_bytes() >= HugePageBuffer::kHugePage;
  const int32_t a = s.acquire(), b = s.acquire();
  ASSERT_NE(a, b);
  for (const int32_t slot : {a, b}) {
    if (huge) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(s.data(slot)) % HugePageBuffer::kHugePage, 0u);
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(s.data(slot)[i], 0.0f) << slot << " " << i;
    EXPECT_EQ(s.n_tokens(slot), 0);
  }
  for (int64_t i = 0; i < n; ++i) {
    s.data(a)[i] = static_cast<float>(i % 1000);
    s.data(b)[i] = -1.0f;
  }
  for (int64_t i = 0; i < n; i += 997) ASSERT_EQ(s.data(a)[i], static_cast<float>(i % 1000)) << i;
  EXPECT_EQ(s.conv(a, 1), s.data(a) + s.layer_floats());
  EXPECT_EQ(s.ssm(a, 2), s.data(a) + 2 * s.layer_floats() + s.conv_floats());
  // A released slot comes back zeroed, at the same memory.
  float* const mem_b = s.data(b);
  s.release(b);
  EXPECT_FALSE(s.valid(b));
  const int32_t c = s.acquire();
  EXPECT_EQ(c, b);
  EXPECT_EQ(s.data(c), mem_b);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(s.data(c)[i], 0.0f) << i;
  // load() takes a whole state and a position.
  std::vector<float> src(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) src[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i % 77);
  s.load(c, src.data(), 42);
  EXPECT_EQ(s.n_tokens(c), 42);
  for (int64_t i = 0; i < n; i += 13) ASSERT_EQ(s.data(c)[i], src[static_cast<size_t>(i)]) << i;
  EXPECT_EQ(s.n_bytes(), 2 * s.slot_bytes());
  s.reset(a);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(s.data(a)[i], 0.0f) << i;
}

// 4 heads of 8 (a few KB: the heap) and 16 heads of 128 (Qwen3.5-0.8B's layers: 3.2 MB, huge pages).
INSTANTIATE_TEST_SUITE_P(Sizes, StateStoreSizes,
                         ::testing::Values(std::pair{4, 8}, std::pair{16, 128}),
                         [](const auto& info) { return info.param.first == 4 ? std::string("heap") : std::string("huge"); });

}  // namespace
}  // namespace edgelm::kv
