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
#include <string_view>

#include "media/decoders.h"

namespace edgelm::media::detail {
namespace {

constexpr size_t kMaxChunkBytes = size_t{1} << 20;  // PIL refuses text over 1 MiB (MAX_TEXT_CHUNK)
constexpr png_uint_32 kMaxChunks = 32;

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

// How rows arrive after the transforms: RGB8 straight into the output; 16-bit grey samples
// (PIL clips them) or palette indices (PIL maps those past the PLTE entries to grey i, i, i)
// into a staging buffer.
enum class Layout { rgb, gray16, index };

// The header: dimensions and transforms. False (with state.reader.message set) on error.
bool read_header(PngState& s, const DecodeLimits& limits, std::string& limit_error, Layout& layout) {
  if (setjmp(png_jmpbuf(s.png))) return false;
  png_set_read_fn(s.png, &s.reader, on_read);
  // Compressed text is a bomb too: the colour profile PIL's convert("RGB") ignores is skipped
  // unread, a text chunk (XMP, raw EXIF profile) may take kMaxChunkBytes once inflated, and
  // kMaxChunks of them are kept.
  static constexpr png_byte kSkipped[] = "iCCP\0sPLT";
  png_set_keep_unknown_chunks(s.png, PNG_HANDLE_CHUNK_NEVER, kSkipped, 2);
  png_set_chunk_malloc_max(s.png, kMaxChunkBytes);
  png_set_chunk_cache_max(s.png, kMaxChunks);
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
  layout = color_type == PNG_COLOR_TYPE_PALETTE                   ? Layout::index
           : bit_depth == 16 && color_type == PNG_COLOR_TYPE_GRAY ? Layout::gray16
                                                                  : Layout::rgb;
  if (layout == Layout::index) {
    png_set_packing(s.png);  // 1/2/4-bit indices to a byte each
  } else if (layout == Layout::rgb) {
    if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(s.png);
    if (bit_depth == 16) png_set_strip_16(s.png);  // PIL's "RGB;16B": the high byte
    if (color_type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(s.png);
    if (!(color_type & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(s.png);
  }
  png_set_interlace_handling(s.png);
  png_read_update_info(s.png, s.info);
  const int channels = png_get_channels(s.png, s.info);
  const int depth = png_get_bit_depth(s.png, s.info);
  const bool expected = layout == Layout::rgb      ? channels == 3 && depth == 8
                        : layout == Layout::gray16 ? channels == 1 && depth == 16
                                                   : channels == 1 && depth == 8;
  if (!expected) {
    std::strcpy(s.reader.message, "unexpected pixel layout after transforms");
    return false;
  }
  return true;
}

// PIL's other orientation sources for PNG (Image.getexif): the ImageMagick text chunk
// "Raw profile type exif" (hex after three header lines) when there is no eXIf, and, when the
// EXIF has no orientation, `tiff:Orientation="N"` or `<tiff:Orientation>N` in the XMP iTXt.
// Text chunks before the image data only.
void take_text(png_structp png, png_infop info, DecodedImage& d) {
  png_textp text = nullptr;
  int n = 0;
  png_get_text(png, info, &text, &n);
  for (int i = 0; i < n; ++i) {
    if (!text[i].key || !text[i].text) continue;
    const std::string_view key = text[i].key;
    const std::string_view value(text[i].text, text[i].itxt_length ? text[i].itxt_length : text[i].text_length);
    if (key == "Raw profile type exif" && d.exif.empty()) {
      size_t pos = 0;
      for (int line = 0; line < 3 && pos != std::string_view::npos; ++line) {
        pos = value.find('\n', pos);
        if (pos != std::string_view::npos) ++pos;
      }
      if (pos == std::string_view::npos) continue;
      std::vector<uint8_t> bytes;
      int nibble = -1;
      bool bad = false;
      for (char c : value.substr(pos)) {
        if (c == '\n' || c == ' ' || c == '\t' || c == '\r') continue;
        const int v = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
        if (v < 0) {
          bad = true;
          break;
        }
        if (nibble < 0) {
          nibble = v;
        } else {
          bytes.push_back(static_cast<uint8_t>(nibble << 4 | v));
          nibble = -1;
        }
      }
      if (!bad) d.raw_profile_exif = std::move(bytes);
    } else if (key == "XML:com.adobe.xmp" && !d.xmp_orientation) {
      for (size_t at = value.find("tiff:Orientation"); at != std::string_view::npos;
           at = value.find("tiff:Orientation", at + 1)) {
        const std::string_view rest = value.substr(at + 16);
        if (rest.size() >= 3 && rest.substr(0, 2) == "=\"" && rest[2] >= '0' && rest[2] <= '9') {
          d.xmp_orientation = rest[2] - '0';
        } else if (rest.size() >= 2 && rest[0] == '>' && rest[1] >= '0' && rest[1] <= '9') {
          d.xmp_orientation = rest[1] - '0';
        } else {
          continue;
        }
        break;
      }
    }
  }
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

// Every chunk up to IEND must lie inside the input. libpng allocates an ancillary chunk's
// buffer from the length its header claims before reading it (Debian's libpng 1.6.39 does not
// cap that), so the lengths are checked here, before libpng sees them.
Status check_chunk_lengths(std::span<const uint8_t> b) {
  size_t pos = 8;
  while (b.size() - pos >= 12) {
    const uint32_t len =
        (uint32_t{b[pos]} << 24) | (uint32_t{b[pos + 1]} << 16) | (uint32_t{b[pos + 2]} << 8) | b[pos + 3];
    if (len > 0x7FFFFFFFu) return make_error("PNG: corrupt image: chunk length {} out of range", len);
    if (len > b.size() - pos - 12) {
      return make_error("PNG: corrupt or truncated image: a {}-byte chunk runs past the end of the file", len);
    }
    if (std::memcmp(b.data() + pos + 4, "IEND", 4) == 0) return ok_status();
    pos += 12 + size_t{len};
  }
  return make_error("PNG: truncated image: no IEND chunk");
}

}  // namespace

Result<DecodedImage> decode_png(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  if (bytes.size() < 8) return make_error("PNG: truncated image: {} bytes", bytes.size());
  EDGELM_TRY_STATUS(check_chunk_lengths(bytes));
  PngState s;
  s.reader = Reader{bytes.data(), bytes.size(), 0, {}};
  s.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s.reader, on_error, on_warning);
  if (!s.png) return make_error("PNG: out of memory");
  PngCleanup cleanup{s};
  s.info = png_create_info_struct(s.png);
  s.end_info = png_create_info_struct(s.png);
  if (!s.info || !s.end_info) return make_error("PNG: out of memory");

  std::string limit_error;
  Layout layout = Layout::rgb;
  if (!read_header(s, limits, limit_error, layout)) return make_error("PNG: corrupt image: {}", s.reader.message);
  if (!limit_error.empty()) return Error{limit_error};

  DecodedImage d;
  take_exif(s.png, s.info, d.exif);
  take_text(s.png, s.info, d);
  const png_uint_32 w = png_get_image_width(s.png, s.info);
  const png_uint_32 h = png_get_image_height(s.png, s.info);
  d.image = make_image(static_cast<int>(w), static_cast<int>(h));
  const size_t sample_bytes = layout == Layout::gray16 ? 2 : layout == Layout::index ? 1 : 0;
  std::vector<uint8_t> staged(sample_bytes * w * h);  // [h, w] samples (big-endian) or indices
  s.rows.resize(h);
  for (png_uint_32 y = 0; y < h; ++y) {
    s.rows[y] =
        sample_bytes ? staged.data() + sample_bytes * w * y : d.image.rgb.data() + static_cast<size_t>(y) * w * 3;
  }
  if (!read_pixels(s)) return make_error("PNG: corrupt or truncated image: {}", s.reader.message);
  if (!read_trailer(s)) return make_error("PNG: corrupt or truncated after the image data: {}", s.reader.message);
  take_exif(s.png, s.end_info, d.exif);
  if (d.exif.empty()) d.exif = std::move(d.raw_profile_exif);

  const size_t n = static_cast<size_t>(w) * h;
  if (layout == Layout::gray16) {
    // PIL opens 16-bit grey as mode "I"; convert("RGB") clips each value to 255.
    for (size_t i = 0; i < n; ++i) {
      const int v = (staged[2 * i] << 8) | staged[2 * i + 1];
      d.image.rgb[3 * i] = d.image.rgb[3 * i + 1] = d.image.rgb[3 * i + 2] = static_cast<uint8_t>(v > 255 ? 255 : v);
    }
  } else if (layout == Layout::index) {
    uint8_t table[256][3];
    for (int i = 0; i < 256; ++i) table[i][0] = table[i][1] = table[i][2] = static_cast<uint8_t>(i);
    png_colorp palette = nullptr;
    int n_palette = 0;
    png_get_PLTE(s.png, s.info, &palette, &n_palette);
    for (int i = 0; i < n_palette && i < 256; ++i) {
      table[i][0] = palette[i].red, table[i][1] = palette[i].green, table[i][2] = palette[i].blue;
    }
    for (size_t i = 0; i < n; ++i) std::memcpy(&d.image.rgb[3 * i], table[staged[i]], 3);
  }
  return d;
}

}  // namespace edgelm::media::detail
