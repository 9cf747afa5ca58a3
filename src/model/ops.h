// The small numeric operations of the forward pass, shared by the reference forward
// (forward.cpp) and the engine's batched forward over the paged KV cache (engine/batch_forward).
//
// Job: one definition of every per-token computation, so that two forward passes that call these
// on the same inputs produce bit-identical results; which is what lets the batched path be tested
// by memcmp against the reference.
//
// Invariants: every function is a plain float32 loop with one fixed order of operations
// (sequential sums in index order, no reassociation); none allocates; each touches only its
// arguments, so calls on disjoint outputs may run concurrently (except `linear`, which uses the
// pool and the scratch of its caller).
#pragma once

#include <cmath>
#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "model/arch.h"

namespace edgelm::model {

// Sees the input of every linear() / linear_many() product (`edgelm imatrix` collects x^2 per
// column with it). At most one is installed, process-wide; install it only while no forward pass
// runs, and only for single-threaded callers of the forward (the observer is called on the
// thread that calls linear). When none is installed the cost is one relaxed atomic load per call.
class LinearObserver {
 public:
  virtual ~LinearObserver() = default;
  // x: [n_tok, w.cols], the activations W is applied to.
  virtual void observe(const kernels::WeightMatrix& w, const float* x, int64_t n_tok) = 0;
};
// Installs `o` (null: none) and returns the previous one.
LinearObserver* set_linear_observer(LinearObserver* o);

// out[t, :] = W x[t, :] (+ bias) for t < n_tok. out: [n_tok, w.rows]; x: [n_tok, w.cols];
// bias: [w.rows] or null. Each output element depends only on its own row of x, not on n_tok.
void linear(float* out, const float* x, int64_t n_tok, const kernels::WeightMatrix& w, const float* bias,
            ThreadPool& pool, kernels::MatmulScratch& scratch);

// One output of linear_many: out [n_tok, w->rows] = W x (+ bias, [w->rows] or null).
struct LinearPart {
  const kernels::WeightMatrix* w;
  const float* bias;
  float* out;
};
// linear() of each part on the same x (kernels::matmul_many: one dispatch for the parts that
// share their activations); each output equals linear()'s. At most 8 parts.
void linear_many(std::span<const LinearPart> parts, const float* x, int64_t n_tok, ThreadPool& pool,
                 kernels::MatmulScratch& scratch);

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], for one row of n (sum of squares in double).
// out may alias x. weight null: no weights (Gemma 4's norm of V).
void rms_norm(float* out, const float* x, const float* weight, int64_t n, float eps);

// RoPE: model/rope_table.h (tables computed once per model).

// x * sigmoid(x), as x / (1 + e^-x).
float silu(float x);

// SwiGLU's product: gate[i] = silu(gate[i]) * up[i] for i < n.
void swiglu(float* gate, const float* up, int64_t n);

// GELU with the tanh approximation: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
float gelu_tanh(float x);

// GeGLU's product: gate[i] = gelu_tanh(gate[i]) * up[i] for i < n.
void geglu(float* gate, const float* up, int64_t n);

// Soft-capping: cap * tanh(x / cap) (cap > 0).
inline float soft_cap(float x, float cap);

// Gated attention's Q projection: qg [n_tok, n_head, 2 * head_dim] (each head's Q, then its
// gate) split into q and gate, each [n_tok, n_head * head_dim].
void split_q_gate(const float* qg, float* q, float* gate, int64_t n_tok, int32_t n_head, int64_t head_dim);

// The output gate: x[i] *= sigmoid(gate[i]) for i < n.
void sigmoid_gate(float* x, const float* gate, int64_t n);

// Residual add: x[i] += y[i] for i < n.
void add_inplace(float* x, const float* y, int64_t n);

// Softmax attention of one query head over n_pos key/value rows (positions [0, n_pos)):
// out = sum_p softmax_p(q . k_p * scale) v_p. q, out: [head_dim]; k, v: row p of head_dim floats
// at k + p * row_stride (the head's slice of a [n_pos, n_embd_kv] matrix); scores: [n_pos]
// scratch. Dot products, the softmax sum and the weighted sum run sequentially in index order.
// softcap > 0: each score s = q . k_p * scale becomes soft_cap(s, softcap) before the softmax.
void attention_head(const float* q, const float* k, const float* v, int64_t row_stride, int32_t n_pos, int64_t head_dim,
                    float scale, float* scores, float* out, float softcap = 0.0f);

inline float soft_cap(float x, float cap) { return cap * std::tanh(x / cap); }

}  // namespace edgelm::model
