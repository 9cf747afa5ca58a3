// Goldens recorded from ik_llama.cpp (the reference engine; not available in CI) on the tiny
// synthetic embedding decoders of synthetic_embedding_decoders.cpp (seed 7, the test vocabularies),
// measured with its C API at 2 threads, flash attention, f16 KV cache (its CPU flash attention
// takes no f32 cache):
//  - embeddinggemma-tiny: ik has no gemma-embedding; the same weights written as arch gemma3 and
//    run with attention_type non-causal, mean pooling. Texts of at most 5 tokens: ik's non-causal
//    mask limits only the past (pos - n_swa), ours is the published symmetric window (+-4 here),
//    and both see everything below that length. Our output applies dense_2 / dense_3 to the pooled
//    state; the test applies them to ik's in double precision.
//  - qwen3-embedding-tiny: last pooling, causal.
//  - qwen3-reranker-tiny: the same weights without cls.output; ik's last-position logits of "yes"
//    (8505) and "no" (3919), P(yes) = softmax over the two. Our prompt tokenization of the two
//    pairs is recorded too.
#include <gtest/gtest.h>

#include <cmath>

#include "embed/text_encoder.h"
#include "format/gguf_writer.h"
#include "model/synthetic.h"
#include "naive_decoder_embedder.h"
#include "support/test_data.h"

