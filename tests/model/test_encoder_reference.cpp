// The "bert" encoders (BERT with WordPiece, XLM-RoBERTa with the XLM-R unigram vocabulary; model/
// encoder_model.h behind embed::TextEncoder) against a naive reference encoder written here
// independently: plain loops over the file's F32 tensors in double, GELU in the tanh form, LayerNorm
// with the file's epsilon, token type 0, absolute positions from row 0. Mean / cls pooling and the
// classification head, bidirectional and position-aware attention, stored weight types giving
// close vectors, the real bge WordPiece vocabulary, the generated vocabularies, the named shapes and
// the errors for broken files. (These checks were model::BertModel's, which EncoderModel replaced.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "embed/text_encoder.h"
#include "format/gguf_reader.h"
#include "format/gguf_writer.h"
#include "model/encoder_model.h"
#include "model/quantize.h"
#include "model/synthetic.h"
#include "support/test_data.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace edgelm::model {
namespace {

using embed::Pooling;

SyntheticSpec tiny_spec(uint32_t pooling = 1) {
  SyntheticSpec s;
  s.arch = "bert";
  s.n_embd = 32;
  s.n_layer = 2;
  s.n_ff = 64;
  s.n_head = 4;
  s.n_vocab = 200;
  s.n_ctx = 16;
  s.pooling_type = pooling;
  s.seed = 7;
  return s;
}

SyntheticSpec shape_spec(const std::string& shape) {
  SyntheticSpec s;
  EXPECT_TRUE(apply_synthetic_shape(s, shape).ok()) << shape;
  s.seed = 5;
  return s;
}

std::string write_model(const test::TempDir& dir, const SyntheticSpec& spec, const std::string& name) {
  auto f = make_synthetic_model(spec);
  EXPECT_TRUE(f.ok()) << f.error().message;
  const std::string path = dir.file(name);
  auto st = format::write_gguf(path, *f);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return path;
}

std::unique_ptr<embed::TextEncoder> open_ok(const std::string& path) {
  auto e = embed::open_text_encoder(path);
  EXPECT_TRUE(e.ok()) << e.error().message;
  return e.ok() ? std::move(e).value() : nullptr;
}

std::vector<float> encode_one(const embed::TextEncoder& enc, const std::vector<int32_t>& ids, Pooling p,
                              int threads = 1) {
  ThreadPool pool(threads);
  auto out = enc.encode(std::vector<std::vector<int32_t>>{ids}, p, pool);
  EXPECT_TRUE(out.ok()) << out.error().message;
  return out.ok() ? (*out)[0] : std::vector<float>{};
}

// ---- Naive reference encoder: reads the F32 tensors by name, computes in double. ----
class Reference {
 public:
  explicit Reference(const std::string& path) : file_(std::move(format::read_gguf(path)).value()) {
    const auto& md = file_.metadata;
    E_ = static_cast<int>(*md.get_u32("bert.embedding_length"));
    H_ = static_cast<int>(*md.get_u32("bert.attention.head_count"));
    layers_ = static_cast<int>(*md.get_u32("bert.block_count"));
    eps_ = *md.get_f32("bert.attention.layer_norm_epsilon");
  }

  // Final hidden states [n][E].
  std::vector<std::vector<double>> hidden(const std::vector<int32_t>& toks) const {
    const size_t n = toks.size();
    std::vector<std::vector<double>> x(n, std::vector<double>(E_));
    for (size_t t = 0; t < n; ++t)
      for (int i = 0; i < E_; ++i)
        x[t][i] = at("token_embd.weight", toks[t], i) + at("position_embd.weight", t, i) +
                  at("token_types.weight", 0, i);
    for (auto& r : x) r = norm(r, "token_embd_norm");
    const int D = E_ / H_;
    for (int l = 0; l < layers_; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      auto q = lin(x, p + "attn_q"), k = lin(x, p + "attn_k"), v = lin(x, p + "attn_v");
      std::vector<std::vector<double>> att(n, std::vector<double>(E_, 0.0));
      for (size_t t = 0; t < n; ++t) {
        for (int h = 0; h < H_; ++h) {
          std::vector<double> s(n);
          double mx = -1e300;
          for (size_t u = 0; u < n; ++u) {
            double d = 0;
            for (int j = 0; j < D; ++j) d += q[t][h * D + j] * k[u][h * D + j];
            s[u] = d / std::sqrt(static_cast<double>(D));
            mx = std::max(mx, s[u]);
          }
          double z = 0;
          for (auto& e : s) z += (e = std::exp(e - mx));
          for (size_t u = 0; u < n; ++u)
            for (int j = 0; j < D; ++j) att[t][h * D + j] += s[u] / z * v[u][h * D + j];
        }
      }
      auto o = lin(att, p + "attn_output");
      for (size_t t = 0; t < n; ++t) {
        for (int i = 0; i < E_; ++i) o[t][i] += x[t][i];
        x[t] = norm(o[t], p + "attn_output_norm");
      }
      auto up = lin(x, p + "ffn_up");
      const double c = std::sqrt(2.0 / M_PI);
      for (auto& r : up)
        for (auto& e : r) e = 0.5 * e * (1.0 + std::tanh(c * (e + 0.044715 * e * e * e)));
      auto down = lin(up, p + "ffn_down");
      for (size_t t = 0; t < n; ++t) {
        for (int i = 0; i < E_; ++i) down[t][i] += x[t][i];
        x[t] = norm(down[t], p + "layer_output_norm");
      }
    }
    return x;
  }

