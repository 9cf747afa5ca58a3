// The BERT-family TextEncoder: model::EncoderModel (bert, nomic-bert, jina-bert-v2; XLM-RoBERTa as
// "bert" with a UGM vocabulary) behind the TextEncoder interface.
//
// Framing as the reference engine does it: a text is BOS text EOS under the vocabulary's add_bos /
// add_eos ([CLS] text [SEP] for WordPiece, <s> text </s> for XLM-R); a rerank pair is
// [CLS] q [SEP] d [SEP] for WordPiece and BOS q EOS SEP d EOS otherwise (<s> q </s></s> d </s>).
// encode() validates every text first, then runs the texts through the model in as few batched
// passes as the row budget allows (kMaxRowsPerPass rows of all texts stacked per pass), and pools:
// mean (in double), cls (first row), last (last row), rank (the classification head on the first row).
#include <filesystem>

#include "embed/encoder_impls.h"
#include "format/model_file.h"
#include "model/encoder_model.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace edgelm::embed {
namespace {

// Rows (tokens of all texts) one forward pass takes: bounds the activations (about
// (8 n_embd + 2 n_ff) floats per row) while keeping every matmul large.
constexpr int64_t kMaxRowsPerPass = 4096;

class BertFamilyEncoder final : public TextEncoder {
 public:
  BertFamilyEncoder(std::unique_ptr<model::EncoderModel> m, EncoderInfo info, int32_t sep)
      : m_(std::move(m)), info_(std::move(info)), sep_(sep) {}

  const EncoderInfo& info() const override { return info_; }
  const tokenizer::Tokenizer& tokenizer() const override { return m_->tokenizer(); }

  Result<std::vector<int32_t>> tokenize(std::string_view text) const override {
    const tokenizer::Vocab& v = m_->tokenizer().vocab();
    std::vector<int32_t> ids;
    if (v.add_bos()) ids.push_back(v.bos());
    std::vector<int32_t> body = m_->tokenizer().encode(text, /*add_special=*/false, /*parse_special=*/false);
    ids.insert(ids.end(), body.begin(), body.end());
    if (v.add_eos()) ids.push_back(v.eos());
    return ids;
  }

  Result<std::vector<int32_t>> tokenize_pair(std::string_view query, std::string_view document) const override {
    if (!info_.can_rank) return make_error("{} has no classification head: it cannot rerank", info_.name);
    const tokenizer::Tokenizer& tok = m_->tokenizer();
    const tokenizer::Vocab& v = tok.vocab();
    std::vector<int32_t> ids{v.bos()};
    std::vector<int32_t> q = tok.encode(query, false, false), d = tok.encode(document, false, false);
    ids.insert(ids.end(), q.begin(), q.end());
    ids.push_back(v.eos());
    if (v.model() != "bert") ids.push_back(sep_);  // <s> q </s></s> d </s>
    ids.insert(ids.end(), d.begin(), d.end());
    ids.push_back(v.eos());
    return ids;
  }

  Result<std::vector<std::vector<float>>> encode(std::span<const std::vector<int32_t>> texts, Pooling pooling,
                                                 ThreadPool& pool) const override {
    const model::EncoderConfig& c = m_->config();
    if (pooling == Pooling::none)
      return make_error("pooling none (per-token vectors) is not served; use mean, cls, last or rank");
    if (pooling == Pooling::rank && !info_.can_rank)
      return make_error("rank pooling needs a classification head, which {} does not have (mean, cls or last)",
                        info_.name);
    for (size_t t = 0; t < texts.size(); ++t) {
      const std::vector<int32_t>& ids = texts[t];
      if (ids.empty()) return make_error("text {} has no tokens", t);
      if (ids.size() > static_cast<size_t>(c.n_ctx))
        return make_error("text {} has {} tokens, more than the model's context of {}", t, ids.size(), c.n_ctx);
      for (const int32_t id : ids)
        if (id < 0 || id >= c.n_vocab)
          return make_error("text {}: token id {} is outside the vocabulary [0, {})", t, id, c.n_vocab);
    }
    std::vector<std::vector<float>> out(texts.size());
    size_t begin = 0;
    while (begin < texts.size()) {  // one pass per group of texts within the row budget
      size_t end = begin;
      int64_t rows = 0;
      while (end < texts.size() && (end == begin || rows + static_cast<int64_t>(texts[end].size()) <= kMaxRowsPerPass))
        rows += static_cast<int64_t>(texts[end++].size());
      pool_pass(texts.subspan(begin, end - begin), pooling, pool, &out[begin]);
      begin = end;
    }
    return out;
  }

