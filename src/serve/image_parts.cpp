// The images of an API request (see image_parts.h).
#include "serve/image_parts.h"

#include <algorithm>

#include "serve/metrics.h"

namespace edgelm::serve {
namespace {

ApiError bad_field(const std::string& param, std::string message, const char* code) {
  return ApiError{400, std::move(message), "invalid_request_error", param, code};
}

}  // namespace

// Decodes the request's images in order and encodes them in one submission to the encoder queue
// (image_input.h); every failure is a 400 naming the part (500 when the model's vocabulary lacks the projector's image tokens).
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
  std::vector<ImageRef> refs;
  for (const ImagePart& p : parts) refs.push_back({p.url, p.raw_base64});
  size_t failed = 0;
  auto images = in->encode_images(refs, &failed);
  if (!images.ok()) {
    ctx.metrics().record_image(model, "rejected");
    const std::string& p = parts[failed].param;
    return bad_field(p, fmt::format("'{}': {}", p, images.error().message), "invalid_value");
  }
  int batch = 0;
  for (EncodedImage& im : *images) {
    if (im.cached) {
      ctx.metrics().record_image(model, "cached");
    } else {
      ctx.metrics().record_image(model, "encoded", im.decode_s, im.encode_s, im.batch_images);
    }
    batch = std::max(batch, im.batch_images);
    out.push_back(std::move(im));
  }
  double ms = 0;
  int cached = 0;
  for (const EncodedImage& im : out) {
    ms += (im.decode_s + im.encode_s) * 1e3;
    cached += im.cached ? 1 : 0;
  }
  res.set_header("x-edgelm-image-ms", fmt::format("{:.1f}", ms));
  res.set_header("x-edgelm-images-cached", std::to_string(cached));
  res.set_header("x-edgelm-image-batch", std::to_string(batch));
  return std::nullopt;
}

}  // namespace edgelm::serve
