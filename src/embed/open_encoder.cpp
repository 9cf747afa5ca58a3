// open_text_encoder / is_text_encoder_file: picks the TextEncoder implementation by the file's
// architecture (encoder_impls.h), and the pooling names.
#include <array>
#include <utility>

#include "embed/encoder_impls.h"
#include "embed/text_encoder.h"

namespace edgelm::embed {
namespace {

constexpr std::array<std::pair<Pooling, std::string_view>, 5> kPoolingNames{{
    {Pooling::none, "none"}, {Pooling::mean, "mean"}, {Pooling::cls, "cls"}, {Pooling::last, "last"},
    {Pooling::rank, "rank"}}};

bool is_encoder(const format::ModelFile& file) {
  auto arch = file.metadata.get_string("general.architecture");
  if (!arch.ok()) return false;
  return is_bert_family_arch(*arch) || is_decoder_encoder_file(file);
}

}  // namespace

std::string_view pooling_name(Pooling p) {
  for (const auto& [value, name] : kPoolingNames)
    if (value == p) return name;
  return "unknown";
}

Result<Pooling> parse_pooling(std::string_view name) {
  for (const auto& [value, n] : kPoolingNames)
    if (n == name) return value;
  return make_error("pooling '{}' is not one of none, mean, cls, last, rank", name);
}

Result<bool> is_text_encoder_file(const std::string& path) {
  EDGELM_TRY(format::ModelFile file, format::open_model_file(path));
  return is_encoder(file);
}

Result<std::unique_ptr<TextEncoder>> open_text_encoder(const std::string& path) {
  EDGELM_TRY(format::ModelFile file, format::open_model_file(path));
  EDGELM_TRY(std::string arch, file.metadata.get_string("general.architecture"));
  if (is_bert_family_arch(arch)) return open_bert_family_encoder(std::move(file), path);
  if (is_decoder_encoder_file(file)) return open_decoder_encoder(std::move(file), path);
  return make_error("{}: architecture '{}' is not an embedding or reranker model (a generative model needs "
                    "{}.pooling_type to be used as one)",
                    path, arch, arch);
}

}  // namespace edgelm::embed
