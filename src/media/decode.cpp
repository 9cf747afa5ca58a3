#include "media/decode.h"

#include <cstring>

#include "media/decoders.h"
#include "media/exif_orientation.h"

namespace edgelm::media {

ImageFormat sniff_image_format(std::span<const uint8_t> b) {
  if (b.size() >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF) return ImageFormat::jpeg;
  if (b.size() >= 4 && b[0] == 0x89 && b[1] == 'P' && b[2] == 'N' && b[3] == 'G') return ImageFormat::png;
  if (b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 && std::memcmp(b.data() + 8, "WEBP", 4) == 0) {
    return ImageFormat::webp;
  }
  return ImageFormat::unknown;
}

const char* image_format_name(ImageFormat format) {
  switch (format) {
    case ImageFormat::jpeg: return "JPEG";
    case ImageFormat::png: return "PNG";
    case ImageFormat::webp: return "WebP";
    case ImageFormat::unknown: break;
  }
  return "unknown";
}

Status check_image_dimensions(ImageFormat format, int64_t width, int64_t height, const DecodeLimits& limits) {
  const char* name = image_format_name(format);
  if (width <= 0 || height <= 0) return make_error("{}: image has zero size ({}x{})", name, width, height);
  if (width > limits.max_side || height > limits.max_side) {
    return make_error("{}: image is {}x{} pixels, over the limit of {} pixels per side", name, width, height,
                      limits.max_side);
  }
  if (width * height > limits.max_pixels) {
    return make_error("{}: image is {}x{} = {} pixels, over the limit of {} pixels", name, width, height,
                      width * height, limits.max_pixels);
  }
  return ok_status();
}

Result<Image> decode_image(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  if (bytes.empty()) return make_error("empty image (0 bytes)");
  if (bytes.size() > limits.max_bytes) {
    return make_error("image is {} bytes, over the limit of {} bytes", bytes.size(), limits.max_bytes);
  }
  const ImageFormat format = sniff_image_format(bytes);
  Result<detail::DecodedImage> decoded = Error{};
  switch (format) {
    case ImageFormat::jpeg: decoded = detail::decode_jpeg(bytes, limits); break;
    case ImageFormat::png: decoded = detail::decode_png(bytes, limits); break;
    case ImageFormat::webp: decoded = detail::decode_webp(bytes, limits); break;
    case ImageFormat::unknown: {
      std::string seen;
      for (size_t i = 0; i < bytes.size() && i < 8; ++i) seen += fmt::format("{}{:02x}", i ? " " : "", bytes[i]);
      return make_error("unsupported image format (first bytes {}); supported: JPEG, PNG, WebP", seen);
    }
  }
  if (!decoded.ok()) return decoded.error();
  detail::DecodedImage& d = decoded.value();
  int orientation = d.exif.empty() ? 0 : exif_orientation(d.exif);
  if (orientation == 0) orientation = d.xmp_orientation;
  return apply_exif_orientation(std::move(d.image), orientation);
}

}  // namespace edgelm::media
