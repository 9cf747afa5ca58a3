#include "kernels/dequantize.h"

#include <cstring>

#include "core/check.h"
#include "kernels/fp16.h"

namespace edgelm::kernels {

bool can_dequantize(DType type) { return type == DType::f32 || type == DType::f16 || type == DType::bf16; }

void to_float(DType type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case DType::f32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::f16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case DType::bf16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    default:
      EDGELM_CHECK(false, "to_float: unsupported type ", dtype_name(type));
  }
}

}  // namespace edgelm::kernels
