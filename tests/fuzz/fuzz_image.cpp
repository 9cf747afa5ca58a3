// libFuzzer: random bytes through decode_image (JPEG, PNG, WebP, EXIF), with tight limits so a
// forged header cannot make the fuzzer allocate much; a decoded image is checked for a
// consistent buffer, then resized (bicubic, lanczos, nearest) when small.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/check.h"
#include "media/decode.h"
#include "media/resize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  edgelm::media::DecodeLimits limits;
  limits.max_pixels = 1 << 20;
  limits.max_side = 4096;
  auto img = edgelm::media::decode_image(std::span<const uint8_t>(data, size), limits);
  if (!img.ok()) {
    EDGELM_CHECK(!img.error().message.empty(), "an error without a message");
    return 0;
  }
  EDGELM_CHECK(img->width >= 1 && img->height >= 1 && int64_t{img->width} * img->height <= limits.max_pixels,
               "decoded size out of the limits");
  EDGELM_CHECK(img->rgb.size() == static_cast<size_t>(img->width) * img->height * 3, "buffer size");
  if (int64_t{img->width} * img->height <= 4096) {
    const int w = 1 + static_cast<int>(size % 37), h = 1 + static_cast<int>(size % 23);
    for (auto f : {edgelm::media::ResizeFilter::bicubic, edgelm::media::ResizeFilter::lanczos,
                   edgelm::media::ResizeFilter::nearest}) {
      const auto out = edgelm::media::resize(*img, w, h, f);
      EDGELM_CHECK(out.rgb.size() == static_cast<size_t>(w) * h * 3, "resize buffer size");
    }
  }
  return 0;
}
