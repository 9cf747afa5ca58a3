// JPEG through libjpeg-turbo with PIL's settings (the library defaults), errors as values.
//
// libjpeg reports fatal errors through error_exit, which must not return: it longjmps back to
// run_decoder. Only trivially destructible state lives between the setjmp and the longjmp; the
// output vector belongs to the caller's frame. Warnings about the entropy-coded data (premature
// end, corrupt segment, bad Huffman code) are errors too, so a truncated file never decodes
// into a half-grey image; header-level quirks that PIL also accepts (extraneous bytes before a
// marker, odd JFIF/Adobe versions) stay warnings.
#include <jerror.h>
#include <setjmp.h>

#include <cstdio>
#include <cstring>

// jpeglib.h needs size_t and FILE declared first.
#include <jpeglib.h>

#include "media/decoders.h"

namespace edgelm::media::detail {
namespace {

// A progressive file can hold any number of scans, each a full pass over the coefficients; real
// encoders write about ten. More than this is a CPU bomb, not a photo.
constexpr int kMaxScans = 256;

struct ErrorManager {
  jpeg_error_mgr base;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void on_error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  longjmp(err->jump, 1);
}

bool warning_is_fatal(int code) {
  switch (code) {
    case JWRN_EXTRANEOUS_DATA:
    case JWRN_JFIF_MAJOR:
    case JWRN_ADOBE_XFORM:
    case JWRN_BOGUS_ICC: return false;
    default: return true;
  }
}

void on_message(j_common_ptr cinfo, int level) {
  if (level < 0 && warning_is_fatal(cinfo->err->msg_code)) on_error_exit(cinfo);
}

void on_progress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof err->message, "more than %d scans", kMaxScans);
    longjmp(err->jump, 1);
  }
}

// PIL reads every CMYK JPEG as Adobe-inverted ("CMYK;I") and converts with
// rgb = nk - nk * c / 255 (nk = 255 - k, c the uninverted ink), dividing by 255 with its
// rounding ((t >> 8) + t) >> 8, t = a * b + 128.
inline uint8_t cmyk_channel(uint8_t stored_c, uint8_t stored_k) {
  const int nk = stored_k;  // stored values are inverted: 255 - k
  const int c = 255 - stored_c;
  const int t = c * nk + 128;
  const int v = nk - (((t >> 8) + t) >> 8);
  return static_cast<uint8_t>(v < 0 ? 0 : v);
}

struct JpegState {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  jpeg_progress_mgr progress;
};

// Returns an empty string on success, else the error. `out` and `exif` are owned by the caller.
// Header dimensions are checked through the callback before any pixel row is allocated.
std::string run_decoder(JpegState& s, std::span<const uint8_t> bytes, const DecodeLimits& limits, Image& out,
                        std::vector<uint8_t>& exif, std::string& limit_error) {
  s.cinfo.err = jpeg_std_error(&s.err.base);
  s.err.base.error_exit = on_error_exit;
  s.err.base.emit_message = on_message;
  s.err.message[0] = '\0';
  if (setjmp(s.err.jump)) {
    jpeg_destroy_decompress(&s.cinfo);
    return s.err.message[0] ? s.err.message : "decoder error";
  }
  jpeg_create_decompress(&s.cinfo);
  s.progress.progress_monitor = on_progress;
  s.cinfo.progress = &s.progress;
  // Coefficient buffers of a progressive image and the like; a bomb hits this cap instead of RAM.
  s.cinfo.mem->max_memory_to_use = static_cast<long>(limits.max_pixels) * 16 + (long{64} << 20);
  jpeg_mem_src(&s.cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(&s.cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&s.cinfo, TRUE);

  {  // scoped: no object with a destructor may be alive when libjpeg longjmps
    const Status dims = check_image_dimensions(ImageFormat::jpeg, s.cinfo.image_width, s.cinfo.image_height, limits);
    if (!dims.ok()) limit_error = dims.error().message;
  }
  if (!limit_error.empty()) {
    jpeg_destroy_decompress(&s.cinfo);
    return "";
  }
  for (jpeg_saved_marker_ptr m = s.cinfo.marker_list; m; m = m->next) {
    if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && std::memcmp(m->data, "Exif\0", 5) == 0) {
      exif.assign(m->data, m->data + m->data_length);
      break;  // PIL keeps the first
    }
  }

  const J_COLOR_SPACE in_space = s.cinfo.jpeg_color_space;
  const bool cmyk = in_space == JCS_CMYK || in_space == JCS_YCCK;
  const bool gray = in_space == JCS_GRAYSCALE;
  s.cinfo.out_color_space = cmyk ? JCS_CMYK : gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_start_decompress(&s.cinfo);

  const int w = static_cast<int>(s.cinfo.output_width);
  const int h = static_cast<int>(s.cinfo.output_height);
  const int nc = s.cinfo.output_components;
  out.width = w;
  out.height = h;
  out.rgb.resize(static_cast<size_t>(w) * h * 3);
  JSAMPARRAY row = (*s.cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&s.cinfo), JPOOL_IMAGE,
                                                static_cast<JDIMENSION>(w * nc), 1);
  while (s.cinfo.output_scanline < s.cinfo.output_height) {
    const int y = static_cast<int>(s.cinfo.output_scanline);
    if (jpeg_read_scanlines(&s.cinfo, row, 1) != 1) continue;
    uint8_t* dst = out.rgb.data() + static_cast<size_t>(y) * w * 3;
    const uint8_t* src = row[0];
    if (nc == 3) {
      std::memcpy(dst, src, static_cast<size_t>(w) * 3);
    } else if (nc == 1) {
      for (int x = 0; x < w; ++x) dst[3 * x] = dst[3 * x + 1] = dst[3 * x + 2] = src[x];
    } else {
      for (int x = 0; x < w; ++x) {
        const uint8_t* p = src + 4 * x;
        for (int c = 0; c < 3; ++c) dst[3 * x + c] = cmyk_channel(p[c], p[3]);
      }
    }
  }
  jpeg_finish_decompress(&s.cinfo);
  jpeg_destroy_decompress(&s.cinfo);
  return "";
}

}  // namespace

Result<DecodedImage> decode_jpeg(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  DecodedImage d;
  std::string limit_error;
  JpegState state{};
  const std::string err = run_decoder(state, bytes, limits, d.image, d.exif, limit_error);
  if (!err.empty()) return make_error("JPEG: corrupt or truncated image: {}", err);
  if (!limit_error.empty()) return Error{limit_error};
  return d;
}

}  // namespace edgelm::media::detail
