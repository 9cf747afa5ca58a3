// The images of an API request (see image_parts.h).
#include "serve/image_parts.h"

#include "serve/metrics.h"

namespace edgelm::serve {
namespace {

ApiError bad_field(const std::string& param, std::string message, const char* code) {
  return ApiError{400, std::move(message), "invalid_request_error", param, code};
}

}  // namespace

// Decodes and encodes the request's images (image_input.h) in order; every failure is a 400
// naming the part (500 when the model's vocabulary lacks the projector's image tokens).
std::optional<ApiError> encode_image_parts(ServerContext& ctx, const std::vector<ImagePart>& parts,
                                           std::vector<EncodedImage>& out, http::Response& res) {
  ImageInput* in = ctx.images();
  const std::string model = ctx.model_name();
  if (in == nullptr) {
    ctx.metrics().record_image(model, "rejected");
    return bad_field(parts[0].param,
                     fmt::format("'{}' is an image, but model '{}' has no vision encoder: start the server with "
                                 "--mmproj FILE (the model's mmproj GGUF)",
                                 parts[0].param, model),
                     "unsupported_value");
  }
  if (static_cast<int>(parts.size()) > in->options().max_images) {
    ctx.metrics().record_image(model, "rejected");
    const std::string& p = parts[static_cast<size_t>(in->options().max_images)].param;
    return bad_field(p,
                     fmt::format("'{}': too many images ({}); at most {} per request (--max-images-per-request)", p,
                                 parts.size(), in->options().max_images),
                     "invalid_value");
  }
  if (Status st = in->check_vocab(ctx.service().tokenizer().vocab()); !st.ok())
    return ApiError{500, st.error().message, "server_error", parts[0].param, "model_unsupported"};
  for (const ImagePart& p : parts) {
    auto im = p.raw_base64 ? in->encode_base64_or_url(p.url) : in->encode_url(p.url);
    if (!im.ok()) {
      ctx.metrics().record_image(model, "rejected");
      return bad_field(p.param, fmt::format("'{}': {}", p.param, im.error().message), "invalid_value");
    }
    if (im->cached) {
      ctx.metrics().record_image(model, "cached");
    } else {
      ctx.metrics().record_image(model, "encoded", im->decode_s, im->encode_s);
    }
    out.push_back(std::move(im).value());
  }
  double ms = 0;
  int cached = 0;
  for (const EncodedImage& im : out) {
    ms += (im.decode_s + im.encode_s) * 1e3;
    cached += im.cached ? 1 : 0;
  }
  res.set_header("x-edgelm-image-ms", fmt::format("{:.1f}", ms));
  res.set_header("x-edgelm-images-cached", std::to_string(cached));
  return std::nullopt;
}

}  // namespace edgelm::serve
