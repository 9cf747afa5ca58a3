// Tensor element types, numbered as in the GGUF format (ggml_type), and their storage traits.
//
// Block formats store `block_size` elements in `type_size` bytes; plain types have block 1.
// This table is a fact of the file format; the kernels for each type live in kernels/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace edgelm {

enum class DType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15,
  iq2_xxs = 16, iq2_xs = 17, iq3_xxs = 18, iq1_s = 19, iq4_nl = 20, iq3_s = 21, iq2_s = 22,
  iq4_xs = 23, i8 = 24, i16 = 25, i32 = 26, i64 = 27, f64 = 28, iq1_m = 29, bf16 = 30,
  tq1_0 = 34, tq2_0 = 35, mxfp4 = 39, nvfp4 = 40,
};

struct DTypeTraits {
  DType type;
  std::string_view name;  // as the GGUF ecosystem prints it, e.g. "Q4_K"
  uint32_t block_size;    // elements per block
  uint32_t type_size;     // bytes per block
};

// Traits of a raw GGUF type id, or nullopt for ids that no known format defines.
std::optional<DTypeTraits> dtype_traits(uint32_t raw_type);
const DTypeTraits& dtype_traits(DType type);

inline std::string_view dtype_name(DType type) { return dtype_traits(type).name; }

// Bytes of one row of n elements; n must be a multiple of the block size.
inline size_t dtype_row_bytes(DType type, int64_t n) {
  const DTypeTraits& t = dtype_traits(type);
  return static_cast<size_t>(n / t.block_size) * t.type_size;
}

// Case-insensitive lookup by name ("q8_0", "F16", ...).
std::optional<DType> dtype_from_name(std::string_view name);

}  // namespace edgelm
