// BertModel (sentence-embedding encoder): a tiny synthetic BERT written to a GGUF, loaded and
// run, against a naive reference encoder written here independently (plain loops over the
// file's F32 tensors, double accumulation); pooling, normalization, [CLS]/[SEP] framing,
// truncation, bidirectional attention and the errors for broken files.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "format/gguf_reader.h"
#include "format/gguf_writer.h"
#include "model/bert.h"
#include "model/quantize.h"
#include "model/synthetic.h"
#include "support/test_data.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::model {
namespace {

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

// Writes the synthetic model of `spec` into `dir` and returns its path.
std::string write_model(const test::TempDir& dir, const SyntheticSpec& spec, const std::string& name = "bert.gguf") {
  auto f = make_synthetic_model(spec);
  EXPECT_TRUE(f.ok()) << f.error().message;
  const std::string path = dir.file(name);
  auto st = format::write_gguf(path, *f);
  EXPECT_TRUE(st.ok()) << st.error().message;
  return path;
}

std::unique_ptr<BertModel> load_ok(const std::string& path) {
  auto m = BertModel::load(path);
  EXPECT_TRUE(m.ok()) << m.error().message;
  return m.ok() ? std::move(m).value() : nullptr;
}

// ---- Naive reference encoder: reads the F32 tensors by name, computes in double. ----
class Reference {
 public:
  explicit Reference(const std::string& path) : file_(std::move(format::read_gguf(path)).value()) {
    const auto& md = file_.metadata;
    E_ = static_cast<int>(*md.get_u32("bert.embedding_length"));
    H_ = static_cast<int>(*md.get_u32("bert.attention.head_count"));
    F_ = static_cast<int>(*md.get_u32("bert.feed_forward_length"));
    layers_ = static_cast<int>(*md.get_u32("bert.block_count"));
    eps_ = *md.get_f32("bert.attention.layer_norm_epsilon");
    cls_ = *md.get_u32("bert.pooling_type") == 2;
  }

  // Final hidden states [n][E].
  std::vector<std::vector<double>> hidden(const std::vector<int32_t>& toks) const {
    const size_t n = toks.size();
    std::vector<std::vector<double>> x(n, std::vector<double>(E_));
    for (size_t t = 0; t < n; ++t)
      for (int i = 0; i < E_; ++i)
        x[t][i] = at("token_embd.weight", toks[t], i, E_) + at("position_embd.weight", t, i, E_) +
                  at("token_types.weight", 0, i, E_);
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
      for (auto& r : up)
        for (auto& e : r) e = 0.5 * e * (1.0 + std::erf(e / std::sqrt(2.0)));
      auto down = lin(up, p + "ffn_down");
      for (size_t t = 0; t < n; ++t) {
        for (int i = 0; i < E_; ++i) down[t][i] += x[t][i];
        x[t] = norm(down[t], p + "layer_output_norm");
      }
    }
    return x;
  }

  std::vector<double> embedding(const std::vector<int32_t>& toks) const {
    const auto h = hidden(toks);
    std::vector<double> e(E_, 0.0);
    if (cls_) {
      e = h[0];
    } else {
      for (const auto& r : h)
        for (int i = 0; i < E_; ++i) e[i] += r[i] / static_cast<double>(h.size());
    }
    double n2 = 0;
    for (double a : e) n2 += a * a;
    for (double& a : e) a /= std::sqrt(n2);
    return e;
  }

 private:
  const float* f32(const std::string& name) const {
    const format::TensorInfo* t = file_.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    EXPECT_EQ(t->type, DType::f32) << name;
    return reinterpret_cast<const float*>(t->data);
  }
  double at(const std::string& name, size_t row, int col, int cols) const { return f32(name)[row * cols + col]; }

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
  int E_ = 0, H_ = 0, F_ = 0, layers_ = 0;
  double eps_ = 0;
  bool cls_ = false;
};

double l2(const std::vector<float>& v) {
  double s = 0;
  for (float a : v) s += static_cast<double>(a) * a;
  return std::sqrt(s);
}

void expect_near_reference(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

constexpr const char* kSentence = "The quick brown fox jumped over the lazy dog, and the cat sat.";

TEST(Bert, LoadsConfigFromSyntheticGguf) {
  test::TempDir dir;
  auto m = load_ok(write_model(dir, tiny_spec()));
  ASSERT_TRUE(m);
  const BertConfig& c = m->config();
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(m->n_embd(), 32);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_ff, 64);
  EXPECT_EQ(c.n_ctx, 16);
  EXPECT_EQ(c.n_vocab, 200);
  EXPECT_EQ(c.n_token_types, 2);
  EXPECT_EQ(c.pooling, BertPooling::mean);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-12f);
}

