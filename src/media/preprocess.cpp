#include "media/preprocess.h"

#include <algorithm>

#include "core/check.h"

namespace edgelm::media {

ImageTensor image_to_tensor(const Image& image, const NormalizeParams& norm) {
  ImageTensor t{image.width, image.height, 3, {}};
  const size_t plane = static_cast<size_t>(image.width) * image.height;
  t.chw.resize(plane * 3);
  for (int c = 0; c < 3; ++c) {
    // numpy: (float32(float64(p) * factor) - float32(mean)) / float32(std), every step in float32
    float lut[256];
    for (int p = 0; p < 256; ++p) {
      const float scaled = static_cast<float>(static_cast<double>(p) * norm.rescale_factor);
      lut[p] = (scaled - norm.mean[c]) / norm.std[c];
    }
    float* dst = t.chw.data() + plane * c;
    for (size_t i = 0; i < plane; ++i) dst[i] = lut[image.rgb[3 * i + c]];
  }
  return t;
}

ImageTensor preprocess_gemma3(const Image& image, const Gemma3Params& params) {
  return image_to_tensor(resize(image, params.image_size, params.image_size, params.filter), params.norm);
}

std::array<int, 2> idefics3_longest_edge_size(int height, int width, int longest_edge, int max_image_size) {
  // _resize_output_size_rescale_to_max_len, in Python's double arithmetic and int() truncation.
  double aspect = static_cast<double>(width) / height;
  if (width >= height) {
    width = longest_edge;
    height = static_cast<int>(width / aspect);
    if (height % 2 != 0) ++height;
  } else {
    height = longest_edge;
    width = static_cast<int>(height * aspect);
    if (width % 2 != 0) ++width;
  }
  height = std::max(height, 1);
  width = std::max(width, 1);
  // _resize_output_size_scale_below_upper_bound
  aspect = static_cast<double>(width) / height;
  if (width >= height && width > max_image_size) {
    width = max_image_size;
    height = static_cast<int>(width / aspect);
  } else if (height > width && height > max_image_size) {
    height = max_image_size;
    width = static_cast<int>(height * aspect);
  }
  return {std::max(height, 1), std::max(width, 1)};
}

std::array<int, 2> idefics3_tile_multiple_size(int height, int width, int tile) {
  // resize_for_vision_encoder; math.ceil(a / b) * b on positive ints is an integer ceiling.
  const double aspect = static_cast<double>(width) / height;
  auto ceil_to = [tile](int v) { return (v + tile - 1) / tile * tile; };
  if (width >= height) {
    width = ceil_to(width);
    height = ceil_to(static_cast<int>(width / aspect));
  } else {
    height = ceil_to(height);
    width = ceil_to(static_cast<int>(height * aspect));
  }
  return {height, width};
}

TiledFrames idefics3_frames(const Image& image, const Idefics3Params& p) {
  EDGELM_CHECK(p.tile_size >= 1 && p.longest_edge >= 1, "idefics3: bad sizes");
  TiledFrames out;
  const auto [h1, w1] = idefics3_longest_edge_size(image.height, image.width, p.longest_edge, p.max_image_size);
  Image resized = resize(image, w1, h1, p.filter);
  if (!p.split) {
    out.frames.push_back(resize(resized, p.tile_size, p.tile_size, p.filter));
    return out;
  }
  const auto [h2, w2] = idefics3_tile_multiple_size(resized.height, resized.width, p.tile_size);
  resized = resize(resized, w2, h2, p.filter);
  if (resized.height > p.tile_size || resized.width > p.tile_size) {
    out.rows = (resized.height + p.tile_size - 1) / p.tile_size;
    out.cols = (resized.width + p.tile_size - 1) / p.tile_size;
    const int tile_h = (resized.height + out.rows - 1) / out.rows;
    const int tile_w = (resized.width + out.cols - 1) / out.cols;
    for (int r = 0; r < out.rows; ++r) {
      for (int c = 0; c < out.cols; ++c) {
        const int x0 = c * tile_w, y0 = r * tile_h;
        out.frames.push_back(
            crop(resized, x0, y0, std::min(tile_w, resized.width - x0), std::min(tile_h, resized.height - y0)));
      }
    }
    resized = resize(resized, p.tile_size, p.tile_size, p.filter);
  }
  out.frames.push_back(std::move(resized));
  return out;
}

TiledTensors preprocess_idefics3(const Image& image, const Idefics3Params& params) {
  TiledFrames frames = idefics3_frames(image, params);
  TiledTensors out{frames.rows, frames.cols, {}};
  out.frames.reserve(frames.frames.size());
  for (const Image& f : frames.frames) out.frames.push_back(image_to_tensor(f, params.norm));
  return out;
}

}  // namespace edgelm::media