namespace edgelm {
namespace {

const std::vector<std::vector<int32_t>> kGemmaIds = {
    {2, 450, 1014, 3},
    {2, 450, 1014, 278, 3},
};
// kGemmaIkMean
constexpr float kGemmaIkMean[][64] = {
    {0.018633366f,  0.36360598f,   -0.53807962f,  0.026016623f, -0.0031946003f, 0.16318285f,    -0.0090318024f,
     0.37798122f,   -0.29364109f,  0.67497295f,   -0.17951599f, -0.49498132f,   0.32970759f,    -0.63996267f,
     -0.41680747f,  0.58233815f,   0.33546087f,   0.030441359f, 0.047992527f,   0.29641604f,    0.44885051f,
     0.6554634f,    0.37428752f,   0.13581455f,   0.098486945f, -0.6189605f,    0.074862152f,   -0.082062423f,
     -0.10922909f,  0.36450073f,   -0.92112678f,  -0.42553896f, 0.88791257f,    -0.0011325628f, -0.73156846f,
     -0.070395507f, -0.048316263f, -0.089762837f, -0.6646201f,  -0.19836266f,   -0.88892335f,   0.62109208f,
     -0.053590573f, 0.0012868792f, -0.63015622f,  0.5547151f,   -0.86390084f,   0.40034237f,    -0.55219102f,
     -0.079209015f, 0.50103343f,   1.0160479f,    1.0898297f,   0.22074905f,    -0.27023908f,   0.18872009f,
     -0.67663276f,  0.89195305f,   0.25296193f,   -0.27353451f, -0.71058011f,   -0.38545924f,   0.82667863f,
     -0.062597975f},
    {-0.15685727f, -0.074997716f, -0.84182644f,  0.48975792f,   0.16518161f,   0.057800535f, -0.14312898f,
     0.045835491f, 0.12565002f,   0.49882844f,   -0.053329561f, -0.54650497f,  0.21224646f,  -0.29134589f,
     -0.5847435f,  0.61688161f,   0.30777758f,   -0.034132738f, 0.015927372f,  0.43249509f,  0.22910279f,
     0.45378971f,  0.23727475f,   0.0026473047f, 0.20249073f,   -0.084218845f, -0.17847626f, 0.13235226f,
     0.090485141f, 0.49843511f,   -0.93583673f,  -0.14584781f,  0.72067928f,   -0.20318171f, -0.99859327f,
     0.29922783f,  -0.17419282f,  -0.16434769f,  -1.0517491f,   -0.35726422f,  -0.92442411f, 0.38132432f,
     -0.10356484f, -0.023905203f, -0.38359985f,  0.64372975f,   -0.38788125f,  0.15236986f,  -0.084688857f,
     -0.37339893f, 0.29860398f,   0.78014684f,   1.0299044f,    0.18320538f,   -0.36741513f, -0.016572036f,
     -0.35976303f, 0.44954956f,   0.18701604f,   -0.35607028f,  -0.77282727f,  -0.11313141f, 0.415025f,
     0.10305986f},
};
const std::vector<std::vector<int32_t>> kQwenIds = {
    {100, 2000, 3000, 4000, 50256},
    {400, 500, 600, 700, 800, 900, 1000, 50256},
};
// kQwenIkLast
constexpr float kQwenIkLast[][64] = {
    {-0.088352956f, 0.54221767f,  -0.48860395f, -0.16289043f, -0.11055908f, -1.0097058f,  2.2275176f,   0.19554108f,
     0.9987821f,    -0.01860645f, 0.9290821f,   -0.6858055f,  0.83945817f,  -1.5289433f,  0.83671069f,  -1.8651591f,
     0.37997654f,   -2.2318814f,  -1.4869676f,  0.67772877f,  0.27489683f,  0.30698159f,  0.85732091f,  0.089906454f,
     -1.0545373f,   -0.63057452f, 0.78679335f,  0.32024941f,  0.045811851f, -1.7560632f,  0.32810697f,  1.2718004f,
     -1.9955205f,   -2.0927229f,  1.5070328f,   0.18110673f,  0.51621407f,  -0.56717312f, -2.8334904f,  0.21881159f,
     0.0658729f,    -0.90068805f, 1.1187081f,   -1.0664952f,  1.924777f,    -2.0503635f,  0.15283087f,  -0.1211187f,
     -0.51199275f,  0.30382246f,  0.0790696f,   -0.4353011f,  0.50905645f,  0.53988492f,  0.5219481f,   0.48776349f,
     1.0515461f,    0.20967057f,  0.75845993f,  -0.77907932f, 0.13693854f,  0.39445761f,  -0.41102987f, -0.29737333f},
    {-0.54813868f, 0.75081193f,  -0.71703953f,   -0.99424654f, -0.34428963f,  -1.9294527f,   0.79079246f,
     -0.02859447f, -0.28050286f, -0.040039275f,  -1.5479848f,  -1.6563984f,   1.4078494f,    -1.3359035f,
     0.76758093f,  -0.90202218f, -0.32240257f,   -1.445678f,   -1.6160778f,   0.48095897f,   1.0178126f,
     0.41019127f,  -0.76770616f, -1.3777987f,    -0.67261124f, 1.1679021f,    2.1040816f,    0.32761574f,
     -0.87540644f, -1.1315066f,  0.39499292f,    0.50123471f,  -1.6212933f,   -1.2074224f,   1.7756056f,
     0.21010072f,  -0.22826838f, -0.0086439364f, -1.027298f,   0.26549238f,   0.76050115f,   -1.3024827f,
     0.5336172f,   -1.0405873f,  0.91244954f,    -1.8200662f,  1.2877474f,    -0.24266316f,  -0.39693964f,
     -0.20073688f, 0.10247271f,  -0.054300163f,  -0.94180512f, 1.3413081f,    -0.19443034f,  -0.72080922f,
     0.67335349f,  -0.65509003f, 0.5504427f,     -0.64508533f, -0.038935184f, -0.077081531f, 0.14929315f,
     -2.6189587f},
};
const std::vector<std::vector<int32_t>> kRerankIds = {
    {50257, 10057, 198,   29511, 1771,  262,   16854, 11185, 262,   5359,  1912,  319,   262,   43301, 290,
     262,   20689, 2810,  13,    5740,  326,   262,   3280,  460,   691,   307,   366,   8505,  1,     393,
     366,   3919,  1911,  50258, 198,   50257, 7220,  198,   27,    43993, 31175, 11259, 257,   3992,  2989,
     12405, 11,    19818, 5981,  22674, 326,   3280,  262,   12405, 198,   27,    20746, 31175, 1867,  318,
     262,   3139,  286,   2807,  30,    198,   27,    24941, 31175, 383,   3139,  286,   2807,  318,   11618,
     13,    50258, 198,   50257, 562,   10167, 198,   50259, 628,   50260, 628},
    {50257, 10057, 198, 29511, 1771, 262,   16854, 11185, 262,   5359,  1912,  319,   262,  43301, 290,   262,
     20689, 2810,  13,  5740,  326,  262,   3280,  460,   691,   307,   366,   8505,  1,    393,   366,   3919,
     1911,  50258, 198, 50257, 7220, 198,   27,    43993, 31175, 11259, 257,   3992,  2989, 12405, 11,    19818,
     5981,  22674, 326, 3280,  262,  12405, 198,   27,    20746, 31175, 48605, 13522, 198,  27,    24941, 31175,
     24084, 318,   257, 2700,  13,   50258, 198,   50257, 562,   10167, 198,   50259, 628,  50260, 628},
};
// P(yes) of the two pairs from ik's logits (yes, no): (-2.59340954, 1.60085559), (-0.727213383, 3.20146394).
constexpr double kRerankIkPYes[] = {0.0148577398, 0.0192902393};

std::string write_tiny(const test::TempDir& dir, const std::string& name) {
  model::SyntheticSpec spec;
  EXPECT_TRUE(model::apply_synthetic_shape(spec, name).ok());
  spec.vocab_from =
      test::shared_path(spec.arch == "qwen3" ? "vocab/ggml-vocab-gpt-2.gguf" : "vocab/ggml-vocab-llama-spm.gguf");
  spec.seed = 7;
  auto file = model::make_synthetic_model(spec);
  EXPECT_TRUE(file.ok());
  const std::string path = dir.file(name + ".gguf");
  EXPECT_TRUE(format::write_gguf(path, *file).ok());
  return path;
}

template <typename V>
double cosine(const std::vector<float>& a, const V& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += a[i] * static_cast<double>(b[i]);
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

TEST(DecoderGoldens, GemmaEmbeddingMatchesIkNonCausalGemma3) {
  test::TempDir dir;
  const std::string path = write_tiny(dir, "embeddinggemma-tiny");
  auto enc = embed::open_text_encoder(path);
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  ThreadPool pool(2);
  auto out = (*enc)->encode(kGemmaIds, embed::Pooling::mean, pool);
  ASSERT_TRUE(out.ok());
  auto file = format::open_model_file(path);
  ASSERT_TRUE(file.ok());
  test::NaiveDecoderEmbedder dense(*file, {64, 0, 2, 1, 32});
  for (size_t i = 0; i < kGemmaIds.size(); ++i) {
    const std::vector<double> ik(std::begin(kGemmaIkMean[i]), std::end(kGemmaIkMean[i]));
    const auto want = dense.apply(dense.apply(ik, "dense_2.weight"), "dense_3.weight");
    EXPECT_GT(cosine((*out)[i], want), 0.99999) << i;
    for (size_t k = 0; k < want.size(); ++k) EXPECT_NEAR((*out)[i][k], want[k], 2e-3) << i << " " << k;
  }
}

TEST(DecoderGoldens, Qwen3EmbeddingMatchesIkLastPooling) {
  test::TempDir dir;
  auto enc = embed::open_text_encoder(write_tiny(dir, "qwen3-embedding-tiny"));
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  ThreadPool pool(2);
  auto out = (*enc)->encode(kQwenIds, embed::Pooling::last, pool);
  ASSERT_TRUE(out.ok());
  for (size_t i = 0; i < kQwenIds.size(); ++i) {
    EXPECT_GT(cosine((*out)[i], kQwenIkLast[i]), 0.99999) << i;
    for (size_t k = 0; k < 64; ++k) EXPECT_NEAR((*out)[i][k], kQwenIkLast[i][k], 2e-3) << i << " " << k;
  }
}

TEST(DecoderGoldens, Qwen3RerankerMatchesIkYesNoLogits) {
  test::TempDir dir;
  auto enc = embed::open_text_encoder(write_tiny(dir, "qwen3-reranker-tiny"));  // cls.output layout
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  auto a = (*enc)->tokenize_pair("What is the capital of China?", "The capital of China is Beijing.");
  auto b = (*enc)->tokenize_pair("Explain gravity", "Gravity is a force.");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, kRerankIds[0]);
  EXPECT_EQ(*b, kRerankIds[1]);
  ThreadPool pool(2);
  auto out = (*enc)->encode(kRerankIds, embed::Pooling::rank, pool);
  ASSERT_TRUE(out.ok());
  // 3e-4: ik's f16 KV cache and flash attention move its yes/no logits by up to ~1e-2 (measured:
  // |dP| 6e-5 and 1.9e-4 here).
  for (size_t i = 0; i < kRerankIds.size(); ++i) EXPECT_NEAR((*out)[i][0], kRerankIkPYes[i], 3e-4) << i;
}

}  // namespace
}  // namespace edgelm
