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
// Prefill runs the same rule in its chunked (WY / UT-transform) form (deltanet_chunked.cpp):
// within a chunk of kDeltaChunk tokens, cumulative log decays, a lower-triangular solve for the
// new values, and the chunk's outputs and state update as small matmuls. Its floats differ from
// the recurrent form's by reassociation (and the clamp applies once per chunk, not per token),
// so deltanet_rule() decides by absolute token position alone: the chunked form exactly for the
// whole chunks [k C, (k + 1) C) of positions that a run covers, the recurrent form for the
// partial head and tail. Two runs over the same positions split at the same multiples of C
// therefore compute the same floats; decode (n < C) is always recurrent. The engine keeps its
// runs on those multiples: prompt pieces end at one when the step budget reaches it
// (SchedulerOptions::prompt_align) and every snapshot boundary splits a run, taken or not.
//
// Invariants: float loops in one fixed order for a given ISA (the recurrent delta rule runs an
// AVX2 + FMA variant when kernels::active_isa() is avx2 or avxvnni and an AVX-512 one for avx512
// and amx, four state rows at a time; their fused multiply-adds and dot-product orders round
// differently from the portable loops and from each other: both forwards dispatch alike, so
// they still agree bit for bit on one machine and ISA); the functions touch only the channel or head
// range they are given, so disjoint ranges may run concurrently; nothing allocates.
#pragma once

#include <cstdint>

#include "kernels/ops_vector.h"
#include "model/arch.h"
#include "model/weights.h"

namespace edgelm::model {

// The convolution of channels [c0, c1) over n tokens, in place: x [n, row stride] (channel c
// of token t at x[t * stride + c]) becomes silu(conv); conv_state [d_conv - 1, conv_dim] (oldest
// input first) becomes the last d_conv - 1 inputs. w: [conv_dim, d_conv] taps, oldest first.
// ops: the SiLU's variant (the reference forward passes the scalar ops, the engine the active ones).
void deltanet_conv(const DeltaNetConfig& d, float* x, int64_t n, int64_t stride, float* conv_state, const float* w,
                   int64_t c0, int64_t c1, const kernels::VectorOps& ops);

// L2-normalizes every Q and K head of n tokens of mixed ([n, stride], after the convolution).
void deltanet_l2norm_qk(const DeltaNetConfig& d, float* mixed, int64_t n, int64_t stride, float eps);

// The gated delta rule of value heads [h0, h1) over n tokens: reads Q, K, V of mixed ([n,
// stride]), beta_raw and alpha ([n, n_v_heads] at row stride ba_stride), updates ssm_state
// ([n_v_heads, head_v_dim, head_k_dim]) and writes each head's output into out ([n, out_stride],
// head h at column h * head_v_dim), before the gated norm.
void deltanet_recur(const DeltaNetConfig& d, const LayerWeights& L, const float* mixed, int64_t n, int64_t stride,
                    const float* beta_raw, const float* alpha, int64_t ba_stride, float* ssm_state, float* out,
                    int64_t out_stride, int32_t h0, int32_t h1);

// The tokens of one chunk of the chunked form; runs are chunked at multiples of it from position 0.
constexpr int64_t kDeltaChunk = 64;

// deltanet_recur over the same arguments in the chunked form: n tokens (any n) in chunks of
// kDeltaChunk from the first, the last one possibly partial. Keeps a per-thread scratch that
// grows on first use.
void deltanet_chunked(const DeltaNetConfig& d, const LayerWeights& L, const float* mixed, int64_t n, int64_t stride,
                      const float* beta_raw, const float* alpha, int64_t ba_stride, float* ssm_state, float* out,
                      int64_t out_stride, int32_t h0, int32_t h1);

// The delta rule of a run whose first token is at absolute position pos0, as both forwards call
// it: deltanet_chunked over the whole aligned chunks of positions it covers, deltanet_recur over
// the tokens before the first and after the last.
void deltanet_rule(const DeltaNetConfig& d, const LayerWeights& L, const float* mixed, int64_t n, int64_t stride,
                   const float* beta_raw, const float* alpha, int64_t ba_stride, float* ssm_state, float* out,
                   int64_t out_stride, int32_t h0, int32_t h1, int64_t pos0);

// The gated RMSNorm of value heads [h0, h1) of n tokens, in place: out_h = rms_norm(out_h,
// ssm_norm) * silu(z_h). out, z: [n, value_dim] rows at out_stride / z_stride. ops: as for the
// convolution (its rms_norm and swiglu).
void deltanet_gate(const DeltaNetConfig& d, const LayerWeights& L, float* out, int64_t out_stride, const float* z,
                   int64_t z_stride, int64_t n, float eps, int32_t h0, int32_t h1, const kernels::VectorOps& ops);

}  // namespace edgelm::model
