// PNG through libpng, transformed to what PIL's convert("RGB") gives, errors as values.
//
// libpng reports errors by longjmp to png_jmpbuf; as in decode_jpeg.cpp only trivially
// destructible state lives in the frames it crosses. Rows are decoded straight into the
// output (3 bytes a pixel) for every type except 16-bit grey, which PIL clips rather than
// shifts and so needs its 16-bit values. The chunks after the image data (IEND, a late eXIf)
// must parse too: a file cut there is reported, not decoded without its orientation.
#include <png.h>

#include <cstring>
#include <string>

#include "media/decoders.h"

namespace edgelm::media::detail {
namespace {

struct Reader {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char message[200];
};

void on_read(png_structp png, png_bytep out, size_t n) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "unexpected end of file (truncated)");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

[[noreturn]] void on_error(png_structp png, png_const_charp msg) {
  auto* r = static_cast<Reader*>(png_get_error_ptr(png));
  std::strncpy(r->message, msg ? msg : "decoder error", sizeof r->message - 1);
  r->message[sizeof r->message - 1] = '\0';
  png_longjmp(png, 1);
}

void on_warning(png_structp, png_const_charp) {}  // ancillary-chunk quirks PIL ignores as well

void take_exif(png_structp png, png_infop info, std::vector<uint8_t>& exif) {
  png_uint_32 n = 0;
  png_bytep data = nullptr;
  if (exif.empty() && png_get_eXIf_1(png, info, &n, &data) && data && n > 0) exif.assign(data, data + n);
}

struct PngState {
  png_structp png = nullptr;
  png_infop info = nullptr;
  png_infop end_info = nullptr;
  Reader reader{};
  std::vector<png_bytep> rows;  // allocated before the decode starts, destroyed by the caller
};

// The header: dimensions and transforms. False (with state.reader.message set) on error.
bool read_header(PngState& s, const DecodeLimits& limits, std::string& limit_error, bool& gray16) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_set_read_fn(s.png, &s.reader, on_read);
  png_read_info(s.png, s.info);
  png_uint_32 w = 0, h = 0;
  int bit_depth = 0, color_type = 0, interlace = 0;
  png_get_IHDR(s.png, s.info, &w, &h, &bit_depth, &color_type, &interlace, nullptr, nullptr);
  {
    const Status dims = check_image_dimensions(ImageFormat::png, w, h, limits);
    if (!dims.ok()) {
      limit_error = dims.error().message;
      return true;
    }
  }
  gray16 = bit_depth == 16 && (color_type == PNG_COLOR_TYPE_GRAY);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(s.png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(s.png);
  if (bit_depth == 16 && !gray16) png_set_strip_16(s.png);  // PIL's "RGB;16B": the high byte
  if ((color_type & PNG_COLOR_MASK_ALPHA) || color_type == PNG_COLOR_TYPE_PALETTE) png_set_strip_alpha(s.png);
  if (!gray16 && !(color_type & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(s.png);
  png_set_interlace_handling(s.png);
  png_read_update_info(s.png, s.info);
  const int channels = png_get_channels(s.png, s.info);
  const int depth = png_get_bit_depth(s.png, s.info);
  if (gray16 ? (channels != 1 || depth != 16) : (channels != 3 || depth != 8)) {
    std::strcpy(s.reader.message, "unexpected pixel layout after transforms");
    return false;
  }
  return true;
}

bool read_pixels(PngState& s) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_read_image(s.png, s.rows.data());
  return true;
}

bool read_trailer(PngState& s) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_read_end(s.png, s.end_info);
  return true;
}

struct PngCleanup {
  PngState& s;
  ~PngCleanup() { png_destroy_read_struct(&s.png, &s.info, &s.end_info); }
};

}  // namespace

Result<DecodedImage> decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  PngState s;
  s.reader = Reader{bytes.data(), bytes.size(), 0, {}};
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s.reader, on_error, on_warning);
  if (!s.png) return make_error("PNG: out of memory");
  PngCleanup cleanup{s};
  s.info = png_create_info_struct(s.png);
  s.end_info = png_create_info_struct(s.png);
  if (!s.info || !s.end_info) return make_error("PNG: out of memory");

  std::string limit_error;
  bool gray16 = false;
  if (!read_header(s, limits, limit_error, gray16)) return make_error("PNG: corrupt image: {}", s.reader.message);
  if (!limit_error.empty()) return Error{limit_error};

  DecodedImage d;
  take_exif(s.png, s.info, d.exif);
  const png_uint_32 w = png_get_image_width(s.png, s.info);
  const png_uint_32 h = png_get_image_height(s.png, s.info);
  d.image = make_image(static_cast<int>(w), static_cast<int>(h));
  std::vector<uint16_t> gray;  // [h, w] big-endian samples, 16-bit grey only
  if (gray16) gray.resize(static_cast<size_t>(w) * h);
  s.rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) {
    s.rows[y] = gray16 ? reinterpret_cast<png_bytep>(gray.data() + static_cast<size_t>(y) * w)
                       : d.image.rgb.data() + static_cast<size_t>(y) * w * 3;
  }
  if (!read_pixels(s)) return make_error("PNG: corrupt or truncated image: {}", s.reader.message);
  if (!read_trailer(s)) return make_error("PNG: corrupt or truncated after the image data: {}", s.reader.message);
  take_exif(s.png, s.end_info, d.exif);

  if (gray16) {
    // PIL opens 16-bit grey as mode "I"; convert("RGB") clips each value to 255.
    for (size_t i = 0; i < gray.size(); ++i) {
      const auto* b = reinterpret_cast<const uint8_t*>(&gray[i]);
      const int v = (b[0] << 8) | b[1];
      d.image.rgb[3 * i] = d.image.rgb[3 * i + 1] = d.image.rgb[3 * i + 2] = static_cast<uint8_t>(v > 255 ? 255 : v);
    }
  }
  return d;
}

}  // namespace edgelm::media::detail
