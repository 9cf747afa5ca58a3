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

}  // namespace edgelm::media
