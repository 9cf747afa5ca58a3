#include "media/preprocess.h"

#include <algorithm>
#include <cfenv>
#include <cmath>

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

Result<std::array<int, 2>> qwen_vl_smart_resize(int height, int width, int factor, int64_t min_pixels,
                                                int64_t max_pixels) {
  if (height < 1 || width < 1 || factor < 1) return make_error("image of {} x {} px has no pixels", width, height);
  if (min_pixels > max_pixels)
    return make_error("min_pixels {} is larger than max_pixels {}", min_pixels, max_pixels);
  const double h = height, w = width, f = factor;
  if (std::max(h, w) / std::min(h, w) > 200)
    return make_error("image of {} x {} px has an aspect ratio over 200", width, height);
  // Python's round(): half to even, which nearbyint gives in the default rounding mode.
  auto round_even = [](double v) {
    const int saved = std::fegetround();
    std::fesetround(FE_TONEAREST);
    const double r = std::nearbyint(v);
    std::fesetround(saved);
    return r;
  };
  double hb = round_even(h / f) * f, wb = round_even(w / f) * f;
  if (hb * wb > static_cast<double>(max_pixels)) {
    const double beta = std::sqrt(h * w / static_cast<double>(max_pixels));
    hb = std::max(f, std::floor(h / beta / f) * f);
    wb = std::max(f, std::floor(w / beta / f) * f);
  } else if (hb * wb < static_cast<double>(min_pixels)) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    hb = std::ceil(h * beta / f) * f;
    wb = std::ceil(w * beta / f) * f;
  }
  if (hb > 1 << 30 || wb > 1 << 30) return make_error("image of {} x {} px resizes too large", width, height);
  return std::array<int, 2>{static_cast<int>(hb), static_cast<int>(wb)};
}

Result<ImageTensor> preprocess_qwen_vl(const Image& image, const QwenVlParams& params) {
  EDGELM_TRY(const auto hw, qwen_vl_smart_resize(image.height, image.width, params.patch_size * params.merge_size,
                                                 params.min_pixels, params.max_pixels));
  if (hw[0] == image.height && hw[1] == image.width) return image_to_tensor(image, params.norm);
  return image_to_tensor(resize(image, hw[1], hw[0], params.filter), params.norm);
}

}  // namespace edgelm::media
