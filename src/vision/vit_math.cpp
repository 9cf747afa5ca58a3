#include "vision/vit_math.h"

#include "kernels/isa.h"
#include "vision/vit_math_isa.h"

// One copy of the loops per instruction set, chosen by the kernels' ISA (so EDGELM_ISA=scalar
// runs the baseline copy). Not GCC's target_clones: its ifunc resolvers run before the
// sanitizers' runtimes start, and a ThreadSanitizer build crashed at load.
namespace edgelm::vision {
namespace {

bool use_avx2() {
#if defined(EDGELM_VISION_AVX2)
  static const bool yes = [] {
    const kernels::Isa isa = kernels::active_isa();
    return isa == kernels::Isa::avx2 || isa == kernels::Isa::avxvnni || isa == kernels::Isa::avx512 ||
           isa == kernels::Isa::amx;
  }();
  return yes;
#else
  return false;
#endif
}

}  // namespace

float exp_approx(float x) { return use_avx2() ? avx2::exp_approx(x) : generic::exp_approx(x); }

void activate(float* x, const float* bias, int64_t n, VisionActivation act) {
  use_avx2() ? avx2::activate(x, bias, n, act) : generic::activate(x, bias, n, act);
}

void layer_norm(float* out, const float* x, const float* w, const float* b, int64_t n, float eps) {
  use_avx2() ? avx2::layer_norm(out, x, w, b, n, eps) : generic::layer_norm(out, x, w, b, n, eps);
}

void softmax_scaled(float* s, int64_t n, float scale) {
  use_avx2() ? avx2::softmax_scaled(s, n, scale) : generic::softmax_scaled(s, n, scale);
}

}  // namespace edgelm::vision
