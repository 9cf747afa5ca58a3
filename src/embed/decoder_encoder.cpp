// The decoder TextEncoder (encoder_impls.h): gemma-embedding (EmbeddingGemma: Gemma 3 layers
// attending bidirectionally, mean pooling, dense_2 / dense_3 projections) and decoder files with a
// {arch}.pooling_type (Qwen3-Embedding: last-token pooling; Qwen3-Reranker: rank, P("yes")).
//
// encode() runs its texts through engine::forward_batch: texts are packed into steps of at most
// kMaxStepTokens tokens and kMaxStepKvBytes of K/V (a longer text is a step of its own), each
// text a slice starting at position 0 in a KvStore sized for the step, so every weight matrix is
// multiplied once per step for all rows of all its texts and attention stays within each text
// (bidirectional for gemma-embedding). Texts are limited to kMaxTextTokens (EncoderInfo::n_ctx). The final-normed
// hidden states of every token (StepBatch::want_hidden) are pooled per text; dense projections and the rank heads then
// run once over all pooled rows.
//
// Rank (a yes/no LLM reranker): the last token's state against the file's cls.output rows
// ("yes", "no", as the reference converter writes Qwen3-Reranker) or, without that tensor, the
// output matrix's rows of the tokens "yes" and "no"; score = softmax over the two = P(yes).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "embed/decoder_prompts.h"
#include "embed/encoder_impls.h"
#include "engine/batch_forward.h"
#include "kv/kv_store.h"
#include "model/model.h"
#include "model/ops.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::embed {
namespace {

// Tokens per forward_batch step (bounds the step's scratch: [n, n_ff] FFN rows), and the most
// bytes of f32 K/V a step holds (a longer text is still a step of its own).
constexpr int64_t kMaxStepTokens = 4096;
constexpr int64_t kMaxStepKvBytes = int64_t{512} << 20;
// The longest text a decoder embedder takes (its trained context if shorter): the f32 K/V of one
// text is held whole while it runs (Qwen3-0.6B: 112 KiB per token).
constexpr int32_t kMaxTextTokens = 8192;
constexpr int32_t kBlockSize = 32;

// Architectures a pooling_type turns into an embedding model: decoders of model/arch.h without
// recurrent layers (whose state the encoder does not keep).
bool decoder_arch_can_embed(const model::ArchSpec& a) { return !a.gated_deltanet; }

// The file's {arch}.pooling_type, or `fallback` when absent; an error for a value outside 0..4.
Result<Pooling> file_pooling(const format::GgufMetadata& md, const std::string& arch, Pooling fallback) {
  const std::string key = arch + ".pooling_type";
  if (!md.contains(key)) return fallback;
  EDGELM_TRY(const uint32_t v, md.get_u32(key));
  if (v > static_cast<uint32_t>(Pooling::rank))
    return make_error("metadata '{}' = {} is not a pooling type (0 none, 1 mean, 2 cls, 3 last, 4 rank)", key, v);
  return static_cast<Pooling>(v);
}

// A one-row view of row r of w (the lm head's "yes" / "no" rows), in its stored type.
kernels::WeightMatrix row_view(const kernels::WeightMatrix& w, int64_t r) {
  kernels::WeightMatrix v;
  v.type = w.type;
  v.rows = 1;
  v.cols = w.cols;
  v.data = w.row(r);
  v.row_bytes = w.row_bytes;
  return v;
}

class DecoderEncoder final : public TextEncoder {
 public:
  DecoderEncoder(std::unique_ptr<model::Model> m, std::unique_ptr<tokenizer::Tokenizer> tok, EncoderInfo info,
                 int32_t yes_id, int32_t no_id)
      : model_(std::move(m)), tok_(std::move(tok)), info_(std::move(info)), yes_(yes_id), no_(no_id) {}

  const EncoderInfo& info() const override { return info_; }
  const tokenizer::Tokenizer& tokenizer() const override { return *tok_; }

