// What /v1/embeddings and /v1/rerank do around TextEncoder::encode() (embed/text_encoder.h):
// splitting a request's inputs into encode() calls under a token budget, Matryoshka truncation
// plus L2 normalization, and OpenAI's base64 encoding of a vector.
//
// Invariants: pure functions of their arguments; a batch split keeps the inputs' order and
// covers every input exactly once, and a vector's normalized form depends only on it (never on
// the other inputs of the request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace edgelm::serve {

// Consecutive ranges [begin, end) of inputs whose token counts sum to at most `budget`; an
// input larger than the budget alone is a range of its own. Empty when `sizes` is.
std::vector<std::pair<size_t, size_t>> split_by_token_budget(std::span<const size_t> sizes, size_t budget);

// The first `dims` values of `v` scaled to unit L2 norm (computed in double); all zeros stay
// zeros. dims must be in [1, v.size()].
std::vector<float> truncate_and_normalize(std::span<const float> v, size_t dims);

// Standard base64 (RFC 4648 alphabet, '=' padding) of `bytes`.
std::string base64_encode(std::string_view bytes);
// The base64 of `v` as little-endian IEEE float32 bytes: OpenAI's encoding_format "base64".
std::string floats_to_base64(std::span<const float> v);

}  // namespace edgelm::serve
