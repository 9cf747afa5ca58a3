#include "kernels/dequantize.h"

#include "core/check.h"
#include "kernels/quant_traits.h"

namespace edgelm::kernels {

bool can_dequantize(DType type) {
  const QuantTraits* t = quant_traits(type);
  return t != nullptr && t->to_float != nullptr;
}

void to_float(DType type, const void* src, float* dst, int64_t n) {
  const QuantTraits* t = quant_traits(type);
  EDGELM_CHECK(t != nullptr && t->to_float != nullptr, "to_float: unsupported type ", dtype_name(type));
  t->to_float(src, dst, n);
}

}  // namespace edgelm::kernels
