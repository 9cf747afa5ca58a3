#include "model/mrope.h"

namespace edgelm::model {

RopePos mrope_position(std::span<const MropeImage> images, int32_t pos) {
  int32_t shift = 0;  // of the images wholly before pos
  for (const MropeImage& im : images) {
    if (pos < im.pos0) break;
    if (pos < im.end()) {
      const int32_t s = im.pos0 + shift, j = pos - im.pos0;
      const int32_t y = j / im.grid_w, x = j % im.grid_w;
      return {s, s + y, s + x};
    }
    shift += im.shift();
  }
  return RopePos(pos + shift);
}

Status mrope_check(std::span<const MropeImage> images) {
  int64_t prev_end = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    const MropeImage& im = images[i];
    if (im.grid_w <= 0 || im.grid_h <= 0 || int64_t{im.grid_w} * im.grid_h != im.n_tokens)
      return make_error("image {}: a {} x {} grid does not hold its {} tokens", i, im.grid_w, im.grid_h, im.n_tokens);
    if (im.pos0 < prev_end)
      return make_error("image {} at KV index {} is out of order or overlaps the one before", i, im.pos0);
    prev_end = im.end();
  }
  return ok_status();
}

}  // namespace edgelm::model
