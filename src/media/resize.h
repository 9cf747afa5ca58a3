// resize: PIL's Image.resize(size, resample=...) on RGB8 images, byte for byte (Pillow 9.4,
// box = whole image, reducing_gap = None, which is how the Hugging Face processors call it).
//
// The algorithm, as PIL documents and implements it:
//  - nearest: output (x, y) takes input (floor(sx), floor(sy)), sx running from scale/2 in steps
//    of scale = in/out (accumulated in double, as PIL's affine scaler does).
//  - the convolution filters: a separable pass over x, then one over y (only the rows the second
//    pass reads), each skipped when that dimension keeps its size. For output i the filter is
//    centred at (i + 0.5) * scale; when shrinking, its support is widened by the scale (the
//    antialiasing), and the taps are normalised to sum to 1, then converted to 22-bit fixed
//    point (PRECISION_BITS = 32 - 8 - 2) rounding half away from zero. Each pass rounds
//    (+ 1/2 in fixed point) and clamps to 0..255, so the intermediate image is 8-bit as in PIL.
//  - supports: box 0.5, bilinear 1, hamming 1, bicubic 2 (a = -0.5), lanczos 3 (sinc windowed
//    by sinc(x/3)).
// Deterministic: the taps come from the same double arithmetic as PIL's, so they are equal
// bit for bit on IEEE-754 doubles (tests/media compare against python3-pil).
#pragma once

#include "media/image.h"

namespace edgelm::media {

enum class ResizeFilter { nearest, box, bilinear, hamming, bicubic, lanczos };

const char* resize_filter_name(ResizeFilter filter);

// `image` resized to width x height (both >= 1; checked).
Image resize(const Image& image, int width, int height, ResizeFilter filter);

// The rectangle [x0, x0 + width) x [y0, y0 + height) of `image` (inside it; checked), as numpy
// slicing crops it.
Image crop(const Image& image, int x0, int y0, int width, int height);

}  // namespace edgelm::media
