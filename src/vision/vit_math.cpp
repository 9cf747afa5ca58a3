#include "vision/vit_math.h"

#include "kernels/isa.h"
#include "vision/vit_math_isa.h"

// One copy of the loops per instruction set, chosen by the kernels' ISA (so EDGELM_ISA=scalar
// runs the baseline copy). Not GCC's target_clones: its ifunc resolvers run before the
// sanitizers' runtimes start, and a ThreadSanitizer build crashed at load.
namespace edgelm::vision {
namespace {

enum class Copy { generic, avx2, avx512 };

Copy pick() {
#if defined(EDGELM_VISION_AVX2)
  static const Copy c = [] {
    const kernels::Isa isa = kernels::active_isa();
    if (isa == kernels::Isa::avx512 || isa == kernels::Isa::amx) return Copy::avx512;
    if (isa == kernels::Isa::avx2 || isa == kernels::Isa::avxvnni) return Copy::avx2;
    return Copy::generic;
  }();
  return c;
#else
  return Copy::generic;
#endif
}

}  // namespace

#if defined(EDGELM_VISION_AVX2)
#define EDGELM_VIT_DISPATCH(fn, ...)                                  \
  switch (pick()) {                                                   \
    case Copy::avx512: return avx512::fn(__VA_ARGS__);                \
    case Copy::avx2: return avx2::fn(__VA_ARGS__);                    \
    case Copy::generic: break;                                        \
  }                                                                   \
  return generic::fn(__VA_ARGS__)
#else
#define EDGELM_VIT_DISPATCH(fn, ...) return generic::fn(__VA_ARGS__)
#endif

float exp_approx(float x) { EDGELM_VIT_DISPATCH(exp_approx, x); }

void activate(float* x, const float* bias, int64_t n, VisionActivation act) {
  EDGELM_VIT_DISPATCH(activate, x, bias, n, act);
}

void layer_norm(float* out, const float* x, const float* w, const float* b, int64_t n, float eps) {
  EDGELM_VIT_DISPATCH(layer_norm, out, x, w, b, n, eps);
}

void softmax_scaled(float* s, int64_t n, float scale) { EDGELM_VIT_DISPATCH(softmax_scaled, s, n, scale); }

#undef EDGELM_VIT_DISPATCH

}  // namespace edgelm::vision
