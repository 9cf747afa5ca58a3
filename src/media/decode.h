// decode_image: encoded bytes (JPEG, PNG, WebP) -> an upright RGB8 Image, exactly as the Hugging
// Face loaders see it: `ImageOps.exif_transpose(Image.open(f)).convert("RGB")` in python3-pil
// (Debian's Pillow 9.4, decoding with the same libjpeg-turbo and libwebp).
//
// What "exactly" means, per format (tests/media compare every case byte for byte with PIL):
//  - JPEG: libjpeg-turbo with its defaults (JDCT_ISLOW, fancy upsampling, block smoothing), as
//    PIL uses it. Grayscale is replicated to RGB; CMYK and YCCK are read as Adobe-inverted CMYK
//    and converted with PIL's formula (r = (255-k) - (255-k)*c/255, rounded as PIL rounds).
//  - PNG: grey 1/2/4-bit scaled to 8, palettes expanded, 16-bit colour keeps the high byte,
//    16-bit grey is clipped to 255 (PIL opens it as mode "I" and convert("RGB") saturates),
//    alpha and tRNS are dropped without compositing, Adam7 interlace handled.
//  - WebP: lossy, lossless, with alpha (dropped, RGB not premultiplied), animated (first frame).
//  - EXIF orientation (JPEG APP1 "Exif", PNG eXIf, WebP EXIF chunk; IFD0 tag 0x0112) applied as
//    exif_transpose does for all 8 values; anything else leaves the image as stored.
//
// Bombs cost nothing: the byte cap is checked first, then the dimensions are read from the
// header and checked against DecodeLimits before any pixel buffer exists; libjpeg's own
// working memory and its number of scans are capped as well.
// Truncated or corrupt data is an error (libjpeg's premature-end warnings included), never a
// partly grey image reported as success. Thread-safe: no global state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/result.h"
#include "media/image.h"

namespace edgelm::media {

enum class ImageFormat { unknown, jpeg, png, webp };

// Caps checked before decoding. The defaults admit a 50 MP phone photo (8192 x 6144 ~ 50.3 M is
// just over; 8000 x 6000 = 48 M fits) and refuse anything whose RGB8 output would pass ~150 MB.
struct DecodeLimits {
  size_t max_bytes = size_t{20} << 20;  // encoded size (20 MiB)
  int64_t max_pixels = 50'000'000;      // width * height
  int max_side = 16384;                 // either dimension (WebP's own maximum is 16383)
};

// The format from the magic bytes: JPEG FF D8 FF, PNG 89 'P' 'N' 'G', WebP "RIFF" ? ? ? ? "WEBP".
ImageFormat sniff_image_format(std::span<const uint8_t> bytes);
const char* image_format_name(ImageFormat format);

// Decodes, checks the limits and applies the EXIF orientation. Errors name the format and the
// cause ("PNG: image is 100000x100000 pixels, over the limit of ...", "JPEG: truncated ...",
// "unsupported image format (first bytes 47 49 46 38); supported: JPEG, PNG, WebP").
Result<Image> decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits = {});

// The dimensions check every decoder runs on the header's width and height.
Status check_image_dimensions(ImageFormat format, int64_t width, int64_t height, const DecodeLimits& limits);

}  // namespace edgelm::media