  Result<std::vector<int32_t>> tokenize(std::string_view text) const override {
    std::vector<int32_t> ids = tok_->encode(text, /*add_special=*/true, /*parse_special=*/true);
    // Last-token pooling reads the end-of-text token (Qwen3-Embedding's tokenizer appends
    // <|endoftext|>); a file that does not add EOS itself gets it here.
    if (info_.pooling == Pooling::last && !tok_->vocab().add_eos()) {
      const auto eot = tok_->vocab().find("<|endoftext|>");
      const int32_t end = eot ? *eot : tok_->vocab().eos();
      if (end != tokenizer::kNoToken && (ids.empty() || ids.back() != end)) ids.push_back(end);
    }
    return ids;
  }

  Result<std::vector<int32_t>> tokenize_pair(std::string_view query, std::string_view document) const override {
    if (!info_.can_rank)
      return make_error("{} is not a reranker (its pooling is {}): it cannot score a query and a document", info_.name,
                        pooling_name(info_.pooling));
    return tokenize_yes_no_prompt(*tok_, query, document);
  }

  Result<std::vector<std::vector<float>>> encode(std::span<const std::vector<int32_t>> texts, Pooling pooling,
                                                 ThreadPool& pool) const override;

 private:
  Status validate(std::span<const std::vector<int32_t>> texts, Pooling pooling) const;
  // One step of texts [b, e): their pooled rows ([e - b, n_embd]; rank: the last tokens) into pooled.
  Status run_step(std::span<const std::vector<int32_t>> texts, size_t b, size_t e, Pooling pooling, float* pooled,
                  ThreadPool& pool, engine::BatchScratch& scratch) const;
  // Dense projections of n pooled rows [n, n_embd] in place.
  void project(float* rows, int64_t n, ThreadPool& pool, kernels::MatmulScratch& mm) const;
  // P(yes) of n last-token rows [n, n_embd].
  std::vector<float> rank_scores(const float* rows, int64_t n, ThreadPool& pool, kernels::MatmulScratch& mm) const;

  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
  EncoderInfo info_;
  int32_t yes_ = -1, no_ = -1;  // rank without cls.output: the output rows scored
};

Status DecoderEncoder::validate(std::span<const std::vector<int32_t>> texts, Pooling pooling) const {
  if (pooling == Pooling::none)
    return make_error("pooling 'none' (one vector per token) is not served; use mean, cls, last or rank");
  if (pooling == Pooling::rank && !info_.can_rank)
    return make_error("pooling 'rank' needs a reranker; {} is an embedding model", info_.name);
  const int32_t n_vocab = model_->config().n_vocab;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto& t = texts[i];
    if (t.empty()) return make_error("input {} is empty (no tokens)", i);
    if (static_cast<int64_t>(t.size()) > info_.n_ctx)
      return make_error("input {} has {} tokens, more than the model's context of {}", i, t.size(), info_.n_ctx);
    for (const int32_t id : t)
      if (id < 0 || id >= n_vocab)
        return make_error("input {} has token id {}, outside the vocabulary [0, {})", i, id, n_vocab);
  }
  return ok_status();
}

Status DecoderEncoder::run_step(std::span<const std::vector<int32_t>> texts, size_t b, size_t e, Pooling pooling,
                                float* pooled, ThreadPool& pool, engine::BatchScratch& scratch) const {
  const model::ModelConfig& c = model_->config();
  engine::StepBatch step;
  step.want_hidden = true;
  step.bidirectional = c.arch->bidirectional;
  int32_t n_blocks = 0;
  for (size_t i = b; i < e; ++i) n_blocks += static_cast<int32_t>((texts[i].size() + kBlockSize - 1) / kBlockSize);
  EDGELM_TRY(kv::KvStore store, kv::KvStore::create(c, n_blocks, kBlockSize, kv::KvType::f32));
  std::vector<kv::BlockId> table(static_cast<size_t>(n_blocks));
  std::iota(table.begin(), table.end(), kv::BlockId{0});
  size_t block = 0;
  for (size_t i = b; i < e; ++i) {
    const auto n = static_cast<int32_t>(texts[i].size());
    const size_t nb = (texts[i].size() + kBlockSize - 1) / kBlockSize;
    engine::BatchSeq q;
    q.pos0 = 0;
    q.n_tokens = n;
    q.blocks = std::span<const kv::BlockId>(table).subspan(block, nb);
    step.seqs.push_back(q);
    step.tokens.insert(step.tokens.end(), texts[i].begin(), texts[i].end());
    block += nb;
  }
  EDGELM_TRY_STATUS(engine::forward_batch(*model_, step, store, {}, pool, scratch));
  const int64_t E = c.n_embd;
  const float* hidden = scratch.hidden.data();  // [n_total, n_embd] final-normed, batch order
  int64_t t0 = 0;
  for (size_t i = b; i < e; ++i) {
    const auto n = static_cast<int64_t>(texts[i].size());
    float* out = pooled + static_cast<int64_t>(i - b) * E;
    if (pooling == Pooling::mean) {
      std::vector<double> acc(static_cast<size_t>(E), 0.0);
      for (int64_t t = t0; t < t0 + n; ++t)
        for (int64_t k = 0; k < E; ++k) acc[static_cast<size_t>(k)] += hidden[t * E + k];
      for (int64_t k = 0; k < E; ++k) out[k] = static_cast<float>(acc[static_cast<size_t>(k)] / static_cast<double>(n));
    } else {
      const int64_t t = pooling == Pooling::cls ? t0 : t0 + n - 1;  // last and rank: the last token
      std::copy_n(hidden + t * E, E, out);
    }
    t0 += n;
  }
  return ok_status();
}