  std::vector<double> pooled(const std::vector<int32_t>& toks, Pooling p) const {
    const auto h = hidden(toks);
    if (p == Pooling::cls) return h[0];
    std::vector<double> e(E_, 0.0);
    for (const auto& r : h)
      for (int i = 0; i < E_; ++i) e[i] += r[i] / static_cast<double>(h.size());
    return e;
  }

  // The classification head on the first row: cls.output(tanh(cls h0 + b)) + b_out.
  double score(const std::vector<int32_t>& toks) const {
    const auto d = lin({hidden(toks)[0]}, "cls");
    std::vector<double> t = d[0];
    for (double& a : t) a = std::tanh(a);
    return lin({t}, "cls.output")[0][0];
  }

 private:
  const float* f32(const std::string& name) const {
    const format::TensorInfo* t = file_.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, DType::f32) << name;
    return reinterpret_cast<const float*>(t->data);
  }
  double at(const std::string& name, size_t row, int col) const { return f32(name)[row * E_ + col]; }

  // y[t][r] = sum_c W[r][c] x[t][c] + b[r]
  std::vector<std::vector<double>> lin(const std::vector<std::vector<double>>& x, const std::string& p) const {
    const format::TensorInfo* t = file_.find_tensor(p + ".weight");
    const auto cols = static_cast<int>(t->ne[0]), rows = static_cast<int>(t->ne[1]);
    const float* w = f32(p + ".weight");
    const float* b = f32(p + ".bias");
    std::vector<std::vector<double>> y(x.size(), std::vector<double>(rows));
    for (size_t i = 0; i < x.size(); ++i)
      for (int r = 0; r < rows; ++r) {
        double s = b[r];
        for (int c = 0; c < cols; ++c) s += static_cast<double>(w[r * cols + c]) * x[i][c];
        y[i][r] = s;
      }
    return y;
  }

  std::vector<double> norm(const std::vector<double>& x, const std::string& p) const {
    const float* g = f32(p + ".weight");
    const float* b = f32(p + ".bias");
    double m = 0, var = 0;
    for (double a : x) m += a;
    m /= static_cast<double>(x.size());
    for (double a : x) var += (a - m) * (a - m);
    var /= static_cast<double>(x.size());
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - m) / std::sqrt(var + eps_) * g[i] + b[i];
    return y;
  }

  format::ModelFile file_;
  int E_ = 0, H_ = 0, layers_ = 0;
  double eps_ = 0;
};

void expect_near_reference(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

double l1_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += std::abs(a[i] - b[i]);
  return d;
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) d += double{a[i]} * b[i], na += double{a[i]} * a[i], nb += double{b[i]} * b[i];
  return d / std::sqrt(na * nb);
}

constexpr const char* kSentence = "The quick brown fox jumped over the lazy dog, and the cat sat.";

