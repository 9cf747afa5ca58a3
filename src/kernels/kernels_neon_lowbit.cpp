// NEON vec_dot for the low-bit formats: Q2_K and Q3_K (256-element super-blocks of 16 sub-blocks
// of 16, 2-bit quants), IQ4_XS (8 sub-blocks of 32 with 6-bit scales) and IQ4_NL (32-element
// blocks), both indices into the 16-value codebook, TQ2_0 and TQ1_0 (ternary, one scale per 256),
// MXFP4 (32-element blocks of E2M1 indices with an E8M0 exponent). Rows of the NEON tables in
// kernels_neon.cpp (kernels_neon_lowbit.h says which invariant they keep: bit-identical to the
// scalar rows).
//
// Methods: every quant is decoded to a signed byte in registers (2-bit fields by shift and mask,
// the high bit of Q3_K by vtstq_u8, the 16-entry codebooks of IQ4_* and MXFP4 by one vqtbl1q_s8
// per 16 indices, TQ1_0's base-3 digits by a byte multiply and a halving add), dotted with the
// activations 16 at a time (dotq: exact), scaled by the integer sub-block scales in int32 lanes,
// and the block's int32 sum enters the scalar kernel's float expression in its order.
//
// The bodies (kernels_neon_lowbit_body.h) are compiled twice, as gemm_neon.cpp does its GEMMs:
// baseline ARMv8.0 in namespace neon (dotq = vmull_s8 + vpadalq_s16), and under
// `#pragma GCC target("arch=armv8.2-a+dotprod")` in neon::dotprod (dotq = SDOT), the pragma on
// that code only; the dotprod rows are reached only through the dotprod and i8mm tables, which
// neon_kernels(level) hands out after the hwcaps check.
#include "kernels/kernels_neon_lowbit.h"

#if defined(EDGELM_HAVE_NEON_KERNELS) && defined(__aarch64__)

#include <arm_neon.h>

#include <cstring>

#include "kernels/kernels_neon_rows.h"
#include "kernels/quants_fp4.h"
#include "kernels/quants_iq4.h"
#include "kernels/quants_k.h"
#include "kernels/quants_legacy.h"
#include "kernels/quants_ternary.h"

namespace edgelm::kernels::neon {

#define EDGELM_NEON_DOT_LEVEL 0
#include "kernels/kernels_neon_lowbit_body.h"
#undef EDGELM_NEON_DOT_LEVEL

#pragma GCC push_options
#pragma GCC target("arch=armv8.2-a+dotprod")
namespace dotprod {
#define EDGELM_NEON_DOT_LEVEL 1
#include "kernels/kernels_neon_lowbit_body.h"
#undef EDGELM_NEON_DOT_LEVEL
}  // namespace dotprod
#pragma GCC pop_options

}  // namespace edgelm::kernels::neon

#endif  // EDGELM_HAVE_NEON_KERNELS && __aarch64__
