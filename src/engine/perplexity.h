// Perplexity of a model over a text, scored the way llama.cpp's `llama-perplexity` scores it, so
// that the two engines' figures on one file and one text can be compared directly.
//
// Job: the text's tokens (tokenized with the vocabulary's BOS rule) are cut into
// n_chunks = n_tokens / n_ctx consecutive chunks of n_ctx tokens (the rest is dropped); each
// chunk runs from an empty cache, its first token replaced by BOS when the vocabulary adds one;
// only the second half of each chunk is scored: the logits at positions j in
// [n_ctx / 2, n_ctx - 1) predict token j + 1. PPL = exp(mean NLL) over all scored positions;
// its error is PPL * the standard error of the mean NLL. The scoring rule is the published
// behaviour of llama-perplexity's default mode (no code of it is used).
//
// Runs on the engine's batched forward (engine/batch_forward.h) over a private paged KV store
// (identity block table, one sequence) and, for hybrid models, one recurrent-state slot: each
// chunk's first half runs in steps of n_batch tokens without logits, the scored half in steps of
// kLogitStep tokens, so the logits buffer stays [kLogitStep, n_vocab] even for 248k-token
// vocabularies. Steps start at multiples of model::kDeltaChunk, as the engine's prefill does.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "kv/kv_store.h"
#include "model/model.h"

namespace edgelm::engine {

struct PerplexityOptions {
  int32_t n_ctx = 512;      // chunk size (llama-perplexity -c)
  int32_t n_batch = 512;    // tokens per forward step in the unscored half (-b)
  int32_t max_chunks = 0;   // 0: all (--chunks)
  kv::KvType kv_type = kv::KvType::f16;
  int32_t bos = -1;         // the token that replaces each chunk's first token; < 0: none
  // Called after each chunk with its 1-based index, the chunk count and the running PPL.
  std::function<void(int32_t chunk, int32_t n_chunks, double ppl)> on_chunk;
};

struct PerplexityResult {
  int32_t n_chunks = 0;
  int64_t n_scored = 0;  // positions scored: n_chunks * (n_ctx - 1 - n_ctx / 2)
  double ppl = 0.0;
  double ppl_error = 0.0;                 // PPL * standard error of the mean NLL
  std::vector<double> running_ppl;        // after each chunk
};

// Errors: n_ctx < 4 or beyond the model's positions limit, n_batch < 1, fewer tokens than one
// chunk (the message says how many are needed), forward errors.
Result<PerplexityResult> perplexity(const model::Model& m, std::span<const int32_t> tokens,
                                    const PerplexityOptions& options, ThreadPool& pool);

}  // namespace edgelm::engine
