#include <gtest/gtest.h>

#include "core/dtype.h"

namespace edgelm {
namespace {

TEST(DType, TraitsOfKnownTypes) {
  EXPECT_EQ(dtype_traits(DType::q8_0).type_size, 34u);
  EXPECT_EQ(dtype_traits(DType::q4_k).block_size, 256u);
  EXPECT_EQ(dtype_row_bytes(DType::q6_k, 512), 420u);
  EXPECT_EQ(dtype_row_bytes(DType::f16, 10), 20u);
  EXPECT_FALSE(dtype_traits(4u).has_value());   // Q4_2, removed from the format
  EXPECT_FALSE(dtype_traits(1000u).has_value());
  EXPECT_EQ(dtype_from_name("q4_k"), DType::q4_k);
  EXPECT_EQ(dtype_from_name("BF16"), DType::bf16);
  EXPECT_FALSE(dtype_from_name("q4").has_value());
}

}  // namespace
}  // namespace edgelm
