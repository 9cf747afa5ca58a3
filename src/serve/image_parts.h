// The images of an API request (chat image_url parts, /predict's "image"), encoded through the
// server's ImageInput (image_input.h) with their metrics, each failure an ApiError naming the
// part: 400 for the request's fault (no --mmproj, too many images, an image that cannot be
// read, fetched or decoded), 500 when the model's vocabulary lacks the projector's tokens.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "serve/http_server.h"
#include "serve/image_input.h"

namespace edgelm::serve {

// One image of a request, by its parameter path.
struct ImagePart {
  std::string param;        // "messages[i].content[j]", "image[1]"
  std::string url;          // data:, file:// or http(s):// (image_input.h)
  bool raw_base64 = false;  // url may also be bare base64 (/predict)
};

// Encodes the parts in order into `out`; the first failure is returned. On success the response
// carries `x-edgelm-image-ms` (the decode + encode milliseconds this request spent on its
// images, each encode its share of its encoder batch; 0 when all came from the encoder cache),
// `x-edgelm-images-cached` (how many did) and `x-edgelm-image-batch` (the most images of one
// encoder batch that encoded this request's images, other requests' included; 0: none encoded).
std::optional<ApiError> encode_image_parts(ServerContext& ctx, const std::vector<ImagePart>& parts,
                                           std::vector<EncodedImage>& out, http::Response& res);

}  // namespace edgelm::serve
