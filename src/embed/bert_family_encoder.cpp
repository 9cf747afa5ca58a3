// Placeholder until the BERT-family TextEncoder lands (issue 41, helper branch "encoders").
#include "embed/encoder_impls.h"

namespace edgelm::embed {

bool is_bert_family_arch(std::string_view) { return false; }

Result<std::unique_ptr<TextEncoder>> open_bert_family_encoder(format::ModelFile, const std::string& path) {
  return make_error("{}: BERT-family encoders are not built yet", path);
}

}  // namespace edgelm::embed
