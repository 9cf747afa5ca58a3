// The Hugging Face image processors of the vision encoders, on decoded RGB8 images: the same
// resizes (PIL's, see resize.h), crops and tiling, then rescale and normalise to CHW floats.
//
// Numerics follow the slow (PIL + numpy) processors exactly: resizes are 8-bit PIL resizes;
// rescale is float64(pixel) * rescale_factor cast to float32; normalise is (x - mean) / std in
// float32 (transformers' image_transforms.rescale / normalize). The outputs equal the
// processors' `pixel_values` bit for bit (tests/media/pil_oracle.py is the oracle).
// The sizes, mean and std are parameters: they come from the mmproj GGUF (clip.vision.image_size,
// clip.vision.image_mean, clip.vision.image_std), so other encoders reuse the pieces.
#pragma once

#include <array>
#include <vector>

#include "core/result.h"
#include "media/image.h"
#include "media/resize.h"

namespace edgelm::media {

struct NormalizeParams {
  double rescale_factor = 1.0 / 255.0;
  std::array<float, 3> mean = {0.5f, 0.5f, 0.5f};
  std::array<float, 3> std = {0.5f, 0.5f, 0.5f};
};

// [3, height, width]: ((float)(pixel * rescale_factor) - mean[c]) / std[c].
ImageTensor image_to_tensor(const Image& image, const NormalizeParams& norm);

// Gemma 3 (SigLIP), Gemma3ImageProcessor: a square resize to image_size with PIL bilinear, no
// crop, no pan-and-scan (its default).
struct Gemma3Params {
  int image_size = 896;
  ResizeFilter filter = ResizeFilter::bilinear;
  NormalizeParams norm;
};
ImageTensor preprocess_gemma3(const Image& image, const Gemma3Params& params);

// Idefics3 / SmolVLM, Idefics3ImageProcessor with do_image_splitting:
//  1. resize so the longest side is longest_edge (up or down; the other side int(side * ratio),
//     rounded up to even), then capped at max_image_size (4096) the same way;
//  2. resize up to multiples of tile_size (the aspect kept as the processor computes it);
//  3. if larger than one tile: rows x cols tiles of tile_size, row-major, then the whole image
//     resized to tile_size x tile_size (the global view); else the image alone, rows = cols = 0.
// Without splitting: one image resized to tile_size x tile_size, rows = cols = 0.
// SmolVLM-256M/500M: longest_edge 2048, tile_size 512. All resizes with PIL's lanczos.
struct Idefics3Params {
  int longest_edge = 4 * 512;
  int tile_size = 512;
  int max_image_size = 4096;
  bool split = true;
  ResizeFilter filter = ResizeFilter::lanczos;
  NormalizeParams norm;
};

// The frames as 8-bit images: rows * cols tiles (row-major) then the global image.
struct TiledFrames {
  int rows = 0;
  int cols = 0;
  std::vector<Image> frames;
};
TiledFrames idefics3_frames(const Image& image, const Idefics3Params& params);

struct TiledTensors {
  int rows = 0;
  int cols = 0;
  std::vector<ImageTensor> frames;  // same order as TiledFrames
};
TiledTensors preprocess_idefics3(const Image& image, const Idefics3Params& params);

// The processor's size arithmetic, exposed for tests and for token counting before decoding.
// Sizes are {height, width}.
std::array<int, 2> idefics3_longest_edge_size(int height, int width, int longest_edge, int max_image_size);
std::array<int, 2> idefics3_tile_multiple_size(int height, int width, int tile_size);

// Qwen2-VL / Qwen3-VL / Qwen3.5, Qwen2VLImageProcessor (the slow processor Qwen3-VL's fast one
// mirrors): smart_resize to multiples of factor = patch_size * merge_size, then one PIL bicubic
// resize, rescale and normalise (the temporal duplication to 2 frames is the encoder's, see
// vision/vit.h). smart_resize(height, width): an aspect ratio over 200 is an error; h = round(height
// / factor) * factor (Python's round: half to even), likewise w; if h * w > max_pixels, beta =
// sqrt(height * width / max_pixels), h = max(factor, floor(height / beta / factor) * factor),
// likewise w; else if h * w < min_pixels, beta = sqrt(min_pixels / (height * width)),
// h = ceil(height * beta / factor) * factor, likewise w. Qwen3.5 / Qwen3-VL's
// preprocessor_config.json: patch 16, merge 2, shortest_edge (min_pixels) 65536, longest_edge
// (max_pixels) 16777216, mean = std = 0.5. The encoder takes at most 4096 merged tokens, so a
// server passes max_pixels = 4096 * factor^2 (as ik_llama.cpp's clip.cpp caps Qwen-VL images).
struct QwenVlParams {
  int patch_size = 16;
  int merge_size = 2;
  int64_t min_pixels = 65536;
  int64_t max_pixels = 16777216;
  ResizeFilter filter = ResizeFilter::bicubic;
  NormalizeParams norm;
};
// {height, width}; error: a side < 1, an aspect ratio over 200, or min_pixels > max_pixels.
Result<std::array<int, 2>> qwen_vl_smart_resize(int height, int width, int factor, int64_t min_pixels,
                                                int64_t max_pixels);
// The resized, normalised image [3, h, w] (h, w from qwen_vl_smart_resize).
Result<ImageTensor> preprocess_qwen_vl(const Image& image, const QwenVlParams& params);

}  // namespace edgelm::media
