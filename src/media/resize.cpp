#include "media/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <vector>

#include "core/check.h"

namespace edgelm::media {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

struct FilterDef {
  double (*fn)(double);
  double support;
};

double box_fn(double x) { return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0; }

double bilinear_fn(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

double hamming_fn(double x) {
  if (x < 0.0) x = -x;
  if (x == 0.0) return 1.0;
  if (x >= 1.0) return 0.0;
  x = x * std::numbers::pi;
  return std::sin(x) / x * (0.54 + 0.46 * std::cos(x));
}

double bicubic_fn(double x) {
  constexpr double a = -0.5;
  if (x < 0.0) x = -x;
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
  if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
  return 0.0;
}

double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * std::numbers::pi;
  return std::sin(x) / x;
}

double lanczos_fn(double x) { return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3) : 0.0; }

FilterDef filter_def(ResizeFilter f) {
  switch (f) {
    case ResizeFilter::box: return {box_fn, 0.5};
    case ResizeFilter::bilinear: return {bilinear_fn, 1.0};
    case ResizeFilter::hamming: return {hamming_fn, 1.0};
    case ResizeFilter::bicubic: return {bicubic_fn, 2.0};
    case ResizeFilter::lanczos: return {lanczos_fn, 3.0};
    case ResizeFilter::nearest: break;
  }
  EDGELM_CHECK(false, "no convolution filter for nearest");
  return {bilinear_fn, 1.0};
}

// The taps of one pass: output i reads inputs [first[i], first[i] + count[i]) with weights
// taps[i * ksize + j] in fixed point.
struct Taps {
  int ksize = 0;
  std::vector<int> first;  // [n_out]
  std::vector<int> count;  // [n_out]
  std::vector<int32_t> k;  // [n_out, ksize]
};

Taps make_taps(int in_size, int out_size, const FilterDef& filter) {
  const double scale = static_cast<double>(in_size) / out_size;
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = filter.support * filterscale;
  Taps t;
  t.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  t.first.resize(out_size);
  t.count.resize(out_size);
  t.k.assign(static_cast<size_t>(out_size) * t.ksize, 0);
  std::vector<double> w(t.ksize);
  const double ss = 1.0 / filterscale;
  for (int i = 0; i < out_size; ++i) {
    const double center = (i + 0.5) * scale;
    int lo = static_cast<int>(center - support + 0.5);
    if (lo < 0) lo = 0;
    int hi = static_cast<int>(center + support + 0.5);
    if (hi > in_size) hi = in_size;
    const int n = hi - lo;
    double sum = 0.0;
    for (int j = 0; j < n; ++j) {
      w[j] = filter.fn((j + lo - center + 0.5) * ss);
      sum += w[j];
    }
    for (int j = 0; j < n; ++j) {
      if (sum != 0.0) w[j] /= sum;
      const double v = w[j] * (1 << kPrecisionBits);
      t.k[static_cast<size_t>(i) * t.ksize + j] = static_cast<int32_t>(w[j] < 0 ? -0.5 + v : 0.5 + v);
    }
    t.first[i] = lo;
    t.count[i] = n;
  }
  return t;
}

inline uint8_t clip8(int32_t v) {
  const int32_t s = v >> kPrecisionBits;
  return static_cast<uint8_t>(s < 0 ? 0 : s > 255 ? 255 : s);
}

// [rows, out_w, 3] from rows [row0, row0 + rows) of `in`.
Image pass_horizontal(const Image& in, int out_w, int row0, int rows, const Taps& t) {
  Image out = make_image(out_w, rows);
  for (int y = 0; y < rows; ++y) {
    const uint8_t* src = in.pixel(0, row0 + y);
    uint8_t* dst = out.pixel(0, y);
    for (int x = 0; x < out_w; ++x) {
      const int32_t* k = &t.k[static_cast<size_t>(x) * t.ksize];
      const uint8_t* p = src + static_cast<size_t>(t.first[x]) * 3;
      int32_t s0 = 1 << (kPrecisionBits - 1), s1 = s0, s2 = s0;
      for (int j = 0; j < t.count[x]; ++j) {
        s0 += p[3 * j] * k[j];
        s1 += p[3 * j + 1] * k[j];
        s2 += p[3 * j + 2] * k[j];
      }
      dst[3 * x] = clip8(s0);
      dst[3 * x + 1] = clip8(s1);
      dst[3 * x + 2] = clip8(s2);
    }
  }
  return out;
}