void DecoderEncoder::project(float* rows, int64_t n, ThreadPool& pool, kernels::MatmulScratch& mm) const {
  const model::Weights& w = model_->weights();
  if (!w.dense_2) return;
  std::vector<float> mid(static_cast<size_t>(n * w.dense_2.rows));  // [n, n_dense]
  model::linear(mid.data(), rows, n, w.dense_2, nullptr, pool, mm);
  model::linear(rows, mid.data(), n, w.dense_3, nullptr, pool, mm);
}

std::vector<float> DecoderEncoder::rank_scores(const float* rows, int64_t n, ThreadPool& pool,
                                               kernels::MatmulScratch& mm) const {
  const model::Weights& w = model_->weights();
  std::vector<float> scores(static_cast<size_t>(n));
  if (w.cls_out) {
    const int64_t C = w.cls_out.rows;
    std::vector<float> logits(static_cast<size_t>(n * C));  // [n, n_cls]
    model::linear(logits.data(), rows, n, w.cls_out, w.cls_out_b, pool, mm);
    for (int64_t i = 0; i < n; ++i) {
      const float* l = &logits[static_cast<size_t>(i * C)];
      if (C == 1) {
        scores[static_cast<size_t>(i)] = l[0];  // a single relevance logit
        continue;
      }
      const float mx = *std::max_element(l, l + C);
      double sum = 0.0;
      for (int64_t k = 0; k < C; ++k) sum += std::exp(static_cast<double>(l[k] - mx));
      scores[static_cast<size_t>(i)] = static_cast<float>(std::exp(static_cast<double>(l[0] - mx)) / sum);
    }
    return scores;
  }
  // The lm head's rows of "yes" and "no", each multiplied as the full head would (same kernels).
  const kernels::WeightMatrix yes = row_view(w.output, yes_), no = row_view(w.output, no_);
  std::vector<float> ly(static_cast<size_t>(n)), ln(static_cast<size_t>(n));
  model::linear(ly.data(), rows, n, yes, nullptr, pool, mm);
  model::linear(ln.data(), rows, n, no, nullptr, pool, mm);
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(ln[static_cast<size_t>(i)]) - ly[static_cast<size_t>(i)];
    scores[static_cast<size_t>(i)] = static_cast<float>(1.0 / (1.0 + std::exp(d)));
  }
  return scores;
}

