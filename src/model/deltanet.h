// The Gated DeltaNet linear attention of hybrid models (qwen35): the per-sequence recurrence
// that replaces softmax attention in three of every four layers, shared by the reference
// forward (forward.cpp) and the engine's batched forward, which call these on the same inputs
// and so compute bit-identical states and outputs.
//
// One layer, one sequence, a run of n tokens in order (the projections are done by the caller,
// as matmuls over all tokens):
//   mixed = attn_qkv(x)  [n, conv_dim]: Q (n_k_heads x head_k_dim), K (same), V (n_v_heads x head_v_dim)
//   conv:   mixed <- silu(causal depthwise convolution of d_conv taps over the channel's last
//           d_conv - 1 inputs (the conv state) and the current one); the state keeps the newest
//   Q, K:   each head L2-normalized (x / max(|x|, eps), eps = the model's rms eps)
//   per value head h (its Q/K head h % n_k_heads), with g = softplus(alpha + dt_bias) * a,
//   decay = exp(min(g, 50)), beta = sigmoid(beta_raw), scale = 1 / sqrt(head_k_dim), and the
//   state S [head_v_dim rows, head_k_dim cols]:
//           v_new = beta * (v - decay * S k)
//           out   = decay * (S q) * scale + v_new * (k . q * scale)
//           S     = clamp(decay * S + v_new k^T, -1e6, 1e6)
//   then out is RMS-normed per head with ssm_norm and multiplied by silu(z), z = attn_gate(x),
//   and projected by ssm_out (caller).
//
// Invariants: float loops in one fixed order for a given ISA (the delta rule runs an AVX2 + FMA
// variant when kernels::active_isa() is an x86 SIMD one, whose fused multiply-adds round
// differently from the portable loops: both forwards dispatch alike, so they still agree
// bit for bit on one machine and ISA); the functions touch only the channel or head
// range they are given, so disjoint ranges may run concurrently; nothing allocates.
#pragma once

#include <cstdint>

#include "model/arch.h"
#include "model/weights.h"

namespace edgelm::model {

// The convolution of channels [c0, c1) over n tokens, in place: x [n, row stride] (channel c
// of token t at x[t * stride + c]) becomes silu(conv); conv_state [d_conv - 1, conv_dim] (oldest
// input first) becomes the last d_conv - 1 inputs. w: [conv_dim, d_conv] taps, oldest first.
void deltanet_conv(const DeltaNetConfig& d, float* x, int64_t n, int64_t stride, float* conv_state, const float* w,
                   int64_t c0, int64_t c1);

// L2-normalizes every Q and K head of n tokens of mixed ([n, stride], after the convolution).
void deltanet_l2norm_qk(const DeltaNetConfig& d, float* mixed, int64_t n, int64_t stride, float eps);

// The gated delta rule of value heads [h0, h1) over n tokens: reads Q, K, V of mixed ([n,
// stride]), beta_raw and alpha ([n, n_v_heads] at row stride ba_stride), updates ssm_state
// ([n_v_heads, head_v_dim, head_k_dim]) and writes each head's output into out ([n, out_stride],
// head h at column h * head_v_dim), before the gated norm.
void deltanet_recur(const DeltaNetConfig& d, const LayerWeights& L, const float* mixed, int64_t n, int64_t stride,
                    const float* beta_raw, const float* alpha, int64_t ba_stride, float* ssm_state, float* out,
                    int64_t out_stride, int32_t h0, int32_t h1);

// The gated RMSNorm of value heads [h0, h1) of n tokens, in place: out_h = rms_norm(out_h,
// ssm_norm) * silu(z_h). out, z: [n, value_dim] rows at out_stride / z_stride.
void deltanet_gate(const DeltaNetConfig& d, const LayerWeights& L, float* out, int64_t out_stride, const float* z,
                   int64_t z_stride, int64_t n, float eps, int32_t h0, int32_t h1);

}  // namespace edgelm::model