// Vertical pass; tap positions are relative to row `row0` of the original, which is row 0 of `in`.
// Accumulates a whole output row tap by tap (integer sums: the order does not change them), so
// the inner loop runs along memory and vectorises.
Image pass_vertical(const Image& in, int out_h, int row0, const Taps& t) {
  Image out = make_image(in.width, out_h);
  const size_t stride = static_cast<size_t>(in.width) * 3;
  std::vector<int32_t> acc(stride);  // [width * 3] one output row in fixed point
  for (int y = 0; y < out_h; ++y) {
    const int32_t* k = &t.k[static_cast<size_t>(y) * t.ksize];
    const uint8_t* base = in.rgb.data() + static_cast<size_t>(t.first[y] - row0) * stride;
    std::fill(acc.begin(), acc.end(), int32_t{1} << (kPrecisionBits - 1));
    for (int j = 0; j < t.count[y]; ++j) {
      const uint8_t* src = base + j * stride;
      const int32_t kj = k[j];
      for (size_t c = 0; c < stride; ++c) acc[c] += src[c] * kj;
    }
    uint8_t* dst = out.pixel(0, y);
    for (size_t c = 0; c < stride; ++c) dst[c] = clip8(acc[c]);
  }
  return out;
}

Image resize_nearest(const Image& in, int w, int h) {
  // PIL's affine scaler: positions accumulate in double from half a step in.
  const double ax = static_cast<double>(in.width) / w;
  const double ay = static_cast<double>(in.height) / h;
  std::vector<int> xs(w);
  double xo = ax * 0.5;
  for (int x = 0; x < w; ++x, xo += ax) xs[x] = std::min(static_cast<int>(xo), in.width - 1);
  Image out = make_image(w, h);
  double yo = ay * 0.5;
  for (int y = 0; y < h; ++y, yo += ay) {
    const int sy = std::min(static_cast<int>(yo), in.height - 1);
    uint8_t* dst = out.pixel(0, y);
    for (int x = 0; x < w; ++x) std::memcpy(dst + 3 * x, in.pixel(xs[x], sy), 3);
  }
  return out;
}

}  // namespace

const char* resize_filter_name(ResizeFilter filter) {
  switch (filter) {
    case ResizeFilter::nearest: return "nearest";
    case ResizeFilter::box: return "box";
    case ResizeFilter::bilinear: return "bilinear";
    case ResizeFilter::hamming: return "hamming";
    case ResizeFilter::bicubic: return "bicubic";
    case ResizeFilter::lanczos: return "lanczos";
  }
  return "unknown";
}

Image resize(const Image& in, int width, int height, ResizeFilter filter) {
  EDGELM_CHECK(width >= 1 && height >= 1 && in.width >= 1 && in.height >= 1, "resize: empty size");
  EDGELM_CHECK(in.rgb.size() == static_cast<size_t>(in.width) * in.height * 3, "resize: bad image buffer");
  if (width == in.width && height == in.height) return in;
  if (filter == ResizeFilter::nearest) return resize_nearest(in, width, height);
  const FilterDef def = filter_def(filter);
  const bool need_h = width != in.width;
  const bool need_v = height != in.height;
  if (!need_v) return pass_horizontal(in, width, 0, in.height, make_taps(in.width, width, def));
  const Taps tv = make_taps(in.height, height, def);
  if (!need_h) return pass_vertical(in, height, 0, tv);
  // Only the rows the vertical pass reads go through the horizontal one.
  const int row0 = tv.first.front();
  const int row1 = tv.first.back() + tv.count.back();
  const Image tmp = pass_horizontal(in, width, row0, row1 - row0, make_taps(in.width, width, def));
  return pass_vertical(tmp, height, row0, tv);
}

Image crop(const Image& in, int x0, int y0, int width, int height) {
  EDGELM_CHECK(x0 >= 0 && y0 >= 0 && width >= 1 && height >= 1 && x0 + width <= in.width && y0 + height <= in.height,
               "crop outside the image");
  Image out = make_image(width, height);
  for (int y = 0; y < height; ++y) std::memcpy(out.pixel(0, y), in.pixel(x0, y0 + y), static_cast<size_t>(width) * 3);
  return out;
}

}  // namespace edgelm::media