Result<std::vector<std::vector<float>>> DecoderEncoder::encode(std::span<const std::vector<int32_t>> texts,
                                                               Pooling pooling, ThreadPool& pool) const {
  EDGELM_TRY_STATUS(validate(texts, pooling));
  const int64_t E = model_->config().n_embd;
  const auto n = static_cast<int64_t>(texts.size());
  std::vector<float> pooled(static_cast<size_t>(n * E));  // [n_texts, n_embd]
  const model::ModelConfig& c = model_->config();
  int64_t kv_bytes_per_token = 0;
  for (int32_t l = 0; l < c.n_kv_layers(); ++l) kv_bytes_per_token += 2 * int64_t{c.kv_n_embd(l)} * 4;
  const int64_t max_step =
      std::clamp<int64_t>(kMaxStepKvBytes / std::max<int64_t>(kv_bytes_per_token, 1), 1, kMaxStepTokens);
  engine::BatchScratch scratch;
  for (size_t b = 0; b < texts.size();) {
    size_t e = b + 1;
    int64_t tokens = static_cast<int64_t>(texts[b].size());
    while (e < texts.size() && tokens + static_cast<int64_t>(texts[e].size()) <= max_step)
      tokens += static_cast<int64_t>(texts[e++].size());
    EDGELM_TRY_STATUS(run_step(texts, b, e, pooling, &pooled[b * static_cast<size_t>(E)], pool, scratch));
    b = e;
  }
  std::vector<std::vector<float>> out(texts.size());
  if (n == 0) return out;
  if (pooling == Pooling::rank) {
    const std::vector<float> scores = rank_scores(pooled.data(), n, pool, scratch.matmul);
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = {scores[static_cast<size_t>(i)]};
    return out;
  }
  project(pooled.data(), n, pool, scratch.matmul);
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)].assign(pooled.begin() + i * E, pooled.begin() + (i + 1) * E);
  return out;
}

}  // namespace

bool is_decoder_encoder_file(const format::ModelFile& file) {
  auto arch = file.metadata.get_string("general.architecture");
  if (!arch.ok()) return false;
  auto spec = model::find_arch(*arch);
  if (!spec.ok()) return false;
  if ((*spec)->bidirectional) return true;
  if (!decoder_arch_can_embed(**spec)) return false;
  auto pooling = file_pooling(file.metadata, *arch, Pooling::none);
  return pooling.ok() && *pooling != Pooling::none;
}

Result<std::unique_ptr<TextEncoder>> open_decoder_encoder(format::ModelFile file, const std::string& path) {
  EDGELM_TRY(const std::string arch, file.metadata.get_string("general.architecture"));
  EncoderInfo info;
  info.arch = arch;
  auto name = file.metadata.get_string("general.name");
  info.name = name.ok() ? *name : std::filesystem::path(path).stem().string();
  auto pooling = file_pooling(file.metadata, arch, Pooling::mean);
  if (!pooling.ok()) return make_error("{}: {}", path, pooling.error().message);
  info.pooling = *pooling;
  if (info.pooling == Pooling::none)
    return make_error("{}: {}.pooling_type is none: not an embedding model", path, arch);
  auto tok = tokenizer::load_tokenizer(file.metadata);
  if (!tok.ok()) return make_error("{}: {}", path, tok.error().message);
  auto m = model::Model::load(std::move(file));
  if (!m.ok()) return make_error("{}: {}", path, m.error().message);
  const model::ModelConfig& c = (*m)->config();
  const model::Weights& w = (*m)->weights();
  if (!c.arch->bidirectional && !decoder_arch_can_embed(*c.arch))
    return make_error("{}: architecture '{}' cannot run as an embedding model (recurrent layers)", path, arch);
  info.n_ctx = std::min(c.n_ctx_train, kMaxTextTokens);
  info.n_embd = c.n_embd;
  if (w.dense_2 && w.dense_3.rows != c.n_embd)
    return make_error("{}: dense_3.weight projects to {}, not n_embd {}", path, w.dense_3.rows, c.n_embd);
  int32_t yes = -1, no = -1;
  if (info.pooling == Pooling::rank || w.cls_out) {
    if (c.arch->bidirectional)
      return make_error("{}: a {} file cannot rank (pooling_type rank or cls.output.weight)", path, arch);
    if (!w.cls_out) {
      const auto y = (*tok)->vocab().find("yes"), n = (*tok)->vocab().find("no");
      if (!y || !n)
        return make_error(
            "{}: a reranker without cls.output.weight needs the tokens \"yes\" and \"no\" in its "
            "vocabulary",
            path);
      yes = *y;
      no = *n;
    }
    info.can_rank = true;
  }
  set_model_card_prompts(info);
  return std::unique_ptr<TextEncoder>(
      std::make_unique<DecoderEncoder>(std::move(*m), std::move(*tok), std::move(info), yes, no));
}

}  // namespace edgelm::embed
