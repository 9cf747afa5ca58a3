// Gemma 4's per-layer embeddings (PLE), shared by the reference forward (forward.cpp) and the
// engine's batched forward.
//
// Job: give every layer l of a token a [n_embd_ple] input and add its gated projection to the
// residual after the layer's FFN:
//   inputs:  ple[t, l] = (rms_norm(per_layer_model_proj x0[t] / sqrt(n_embd))[l], per_layer_proj_norm)
//                         + per_layer_token_embd[token t][l] * sqrt(n_embd_ple)) / sqrt(2)
//            x0 = the token's embedding already scaled by sqrt(n_embd); [l] the layer's slice.
//   A position whose input is a supplied row (an image's soft token, embd_span.h) has no token:
//            its x0 is the row as supplied and its table part is per_layer_token_embd[0][l]
//            unscaled (the padding token's row, as the reference, llama.cpp's gemma4 graph, feeds
//            raw embedding input; HF's Gemma 4 also uses the padding token's row there but scaled
//            by sqrt(n_embd_ple): see README).
//   layer l: x += rms_norm(proj(gelu_tanh(inp_gate(x)) * ple[t, l]), post_norm)
//            then x *= layer_output_scale (when the file has it; it scales the whole layer output).
//
// Invariants: per_layer_token_embd is read one row per token from the file mapping in its
// stored type (kernels::get_row), never converted whole; each token's result depends only on
// its own row (so batched and single-sequence runs agree); nothing allocates.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "model/arch.h"
#include "model/weights.h"

namespace edgelm::model {

// out [n, n_layer * n_embd_ple] = the per-layer inputs of n tokens (token ids `tokens`, their
// scaled embeddings x0 [n, n_embd]); row: [n_layer * n_embd_ple] scratch (one table row).
// supplied: null, or per token non-null where its input is a supplied row (see above).
void ple_inputs(const ModelConfig& c, const Weights& w, const int32_t* tokens, const float* x0, int64_t n, float* out,
                float* row, ThreadPool& pool, kernels::MatmulScratch& scratch,
                const float* const* supplied = nullptr);

// Layer l's PLE residual and output scale on x [n, n_embd] in place. ple: ple_inputs' [n,
// n_layer * n_embd_ple]; gate: [n, n_embd_ple] and proj: [n, n_embd] scratch. Without PLE only
// the output scale applies.
void ple_layer(const ModelConfig& c, const LayerWeights& L, int32_t l, float* x, const float* ple, int64_t n,
               float* gate, float* proj, ThreadPool& pool, kernels::MatmulScratch& scratch);

}  // namespace edgelm::model
