// Placeholder until the decoder TextEncoder lands (issue 41, helper branch "decoder-embed").
#include "embed/encoder_impls.h"

namespace edgelm::embed {

bool is_decoder_encoder_file(const format::ModelFile&) { return false; }

Result<std::unique_ptr<TextEncoder>> open_decoder_encoder(format::ModelFile, const std::string& path) {
  return make_error("{}: decoder embedding models are not built yet", path);
}

}  // namespace edgelm::embed
