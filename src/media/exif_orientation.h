// EXIF orientation: reading tag 0x0112 of IFD0 (libexif) and turning the stored pixels upright
// as PIL's ImageOps.exif_transpose does.
//
// Values and the transposition PIL applies for each (1 and anything outside 1..8: unchanged):
//   2 mirror left-right   3 rotate 180        4 mirror top-bottom   5 transpose (swap x, y)
//   6 rotate 90 clockwise 7 transverse        8 rotate 90 counter-clockwise
// 5..8 swap width and height.
#pragma once

#include <cstdint>
#include <span>

#include "media/image.h"

namespace edgelm::media {

// The orientation in an EXIF payload (a TIFF structure, with or without the "Exif\0\0" prefix
// of a JPEG APP1 segment); 0 when there is none or the payload cannot be parsed.
int exif_orientation(std::span<const uint8_t> exif);

// The image turned upright for that orientation value.
Image apply_exif_orientation(Image image, int orientation);

}  // namespace edgelm::media