TEST(EncoderReference, BertMeanAndClsPoolingMatchTheNaiveReference) {
  test::TempDir dir;
  const std::string path = write_model(dir, tiny_spec(1), "bert.gguf");
  auto enc = open_ok(path);
  ASSERT_TRUE(enc);
  EXPECT_EQ(enc->info().pooling, Pooling::mean);
  EXPECT_EQ(enc->info().n_embd, 32);
  EXPECT_EQ(enc->info().n_ctx, 16);
  auto ids = enc->tokenize("the cat sat on the mat");
  ASSERT_TRUE(ids.ok());
  const Reference ref(path);
  const std::vector<float> mean = encode_one(*enc, *ids, Pooling::mean);
  const std::vector<float> cls = encode_one(*enc, *ids, Pooling::cls);
  expect_near_reference(mean, ref.pooled(*ids, Pooling::mean), 2e-4);
  expect_near_reference(cls, ref.pooled(*ids, Pooling::cls), 2e-4);
  EXPECT_GT(l1_diff(mean, cls), 0.1);
  // A file that says cls pools the first row by default.
  auto cls_enc = open_ok(write_model(dir, tiny_spec(2), "cls.gguf"));
  ASSERT_TRUE(cls_enc);
  EXPECT_EQ(cls_enc->info().pooling, Pooling::cls);
}

// XLM-RoBERTa: one token type, LayerNorm epsilon 1e-5, the unigram vocabulary, <s> pooled; and the
// reranker's classification head.
TEST(EncoderReference, XlmRobertaAndItsHeadMatchTheNaiveReference) {
  test::TempDir dir;
  const std::string path = write_model(dir, shape_spec("xlmr-tiny"), "xlmr.gguf");
  auto file = format::read_gguf(path);
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file->metadata.get_string("tokenizer.ggml.model"), "t5");
  EXPECT_EQ(file->find_tensor("token_types.weight")->ne[1], 1);
  EXPECT_FLOAT_EQ(*file->metadata.get_f32("bert.attention.layer_norm_epsilon"), 1e-5f);
  auto enc = open_ok(path);
  ASSERT_TRUE(enc);
  EXPECT_EQ(enc->info().pooling, Pooling::cls);
  EXPECT_FALSE(enc->info().can_rank);
  auto ids = enc->tokenize(kSentence);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), 0);  // <s>
  EXPECT_EQ(ids->back(), 2);   // </s>
  const Reference ref(path);
  expect_near_reference(encode_one(*enc, *ids, Pooling::cls), ref.pooled(*ids, Pooling::cls), 2e-4);
  expect_near_reference(encode_one(*enc, *ids, Pooling::mean), ref.pooled(*ids, Pooling::mean), 2e-4);

  const std::string rr_path = write_model(dir, shape_spec("xlmr-reranker-tiny"), "xlmr-rr.gguf");
  auto rr = open_ok(rr_path);
  ASSERT_TRUE(rr);
  ASSERT_TRUE(rr->info().can_rank);
  const Reference rr_ref(rr_path);
  for (const char* doc : {"the cat sat on the mat", "a refund takes thirty days"}) {
    auto pair = rr->tokenize_pair("when do i get my refund?", doc);
    ASSERT_TRUE(pair.ok());
    const std::vector<float> s = encode_one(*rr, *pair, Pooling::rank);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_NEAR(s[0], rr_ref.score(*pair), 2e-4) << doc;
  }
}

