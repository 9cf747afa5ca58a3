// Sentence embeddings for POST /v1/embeddings: the mean over the input's tokens of the final
// hidden state after the output norm, L2-normalized.
//
// Computed by a copy of the reference forward (model/forward.cpp) over a private KvCache that
// keeps every token's final hidden state instead of projecting the last one to logits; it uses
// the same ops (model/ops.h), so its hidden states match the reference forward's.
#pragma once

#include <span>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "model/model.h"

namespace edgelm::serve {

// [n_embd] unit vector (all zeros if the pooled state is zero). Uses `pool` (not thread-safe:
// the caller serializes it with other users of the pool). Errors: no tokens, a token outside
// the vocabulary.
Result<std::vector<float>> embed_tokens(const model::Model& m, std::span<const model::TokenId> tokens,
                                        ThreadPool& pool);

}  // namespace edgelm::serve