TEST(Bert, MeanPoolingMatchesNaiveReference) {
  test::TempDir dir;
  const std::string path = write_model(dir, tiny_spec(1));
  auto m = load_ok(path);
  ASSERT_TRUE(m);
  auto ids = m->tokenize("the cat sat on the mat");
  ASSERT_TRUE(ids.ok());
  auto e = m->embed("the cat sat on the mat");
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_NEAR(l2(*e), 1.0, 1e-5);
  expect_near_reference(*e, Reference(path).embedding(*ids), 2e-4);
}

TEST(Bert, ClsPoolingMatchesNaiveReferenceAndDiffersFromMean) {
  test::TempDir dir;
  const std::string mean_path = write_model(dir, tiny_spec(1), "mean.gguf");
  const std::string cls_path = write_model(dir, tiny_spec(2), "cls.gguf");
  auto mean = load_ok(mean_path), cls = load_ok(cls_path);
  ASSERT_TRUE(mean && cls);
  EXPECT_EQ(cls->config().pooling, BertPooling::cls);
  auto ids = cls->tokenize(kSentence);
  ASSERT_TRUE(ids.ok());
  auto ec = cls->embed(kSentence), em = mean->embed(kSentence);
  ASSERT_TRUE(ec.ok() && em.ok());
  EXPECT_NEAR(l2(*ec), 1.0, 1e-5);
  expect_near_reference(*ec, Reference(cls_path).embedding(*ids), 2e-4);
  expect_near_reference(*em, Reference(mean_path).embedding(*ids), 2e-4);
  double diff = 0;
  for (size_t i = 0; i < ec->size(); ++i) diff += std::abs((*ec)[i] - (*em)[i]);
  EXPECT_GT(diff, 0.1);
  // The [CLS] embedding is the normalized first hidden row.
  auto h = cls->hidden_states(*ids);
  ASSERT_TRUE(h.ok());
  std::vector<float> row(h->begin(), h->begin() + 32);
  const double n = l2(row);
  for (size_t i = 0; i < row.size(); ++i) EXPECT_NEAR((*ec)[i], row[i] / n, 1e-5);
}

TEST(Bert, ThreadPoolGivesTheSameEmbedding) {
  test::TempDir dir;
  auto m = load_ok(write_model(dir, tiny_spec()));
  ASSERT_TRUE(m);
  ThreadPool pool(3);
  auto a = m->embed(kSentence), b = m->embed(kSentence, &pool);
  ASSERT_TRUE(a.ok() && b.ok());
  for (size_t i = 0; i < a->size(); ++i) EXPECT_NEAR((*a)[i], (*b)[i], 1e-5);
}

TEST(Bert, FramesWithClsAndSepAndTruncatesToContext) {
  test::TempDir dir;
  auto m = load_ok(write_model(dir, tiny_spec()));
  ASSERT_TRUE(m);
  const auto& v = m->tokenizer().vocab();
  const int32_t cls = *v.find("[CLS]"), sep = *v.find("[SEP]");
  auto ids = m->tokenize("the cat");
  ASSERT_TRUE(ids.ok());
  ASSERT_EQ(ids->size(), 4u);
  EXPECT_EQ((*ids)[0], cls);
  EXPECT_EQ((*ids)[1], *v.find("\xE2\x96\x81the"));
  EXPECT_EQ((*ids)[2], *v.find("\xE2\x96\x81" "cat"));
  EXPECT_EQ((*ids)[3], sep);

  // 30 words > n_ctx 16: cut to 16 tokens, still ending in [SEP], embedding = that of the cut ids.
  std::string long_text;
  for (int i = 0; i < 30; ++i) long_text += "dog ";
  auto long_ids = m->tokenize(long_text);
  ASSERT_TRUE(long_ids.ok());
  ASSERT_EQ(long_ids->size(), 16u);
  EXPECT_EQ(long_ids->front(), cls);
  EXPECT_EQ(long_ids->back(), sep);
  EXPECT_EQ((*long_ids)[14], *v.find("\xE2\x96\x81" "dog"));
  auto e = m->embed(long_text), et = m->embed_tokens(*long_ids);
  ASSERT_TRUE(e.ok() && et.ok());
  EXPECT_EQ(*e, *et);

  // Token ids themselves beyond the context, or outside the vocabulary, are errors.
  std::vector<int32_t> too_many(17, cls);
  EXPECT_FALSE(m->embed_tokens(too_many).ok());
  EXPECT_FALSE(m->embed_tokens(std::vector<int32_t>{cls, 200, sep}).ok());
  EXPECT_FALSE(m->embed_tokens(std::vector<int32_t>{cls, -1, sep}).ok());
  EXPECT_FALSE(m->embed_tokens(std::vector<int32_t>{}).ok());
}