 private:
  // One forward pass over `texts`; out[i] receives text i's pooled vector or score.
  void pool_pass(std::span<const std::vector<int32_t>> texts, Pooling pooling, ThreadPool& pool,
                 std::vector<float>* out) const {
    const auto E = static_cast<size_t>(m_->config().n_embd);
    const std::vector<float> h = m_->forward(texts, pool);
    size_t r0 = 0;
    std::vector<float> first_rows;  // rank: [n_texts, E]
    for (size_t t = 0; t < texts.size(); ++t) {
      const size_t n = texts[t].size();
      const float* rows = &h[r0 * E];
      if (pooling == Pooling::rank) {
        first_rows.insert(first_rows.end(), rows, rows + E);
      } else if (pooling == Pooling::mean) {
        std::vector<double> acc(E, 0.0);
        for (size_t r = 0; r < n; ++r)
          for (size_t i = 0; i < E; ++i) acc[i] += rows[r * E + i];
        out[t].resize(E);
        for (size_t i = 0; i < E; ++i) out[t][i] = static_cast<float>(acc[i] / static_cast<double>(n));
      } else {
        const float* row = pooling == Pooling::cls ? rows : rows + (n - 1) * E;
        out[t].assign(row, row + E);
      }
      r0 += n;
    }
    if (pooling == Pooling::rank) {
      const std::vector<float> scores = m_->rank_scores(first_rows.data(), static_cast<int64_t>(texts.size()), pool);
      for (size_t t = 0; t < texts.size(); ++t) out[t] = {scores[t]};
    }
  }

  std::unique_ptr<model::EncoderModel> m_;
  EncoderInfo info_;
  int32_t sep_;  // the separator between a pair's texts after the first EOS (non-WordPiece vocabularies)
};

Pooling pooling_of(uint32_t pooling_type) {
  switch (pooling_type) {
    case 2: return Pooling::cls;
    case 3: return Pooling::last;
    case 4: return Pooling::rank;
    default: return Pooling::mean;  // 1, and 0 (none: per-token vectors, which are not served)
  }
}

}  // namespace

bool is_bert_family_arch(std::string_view arch) { return model::EncoderModel::is_encoder_arch(arch); }

Result<std::unique_ptr<TextEncoder>> open_bert_family_encoder(format::ModelFile file, const std::string& path) {
  EncoderInfo info;
  auto name = file.metadata.get_string("general.name");
  info.name = name.ok() ? *name : std::filesystem::path(path).stem().string();
  auto m = model::EncoderModel::from_file(std::move(file));
  if (!m.ok()) return make_error("{}: {}", path, m.error().message);
  const model::EncoderConfig& c = (*m)->config();
  info.arch = c.arch_name;
  info.n_embd = c.n_embd;
  info.n_ctx = c.n_ctx;
  info.pooling = pooling_of(c.pooling_type);
  info.can_rank = c.has_cls_head;
  if (c.arch == model::EncoderArch::nomic_bert) {  // nomic-embed-text's task prefixes (model card)
    info.query_prefix = "search_query: ";
    info.document_prefix = "search_document: ";
  }
  const tokenizer::Vocab& v = (*m)->tokenizer().vocab();
  if (v.bos() == tokenizer::kNoToken || v.eos() == tokenizer::kNoToken)
    return make_error("{}: the vocabulary has no BOS/CLS or EOS/SEP token to frame a text with", path);
  int32_t sep = v.eos();
  if (auto s = (*m)->file().metadata.get_u32_or("tokenizer.ggml.seperator_token_id", UINT32_MAX);
      s.ok() && *s < static_cast<uint32_t>(v.n_tokens()))
    sep = static_cast<int32_t>(*s);
  return std::unique_ptr<TextEncoder>(new BertFamilyEncoder(std::move(m).value(), std::move(info), sep));
}

}  // namespace edgelm::embed
