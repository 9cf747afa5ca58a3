// Sentence embeddings (POST /v1/embeddings, the semantic cache's "self" embedder): the mean over the input's tokens of
// the final hidden state after the output norm, L2-normalized.
//
// Computed by the reference forward (Model::forward with a hidden-state output) over a private
// KvCache.
#pragma once

#include <span>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace edgelm::engine {

// [n_embd] unit vector (all zeros if the pooled state is zero). Uses `pool` (not thread-safe:
// the caller serializes it with other users of the pool). Errors: no tokens, a token outside
// the vocabulary.
Result<std::vector<float>> embed_tokens(const model::Model& m, std::span<const model::TokenId> tokens,
                                        ThreadPool& pool);

}  // namespace edgelm::engine
