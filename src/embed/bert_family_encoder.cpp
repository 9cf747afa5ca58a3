// The BERT-family TextEncoder: model::BertModel (bert.h) behind the TextEncoder interface.
// Pooling mean/cls over the final hidden states, computed in double (not normalized: callers do).
// (Issue 41: nomic-bert, jina-bert-v2, XLM-RoBERTa, classification heads and batching across texts
// extend this; today texts run one after another.)
#include <filesystem>

#include "embed/encoder_impls.h"
#include "model/bert.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace edgelm::embed {
namespace {

class BertFamilyEncoder final : public TextEncoder {
 public:
  BertFamilyEncoder(std::unique_ptr<model::BertModel> m, EncoderInfo info) : m_(std::move(m)), info_(std::move(info)) {}

  const EncoderInfo& info() const override { return info_; }
  const tokenizer::Tokenizer& tokenizer() const override { return m_->tokenizer(); }

  // [CLS] WordPiece(text) [SEP], not truncated (encode() refuses more than n_ctx tokens).
  Result<std::vector<int32_t>> tokenize(std::string_view text) const override {
    const tokenizer::Vocab& v = m_->tokenizer().vocab();
    const int32_t cls = v.bos() != tokenizer::kNoToken ? v.bos() : v.find("[CLS]").value_or(tokenizer::kNoToken);
    const int32_t sep = v.eos() != tokenizer::kNoToken ? v.eos() : v.find("[SEP]").value_or(tokenizer::kNoToken);
    std::vector<int32_t> ids = m_->tokenizer().encode(text, /*add_special=*/false, /*parse_special=*/false);
    ids.insert(ids.begin(), cls);
    ids.push_back(sep);
    return ids;
  }

  Result<std::vector<int32_t>> tokenize_pair(std::string_view, std::string_view) const override {
    return make_error("{} has no classification head: it cannot rerank", info_.name);
  }

  Result<std::vector<std::vector<float>>> encode(std::span<const std::vector<int32_t>> texts, Pooling pooling,
                                                 ThreadPool& pool) const override {
    if (pooling != Pooling::mean && pooling != Pooling::cls)
      return make_error("{} pooling is not available for {} (mean or cls)", pooling_name(pooling), info_.arch);
    std::vector<std::vector<float>> out;
    out.reserve(texts.size());
    const auto E = static_cast<size_t>(info_.n_embd);
    for (const std::vector<int32_t>& ids : texts) {
      EDGELM_TRY(std::vector<float> h, m_->hidden_states(ids, &pool));
      std::vector<double> acc(E, 0.0);
      const size_t rows = pooling == Pooling::cls ? 1 : ids.size();
      for (size_t t = 0; t < rows; ++t)
        for (size_t i = 0; i < E; ++i) acc[i] += h[t * E + i];
      std::vector<float> v(E);
      for (size_t i = 0; i < E; ++i) v[i] = static_cast<float>(acc[i] / static_cast<double>(rows));
      out.push_back(std::move(v));
    }
    return out;
  }

 private:
  std::unique_ptr<model::BertModel> m_;
  EncoderInfo info_;
};

}  // namespace

bool is_bert_family_arch(std::string_view arch) { return arch == "bert"; }

Result<std::unique_ptr<TextEncoder>> open_bert_family_encoder(format::ModelFile file, const std::string& path) {
  EncoderInfo info;
  info.arch = "bert";
  auto name = file.metadata.get_string("general.name");
  info.name = name.ok() ? *name : std::filesystem::path(path).stem().string();
  auto m = model::BertModel::from_file(std::move(file));
  if (!m.ok()) return make_error("{}: {}", path, m.error().message);
  const model::BertConfig& c = (*m)->config();
  info.n_embd = c.n_embd;
  info.n_ctx = c.n_ctx;
  info.pooling = c.pooling == model::BertPooling::cls ? Pooling::cls : Pooling::mean;
  return std::unique_ptr<TextEncoder>(new BertFamilyEncoder(std::move(m).value(), std::move(info)));
}

}  // namespace edgelm::embed