TEST(EncoderReference, AttentionIsBidirectionalAndPositionAware) {
  test::TempDir dir;
  auto path = write_model(dir, tiny_spec(), "bert.gguf");
  auto file = format::read_gguf(path);
  ASSERT_TRUE(file.ok());
  auto m = EncoderModel::from_file(std::move(file).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  const tokenizer::Vocab& v = (*m)->tokenizer().vocab();
  std::vector<int32_t> a = (*m)->tokenizer().encode("the cat sat on the mat", true, false);
  ASSERT_GE(a.size(), 5u);
  std::vector<int32_t> b = a;
  b[b.size() - 2] = *v.find("\xE2\x96\x81" "dog");  // change the last word
  ThreadPool pool(1);
  const std::vector<float> ha = (*m)->forward(std::vector<std::vector<int32_t>>{a}, pool);
  const std::vector<float> hb = (*m)->forward(std::vector<std::vector<int32_t>>{b}, pool);
  double diff0 = 0;
  for (int i = 0; i < 32; ++i) diff0 += std::abs(ha[i] - hb[i]);
  EXPECT_GT(diff0, 1e-3) << "the first token did not see a later token";

  // Swapping two words changes the first row (absolute positions matter).
  std::vector<int32_t> c = a;
  std::swap(c[1], c[3]);
  const std::vector<float> hc = (*m)->forward(std::vector<std::vector<int32_t>>{c}, pool);
  double diff = 0;
  for (int i = 0; i < 32; ++i) diff += std::abs(ha[i] - hc[i]);
  EXPECT_GT(diff, 1e-3);
}

TEST(EncoderReference, StoredWeightTypesGiveCloseVectors) {
  test::TempDir dir;
  SyntheticSpec s = shape_spec("xlmr-tiny");
  const std::string f32_path = write_model(dir, s, "f32.gguf");
  s.weight_type = DType::f16;
  const std::string f16_path = write_model(dir, s, "f16.gguf");
  auto f32 = open_ok(f32_path), f16 = open_ok(f16_path);
  ASSERT_TRUE(f32 && f16);
  auto ids = f32->tokenize(kSentence);
  ASSERT_TRUE(ids.ok());
  const std::vector<float> e32 = encode_one(*f32, *ids, Pooling::cls), e16 = encode_one(*f16, *ids, Pooling::cls);
  EXPECT_GT(cosine(e32, e16), 0.999);
  EXPECT_LT(cosine(e32, e16), 1.0 - 1e-9);  // really computed from other bits

  // Quantized through the model quantizer: matrices Q8_0 / Q4_0, vectors stay F32.
  auto in = format::read_gguf(f32_path);
  ASSERT_TRUE(in.ok());
  ThreadPool pool(2);
  for (const auto& preset_cos : {std::pair{QuantPreset::q8_0, 0.995}, std::pair{QuantPreset::q4_0, 0.9}}) {
    const QuantPreset preset = preset_cos.first;
    auto q = quantize_model(*in, preset, pool);
    ASSERT_TRUE(q.ok()) << q.error().message;
    EXPECT_NE(q->find_tensor("blk.0.attn_q.weight")->type, DType::f32);
    EXPECT_EQ(q->find_tensor("blk.0.attn_q.bias")->type, DType::f32);
    const std::string path = dir.file(std::string(quant_preset_name(preset)) + ".gguf");
    ASSERT_TRUE(format::write_gguf(path, *q).ok());
    auto enc = open_ok(path);
    ASSERT_TRUE(enc);
    const std::vector<float> e = encode_one(*enc, *ids, Pooling::cls, 2);
    EXPECT_GT(cosine(e32, e), preset_cos.second) << quant_preset_name(preset);
    EXPECT_LT(cosine(e32, e), 1.0 - 1e-9) << quant_preset_name(preset);
  }
}

TEST(EncoderReference, RealBgeVocabularyTokenizesLikeBert) {
  test::TempDir dir;
  SyntheticSpec s = tiny_spec();
  s.vocab_from = test::shared_path("vocab/ggml-vocab-bert-bge.gguf");
  s.n_ctx = 64;
  auto enc = open_ok(write_model(dir, s, "bge.gguf"));
  ASSERT_TRUE(enc);
  EXPECT_EQ(enc->tokenizer().vocab().n_tokens(), 30522);
  auto ids = enc->tokenize("Hello world!");
  ASSERT_TRUE(ids.ok());
  // bert-base-uncased / bge: [CLS]=101 hello=7592 world=2088 !=999 [SEP]=102
  EXPECT_EQ(*ids, (std::vector<int32_t>{101, 7592, 2088, 999, 102}));
  EXPECT_EQ(encode_one(*enc, *ids, Pooling::mean).size(), 32u);
}

TEST(EncoderReference, NamedShapesAndGeneratedVocabularies) {
  SyntheticSpec s;
  ASSERT_TRUE(apply_synthetic_shape(s, "bert-bge-small").ok());
  EXPECT_EQ(s.arch, "bert");
  EXPECT_EQ(s.n_embd, 384);
  EXPECT_EQ(s.n_layer, 12);
  EXPECT_EQ(s.pooling_type, 2u);  // bge pools [CLS]
  EXPECT_FALSE(s.xlmr_vocab);
  for (const char* name : {"bge-m3", "bge-reranker-v2-m3"}) {  // XLM-RoBERTa large
    SyntheticSpec m;
    ASSERT_TRUE(apply_synthetic_shape(m, name).ok());
    EXPECT_TRUE(m.xlmr_vocab) << name;
    EXPECT_EQ(m.arch, "bert");
    EXPECT_EQ(m.n_embd, 1024);
    EXPECT_EQ(m.n_layer, 24);
    EXPECT_EQ(m.n_head, 16);
    EXPECT_EQ(m.n_ff, 4096);
    EXPECT_EQ(m.n_vocab, 250002);
    EXPECT_EQ(m.n_ctx, 8192);
    EXPECT_EQ(m.n_token_types, 1);
    EXPECT_EQ(m.pooling_type, std::string(name) == "bge-m3" ? 2u : 4u);
  }

  // The generated WordPiece vocabulary: unknown words become [UNK], known ones are its pieces.
  SyntheticSpec t;
  ASSERT_TRUE(apply_synthetic_shape(t, "bert-tiny").ok());
  EXPECT_EQ(t.pooling_type, 1u);
  auto f = make_synthetic_model(t);
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto m = EncoderModel::from_file(std::move(f).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->config().n_embd, 64);
  EXPECT_EQ((*m)->config().n_vocab, 512);
  const auto& v = (*m)->tokenizer().vocab();
  auto ids = (*m)->tokenizer().encode("hello " + std::string(120, 'z'), true, false);  // > 100 characters: [UNK]
  EXPECT_EQ(ids, (std::vector<int32_t>{*v.find("[CLS]"), *v.find("\xE2\x96\x81hello"), *v.find("[UNK]"), *v.find("[SEP]")}));
  // Vocabularies too small for their pieces are errors.
  t.n_vocab = 10;
  EXPECT_FALSE(make_synthetic_model(t).ok());
  SyntheticSpec x = shape_spec("xlmr-tiny");
  x.n_vocab = 100;
  auto small = make_synthetic_model(x);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.error().message.find("256"), std::string::npos) << small.error().message;
  x = shape_spec("xlmr-tiny");
  x.vocab_from = test::shared_path("vocab/ggml-vocab-bert-bge.gguf");
  EXPECT_FALSE(make_synthetic_model(x).ok());
}

