// The per-format decoders behind decode_image (decode.h); internal to the media layer.
//
// Each one checks the header's dimensions with check_image_dimensions before allocating the
// pixels, returns the image as stored (not yet rotated) and the raw EXIF payload it carries
// (with or without the "Exif\0\0" prefix; empty if none) for decode_image to apply.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "media/decode.h"
#include "media/image.h"

namespace edgelm::media::detail {

struct DecodedImage {
  Image image;
  std::vector<uint8_t> exif;
  std::vector<uint8_t> raw_profile_exif;  // PNG "Raw profile type exif" text, used without eXIf
  int xmp_orientation = 0;                // PNG XMP tiff:Orientation, used when the EXIF has none
};

Result<DecodedImage> decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits);
Result<DecodedImage> decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits);
Result<DecodedImage> decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits);

}  // namespace edgelm::media::detail