TEST(Bert, RealBgeVocabularyTokenizesLikeBert) {
  test::TempDir dir;
  SyntheticSpec s = tiny_spec();
  s.vocab_from = test::shared_path("vocab/ggml-vocab-bert-bge.gguf");
  s.n_ctx = 64;
  auto m = load_ok(write_model(dir, s));
  ASSERT_TRUE(m);
  EXPECT_EQ(m->config().n_vocab, 30522);
  auto ids = m->tokenize("Hello world!");
  ASSERT_TRUE(ids.ok());
  // bert-base-uncased / bge: [CLS]=101 hello=7592 world=2088 !=999 [SEP]=102
  EXPECT_EQ(*ids, (std::vector<int32_t>{101, 7592, 2088, 999, 102}));
  auto e = m->embed("Hello world!");
  ASSERT_TRUE(e.ok());
  EXPECT_NEAR(l2(*e), 1.0, 1e-5);
}

TEST(Bert, AttentionIsBidirectionalAndPositionAware) {
  test::TempDir dir;
  auto m = load_ok(write_model(dir, tiny_spec()));
  ASSERT_TRUE(m);
  auto a = m->tokenize("the cat sat on the mat");
  ASSERT_TRUE(a.ok());
  std::vector<int32_t> b = *a;
  b[b.size() - 2] = *m->tokenizer().vocab().find("\xE2\x96\x81" "dog");  // change the last word
  auto ha = m->hidden_states(*a), hb = m->hidden_states(b);
  ASSERT_TRUE(ha.ok() && hb.ok());
  double diff0 = 0;
  for (int i = 0; i < 32; ++i) diff0 += std::abs((*ha)[i] - (*hb)[i]);
  EXPECT_GT(diff0, 1e-3) << "the first token did not see a later token";

  // Swapping two words changes the mean embedding (absolute positions matter).
  std::vector<int32_t> c = *a;
  std::swap(c[1], c[3]);
  auto ea = m->embed_tokens(*a), ec = m->embed_tokens(c);
  ASSERT_TRUE(ea.ok() && ec.ok());
  double diff = 0;
  for (size_t i = 0; i < ea->size(); ++i) diff += std::abs((*ea)[i] - (*ec)[i]);
  EXPECT_GT(diff, 1e-3);
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += static_cast<double>(a[i]) * b[i];
  return d / (l2(a) * l2(b));
}

TEST(Bert, StoredWeightTypesGiveCloseEmbeddings) {
  test::TempDir dir;
  SyntheticSpec s = tiny_spec();
  const std::string f32_path = write_model(dir, s, "f32.gguf");
  s.weight_type = DType::f16;
  const std::string f16_path = write_model(dir, s, "f16.gguf");
  auto f32 = load_ok(f32_path), f16 = load_ok(f16_path);
  ASSERT_TRUE(f32 && f16);
  auto e32 = f32->embed(kSentence), e16 = f16->embed(kSentence);
  ASSERT_TRUE(e32.ok() && e16.ok());
  EXPECT_GT(cosine(*e32, *e16), 0.999);
  EXPECT_LT(cosine(*e32, *e16), 1.0 - 1e-9);  // really computed from other bits

  // Quantized through the model quantizer: matrices Q8_0 / Q4_0, vectors stay F32.
  auto in = format::read_gguf(f32_path);
  ASSERT_TRUE(in.ok());
  ThreadPool pool(2);
  for (const auto& [preset, min_cos] : {std::pair{QuantPreset::q8_0, 0.995}, std::pair{QuantPreset::q4_0, 0.9}}) {
    auto q = quantize_model(*in, preset, pool);
    ASSERT_TRUE(q.ok()) << q.error().message;
    EXPECT_NE(q->find_tensor("blk.0.attn_q.weight")->type, DType::f32);
    const std::string path = dir.file(std::string(quant_preset_name(preset)) + ".gguf");
    ASSERT_TRUE(format::write_gguf(path, *q).ok());
    auto m = load_ok(path);
    ASSERT_TRUE(m);
    auto e = m->embed(kSentence, &pool);
    ASSERT_TRUE(e.ok()) << e.error().message;
    EXPECT_NEAR(l2(*e), 1.0, 1e-5);
    EXPECT_GT(cosine(*e32, *e), min_cos) << quant_preset_name(preset);
  }
}

