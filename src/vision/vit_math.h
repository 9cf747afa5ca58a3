// Element-wise math of the vision encoder: a vectorisable exp, the ViT activations built on it,
// LayerNorm, and the softmax of one row of attention scores.
//
// Job: the ViT runs each of these over millions of elements per layer (softmax over 4096 x 4096
// scores per head for Gemma 3), where std::exp / std::tanh per element would cost as much as
// the matmuls. exp_approx is a branch-free range reduction plus a degree-7 polynomial that the
// compiler vectorises with the baseline ISA; its relative error is a few float ulp.
//
// Invariants: none allocates; every function touches only its arguments (calls on disjoint
// rows may run concurrently); out may alias x.
#pragma once

#include <cstdint>

#include "vision/clip_config.h"

namespace edgelm::vision {

// e^x for x <= 80 (a few ulp; above, e^80); x below -87 gives e^-87 (about 1.6e-38) instead of less.
float exp_approx(float x);

// x[i] = act(x[i] + bias[i]) for i < n (bias may be null). gelu_tanh is evaluated as
// x / (1 + e^(-2 sqrt(2/pi) (x + 0.044715 x^3))), which equals 0.5 x (1 + tanh(...)).
void activate(float* x, const float* bias, int64_t n, VisionActivation act);

// out = (x - mean) / sqrt(var + eps) * w + b over one row of n (mean and biased variance in
// double, as ggml_norm sums in ggml_float).
void layer_norm(float* out, const float* x, const float* w, const float* b, int64_t n, float eps);

// s[i] = softmax_i(s * scale) over one row of n scores.
void softmax_scaled(float* s, int64_t n, float scale);

}  // namespace edgelm::vision
