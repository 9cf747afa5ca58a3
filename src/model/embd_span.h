// Spans of supplied input embeddings (an image's soft tokens) inside a sequence.
//
// Job: a forward reads the input of a position inside a span from the span's rows instead of
// token_embd, and (unless the span is causal) those positions attend bidirectionally among
// themselves: a token of the span at position p attends to [0, pos0 + n_tokens) (a local layer:
// from its window's start, p - window + 1), not only up to p. That is how Gemma 3 attends over an
// image (the reference, llama.cpp's mtmd, decodes an image chunk with causal attention off, in
// one batch). A causal span (SmolVLM's image tiles: mtmd turns causal attention off only for the
// Gemma projectors) attends like text, up to p.
//
// Invariants:
//  - The rows are used as they are: the architecture's embedding scale (Gemma's sqrt(n_embd))
//    applies only to token_embd rows (as the reference does for raw embedding input).
//  - A forward that computes any position of a span computes every position of it from the
//    first one it computes to its end in the same call (earlier positions of the span may
//    already be in the KV); otherwise it is an error, never a silent causal fallback.
#pragma once

#include <cstdint>
#include <span>

namespace edgelm::model {

struct EmbdSpan {
  int32_t pos0 = 0;             // absolute position of the span's first token
  int32_t n_tokens = 0;         // positions [pos0, pos0 + n_tokens)
  const float* embd = nullptr;  // [n_tokens, n_embd] row-major; owned by the caller
  bool causal = false;          // attend up to each position (text-like), not to the span's end
  int32_t end() const { return pos0 + n_tokens; }
};

// The exclusive end of the positions a token of `span` (null: a text token) at pos attends to.
inline int32_t embd_span_attention_end(const EmbdSpan* span, int32_t pos) {
  return span != nullptr && !span->causal ? span->end() : pos + 1;
}

// The span of `spans` holding position pos, or null.
inline const EmbdSpan* embd_span_at(std::span<const EmbdSpan> spans, int32_t pos) {
  for (const EmbdSpan& s : spans)
    if (pos >= s.pos0 && pos < s.end()) return &s;
  return nullptr;
}

}  // namespace edgelm::model