TEST(Bert, NamedShapesAndGeneratedVocabulary) {
  SyntheticSpec s;
  ASSERT_TRUE(apply_synthetic_shape(s, "bert-bge-small").ok());
  EXPECT_EQ(s.arch, "bert");
  EXPECT_EQ(s.n_embd, 384);
  EXPECT_EQ(s.n_layer, 12);
  EXPECT_EQ(s.n_head, 12);
  EXPECT_EQ(s.n_ff, 1536);
  EXPECT_EQ(s.n_ctx, 512);
  EXPECT_EQ(s.pooling_type, 2u);  // bge pools [CLS]
  SyntheticSpec t;
  ASSERT_TRUE(apply_synthetic_shape(t, "bert-tiny").ok());
  EXPECT_EQ(t.pooling_type, 1u);
  auto f = make_synthetic_model(t);
  ASSERT_TRUE(f.ok()) << f.error().message;
  auto m = BertModel::from_file(std::move(f).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->config().n_embd, 64);
  EXPECT_EQ((*m)->config().n_vocab, 512);
  // Unknown words become [UNK]; known ones are pieces of the generated vocabulary.
  auto ids = (*m)->tokenize("hello zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");
  ASSERT_TRUE(ids.ok());
  const auto& v = (*m)->tokenizer().vocab();
  EXPECT_EQ(*ids, (std::vector<int32_t>{*v.find("[CLS]"), *v.find("\xE2\x96\x81hello"), *v.find("[UNK]"), *v.find("[SEP]")}));
  // A vocabulary too small for the generated pieces is an error.
  t.n_vocab = 10;
  EXPECT_FALSE(make_synthetic_model(t).ok());
}

format::ModelFile tiny_file() {
  auto f = make_synthetic_model(tiny_spec());
  EXPECT_TRUE(f.ok());
  return std::move(f).value();
}

std::string from_file_error(format::ModelFile f) {
  auto m = BertModel::from_file(std::move(f));
  EXPECT_FALSE(m.ok());
  return m.ok() ? std::string() : m.error().message;
}

TEST(Bert, ErrorsNameWhatTheFileGotWrong) {
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
    EXPECT_NE(from_file_error(std::move(f)).find("position_embd.weight"), std::string::npos);
  }
  {  // wrong architecture: a llama model
    auto f = make_synthetic_model(SyntheticSpec{});
    ASSERT_TRUE(f.ok());
    const std::string err = from_file_error(std::move(f).value());
    EXPECT_NE(err.find("'llama'"), std::string::npos) << err;
  }
  {  // heads that do not divide the width
    auto f = tiny_file();
    f.metadata.set("bert.attention.head_count", format::GgufValue::from_u32(5));
    EXPECT_NE(from_file_error(std::move(f)).find("head_count"), std::string::npos);
  }
  {  // unsupported pooling
    auto f = tiny_file();
    f.metadata.set("bert.pooling_type", format::GgufValue::from_u32(3));
    EXPECT_NE(from_file_error(std::move(f)).find("pooling_type"), std::string::npos);
  }
  {  // a non-WordPiece vocabulary
    auto f = tiny_file();
    f.metadata.set("tokenizer.ggml.model", format::GgufValue::from_string("llama"));
    EXPECT_NE(from_file_error(std::move(f)).find("tokenizer.ggml.model"), std::string::npos);
  }
  {  // a missing hyper-parameter
    auto f = tiny_file();
    format::ModelFile g;
    for (const auto& [k, v] : f.metadata.entries())
      if (k != "bert.block_count") g.metadata.set(k, v);
    g.tensors = f.tensors;
    EXPECT_NE(from_file_error(std::move(g)).find("bert.block_count"), std::string::npos);
  }
  EXPECT_FALSE(BertModel::load("/nonexistent/bert.gguf").ok());
}

}  // namespace
}  // namespace edgelm::model
