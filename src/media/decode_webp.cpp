// WebP through libwebp (stills) and libwebpdemux (EXIF chunk, first frame of an animation),
// the way PIL's WebP plugin reads them: RGB straight from the bitstream, alpha dropped without
// premultiplying, an animation's first frame composed on a transparent-black canvas.
#include <webp/decode.h>
#include <webp/demux.h>

#include <cstring>

#include "media/decoders.h"

namespace edgelm::media::detail {
namespace {

const char* vp8_status_name(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OK: return "ok";
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated (not enough data)";
  }
  return "unknown error";
}

// The EXIF chunk's payload (empty if none). The whole container must parse, as in PIL, whose
// decoder demuxes first: a file cut inside a trailing chunk is an error, not an unrotated image.
Result<std::vector<uint8_t>> exif_chunk(std::span<const uint8_t> bytes) {
  std::vector<uint8_t> exif;
  const WebPData data{bytes.data(), bytes.size()};
  WebPDemuxer* demux = WebPDemux(&data);
  if (!demux) return make_error("WebP: corrupt or truncated container");
  WebPChunkIterator it;
  if (WebPDemuxGetChunk(demux, "EXIF", 1, &it)) {
    exif.assign(it.chunk.bytes, it.chunk.bytes + it.chunk.size);
    WebPDemuxReleaseChunkIterator(&it);
  }
  WebPDemuxDelete(demux);
  return exif;
}

Status decode_still(std::span<const uint8_t> bytes, Image& out) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) return make_error("WebP: library version mismatch");
  config.output.colorspace = MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.u.RGBA.rgba = out.rgb.data();
  config.output.u.RGBA.stride = out.width * 3;
  config.output.u.RGBA.size = out.rgb.size();
  const VP8StatusCode st = WebPDecode(bytes.data(), bytes.size(), &config);
  WebPFreeDecBuffer(&config.output);
  if (st != VP8_STATUS_OK) return make_error("WebP: corrupt or truncated image: {}", vp8_status_name(st));
  return ok_status();
}

Status decode_first_frame(std::span<const uint8_t> bytes, Image& out) {
  const WebPData data{bytes.data(), bytes.size()};
  WebPAnimDecoderOptions opts;
  if (!WebPAnimDecoderOptionsInit(&opts)) return make_error("WebP: library version mismatch");
  opts.color_mode = MODE_RGBA;
  opts.use_threads = 0;
  WebPAnimDecoder* dec = WebPAnimDecoderNew(&data, &opts);
  if (!dec) return make_error("WebP: corrupt or truncated animation");
  WebPAnimInfo info;
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  Status st = ok_status();
  if (!WebPAnimDecoderGetInfo(dec, &info) || static_cast<int>(info.canvas_width) != out.width ||
      static_cast<int>(info.canvas_height) != out.height) {
    st = make_error("WebP: animation canvas disagrees with the header");
  } else if (!WebPAnimDecoderGetNext(dec, &rgba, &timestamp) || !rgba) {
    st = make_error("WebP: corrupt or truncated animation frame");
  } else {
    const size_t n = static_cast<size_t>(out.width) * out.height;
    for (size_t i = 0; i < n; ++i) std::memcpy(&out.rgb[3 * i], rgba + 4 * i, 3);
  }
  WebPAnimDecoderDelete(dec);
  return st;
}

}  // namespace

Result<DecodedImage> decode_webp(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  WebPBitstreamFeatures features;
  const VP8StatusCode st = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (st != VP8_STATUS_OK) return make_error("WebP: corrupt or truncated header: {}", vp8_status_name(st));
  EDGELM_TRY_STATUS(check_image_dimensions(ImageFormat::webp, features.width, features.height, limits));
  DecodedImage d;
  EDGELM_TRY(d.exif, exif_chunk(bytes));
  d.image = make_image(features.width, features.height);
  if (features.has_animation) {
    EDGELM_TRY_STATUS(decode_first_frame(bytes, d.image));
  } else {
    EDGELM_TRY_STATUS(decode_still(bytes, d.image));
  }
  return d;
}

}  // namespace edgelm::media::detail
