// Qwen3-VL / Qwen3.5 M-RoPE positions of a sequence that holds images.
//
// Job: the rotation position of each KV index of a sequence, from the images of its prompt. The
// K/V of token i always sits at KV index i (one slot per token); only the angle RoPE turns it by
// differs. As Hugging Face's Qwen3-VL get_rope_index defines it (and upstream llama.cpp's mtmd):
//  - an image of a merged grid gw x gh whose tokens (row-major: y, then x) start where the text
//    position would be s takes (t, h, w) = (s, s + y, s + x) for its token (y, x) (the fourth
//    section is 0 for every token);
//  - the text after it continues at s + max(gw, gh) (not s + gw * gh), so each image shifts every
//    later position by max(gw, gh) - gw * gh;
//  - a text token at KV index i after images k takes i + the shifts of the images before it in all
//    three sections.
// ModelConfig::rope_pair_section says which of t, h, w turns each rotary pair (RopeTable::apply).
//
// Invariants: the map is a pure function of the sequence's image list, so a prefix-cache hit,
// a state snapshot restore, a chunked prefill or a speculative verification computes the same
// positions for the same KV index as the request's first full prefill did. Images are in KV
// order, not overlapping, each gw * gh == n_tokens (mrope_check).
#pragma once

#include <cstdint>
#include <span>

#include "core/result.h"

namespace edgelm::model {

// A rotation position: the t, h and w sections' positions (all equal for text).
struct RopePos {
  int32_t t = 0, h = 0, w = 0;
  RopePos() = default;
  RopePos(int32_t pos) : t(pos), h(pos), w(pos) {}  // NOLINT: a text position is its own triple
  RopePos(int32_t t_, int32_t h_, int32_t w_) : t(t_), h(h_), w(w_) {}
  bool is_text() const { return t == h && h == w; }
  bool operator==(const RopePos&) const = default;
};

// An image of a sequence: KV indices [pos0, pos0 + n_tokens), a grid_w x grid_h merged grid.
struct MropeImage {
  int32_t pos0 = 0;
  int32_t n_tokens = 0;
  int32_t grid_w = 0;
  int32_t grid_h = 0;
  int32_t end() const { return pos0 + n_tokens; }
  // How much the image moves every later text position: max(gw, gh) - n_tokens (<= 0).
  int32_t shift() const { return (grid_w > grid_h ? grid_w : grid_h) - n_tokens; }
};

// The rotation position of KV index pos (>= 0) of a sequence with these images.
RopePos mrope_position(std::span<const MropeImage> images, int32_t pos);

// Error (naming the image) unless the images are in order, not overlapping, at positions >= 0,
// and each grid is positive with grid_w * grid_h == n_tokens.
Status mrope_check(std::span<const MropeImage> images);

}  // namespace edgelm::model
