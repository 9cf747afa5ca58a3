#include "model/ple.h"

#include <cmath>

#include "model/ops.h"

namespace edgelm::model {

void ple_inputs(const ModelConfig& c, const Weights& w, const int32_t* tokens, const float* x0, int64_t n, float* out,
                float* row, ThreadPool& pool, kernels::MatmulScratch& scratch, const float* const* supplied) {
  const int64_t P = c.n_embd_ple, LP = int64_t{c.n_layer} * P;
  if (P == 0) return;
  linear(out, x0, n, w.ple_model_proj, nullptr, pool, scratch);  // [n, n_layer * P]
  const float proj_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd));
  const float tok_scale = std::sqrt(static_cast<float>(P));
  const float mix_scale = 1.0f / std::sqrt(2.0f);
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * LP;
    const bool raw = supplied != nullptr && supplied[t] != nullptr;
    kernels::get_row(w.ple_token_embd, raw ? 0 : tokens[t], row);
    const float row_scale = raw ? 1.0f : tok_scale;
    for (int64_t i = 0; i < LP; ++i) o[i] *= proj_scale;
    for (int32_t l = 0; l < c.n_layer; ++l) rms_norm(o + l * P, o + l * P, w.ple_proj_norm, P, c.rms_eps);
    for (int64_t i = 0; i < LP; ++i) o[i] = (o[i] + row[i] * row_scale) * mix_scale;
  }
}

void ple_layer(const ModelConfig& c, const LayerWeights& L, int32_t l, float* x, const float* ple, int64_t n,
               float* gate, float* proj, ThreadPool& pool, kernels::MatmulScratch& scratch) {
  const int64_t E = c.n_embd, P = c.n_embd_ple, LP = int64_t{c.n_layer} * P;
  if (P > 0) {
    linear(gate, x, n, L.ple_gate, nullptr, pool, scratch);  // [n, P]
    for (int64_t t = 0; t < n; ++t) geglu(gate + t * P, ple + t * LP + l * P, P);
    linear(proj, gate, n, L.ple_proj, nullptr, pool, scratch);  // [n, E]
    for (int64_t t = 0; t < n; ++t) rms_norm(proj + t * E, proj + t * E, L.ple_post_norm, E, c.rms_eps);
    add_inplace(x, proj, n * E);
  }
  if (L.out_scale != nullptr)
    for (int64_t i = 0; i < n * E; ++i) x[i] *= L.out_scale[0];
}

}  // namespace edgelm::model