std::string from_file_error(format::ModelFile f) {
  auto m = EncoderModel::from_file(std::move(f));
  EXPECT_FALSE(m.ok());
  return m.ok() ? std::string() : m.error().message;
}

format::ModelFile tiny_file() {
  auto f = make_synthetic_model(tiny_spec());
  EXPECT_TRUE(f.ok());
  return std::move(f).value();
}

TEST(EncoderReference, ErrorsNameWhatTheFileGotWrong) {
  {  // missing tensor
    auto f = tiny_file();
    std::erase_if(f.tensors, [](const format::TensorInfo& t) { return t.name == "blk.1.ffn_up.bias"; });
    EXPECT_NE(from_file_error(std::move(f)).find("blk.1.ffn_up.bias"), std::string::npos);
  }
  {  // wrong shape
    auto f = tiny_file();
    for (auto& t : f.tensors)
      if (t.name == "blk.0.attn_k.weight") t.ne = {32, 16, 1, 1};
    const std::string err = from_file_error(std::move(f));
    EXPECT_NE(err.find("blk.0.attn_k.weight"), std::string::npos) << err;
    EXPECT_NE(err.find("[32, 16]"), std::string::npos) << err;
  }
  {  // a position table shorter than the context
    auto f = tiny_file();
    f.metadata.set("bert.context_length", format::GgufValue::from_u32(32));
    const std::string err = from_file_error(std::move(f));
    EXPECT_NE(err.find("position_embd.weight"), std::string::npos) << err;
  }
  {  // heads that do not divide the width
    auto f = tiny_file();
    f.metadata.set("bert.attention.head_count", format::GgufValue::from_u32(5));
    const std::string err = from_file_error(std::move(f));
    EXPECT_NE(err.find("head_count"), std::string::npos) << err;
  }
  {  // a causal "encoder"
    auto f = tiny_file();
    f.metadata.set("bert.attention.causal", format::GgufValue::from_bool(true));
    const std::string err = from_file_error(std::move(f));
    EXPECT_NE(err.find("causal"), std::string::npos) << err;
  }
  {  // an unknown pooling type
    auto f = tiny_file();
    f.metadata.set("bert.pooling_type", format::GgufValue::from_u32(7));
    const std::string err = from_file_error(std::move(f));
    EXPECT_NE(err.find("pooling_type 7"), std::string::npos) << err;
  }
  {  // a missing hyper-parameter
    auto f = tiny_file();
    format::ModelFile g;
    for (const auto& kv : f.metadata.entries())
      if (kv.first != "bert.block_count") g.metadata.set(kv.first, kv.second);
    g.tensors = f.tensors;
    const std::string err = from_file_error(std::move(g));
    EXPECT_NE(err.find("bert.block_count"), std::string::npos) << err;
  }
  auto missing = embed::open_text_encoder("/nonexistent/bert.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/bert.gguf"), std::string::npos) << missing.error().message;
}

}  // namespace
}  // namespace edgelm::model
