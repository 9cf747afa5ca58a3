// Greedy continuations after an image, against the reference engine, for the Gemma 3 (gemma3),
// SmolVLM (idefics3) and Gemma 4 (gemma4v) projectors: five prompts of text + one image + text, 24 greedy tokens each.
// Recorded once from ik_llama.cpp (commit 8337e4cd3, CPU, F16 KV, one thread) through its C API as
// mtmd decodes an image: the text before it, the image's soft tokens from the reference's own
// clip encoder as embeddings in one batch (causal attention off for gemma3, as mtmd does for the
// Gemma projectors; on for idefics3), then the text after it, then greedy decoding. For gemma3 the
// reference's clip.cpp had the one-line fix of its pool's ggml_cont_4d described in
// tests/vision/test_golden.cpp (without it its soft tokens are unrelated to the image).
// The files are those of
//   edgelm synth --arch gemma3 --layers 6 --ctx 2048 --seed 1 --vocab ../shared/vocab/ggml-vocab-llama-spm.gguf
//     -o lm.gguf --mmproj-output mmproj.gguf --mmproj-shape tiny --mmproj-dim 64
//   edgelm synth --arch llama --ctx 2048 --seed 1 --vocab (the same) -o lm.gguf --mmproj-output mmproj.gguf
//     --mmproj-shape tiny-idefics3 --mmproj-dim 64
//   edgelm synth --shape gemma4-tiny --ctx 2048 --seed 1 --vocab (the same) -o lm.gguf --mmproj-output mmproj.gguf
//     --mmproj-shape tiny-gemma4v --mmproj-dim 64   (gemma4v: a 48 x 36 image, 12 soft tokens; the
//     reference's clip.cpp with the two fixes of tests/vision/test_golden.cpp)
// (mmproj seed 2), rebuilt here byte for byte, and the image is an LCG in [-1, 1) rounded to 1/1024
// at the encoder's size (112 px: 4 soft tokens; 64 px: one tile, 4 tokens). Here each engine's own
// encoder makes the soft tokens (test_golden.cpp checks they agree) and the batching engine decodes
// (the serving path: the image as a PromptImage in 16-token chunks of text). The bar is
// at least 4 of the 5 prompts identical over 24 tokens (the reference's F16 KV can flip a near
// tie); every prompt is checked and reported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/step_model.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "reference_goldens.h"
#include "support/test_data.h"
#include "vision/synthetic_mmproj.h"
#include "vision/vit.h"

namespace edgelm {
namespace {

struct Prompt {
  std::vector<int32_t> pre, post, want;
};

struct Case {
  const char* name;
  const char* text_shape;  // model::apply_synthetic_shape, or an architecture with n_layer layers
  int32_t n_layer;
  const char* mmproj_shape;
  bool causal;
  int32_t width = 0, height = 0;  // the image (0: the encoder's image_size, square)
  std::vector<Prompt> prompts;
};

const std::vector<int32_t> kPre[5] = {{1, 17, 101, 33}, {1, 2048, 15, 900, 4000}, {1, 320}, {1, 7251, 1070, 29901},
                                      {1, 31000, 512}};
const std::vector<int32_t> kPost[5] = {
    {45, 250, 7, 388}, {29889}, {1724, 338, 297, 278, 1967, 29973, 13}, {8, 9, 10, 11, 12, 13, 14, 15}, {30000, 77, 1234, 5678, 26}};

Case gemma3_case() {
  const std::vector<int32_t> want[5] = {
      {11223, 7056, 20104, 24108, 18271, 22333, 24511, 31203, 24299, 29653, 1196, 7553,
       16874, 15009, 25123, 385, 5033, 23682, 3547, 3476, 9226, 22632, 29392, 20653},
      {28294, 25250, 30651, 23648, 4773, 30875, 621, 22210, 15202, 25250, 134, 1332,
       8171, 30255, 31524, 30414, 14418, 9146, 21832, 30476, 27128, 1734, 28224, 6458},
      {22600, 11709, 10999, 3967, 15770, 25016, 25322, 23126, 23941, 25647, 12188, 17461,
       18501, 3724, 2306, 608, 1642, 14899, 8426, 20812, 22464, 19696, 7930, 14112},
      {19378, 19183, 31865, 24652, 30820, 13305, 13693, 8228, 13755, 27390, 1705, 761,
       9957, 1631, 16424, 22048, 11822, 29389, 24036, 13236, 29949, 15348, 12411, 24439},
      {27687, 4281, 26413, 15567, 1955, 12481, 18815, 18283, 18439, 24012, 13758, 8002,
       30395, 31882, 8474, 31422, 16979, 29842, 26211, 27911, 31703, 11934, 9238, 28961},
  };
  Case c{"gemma3", "gemma3", 6, "tiny", false, 0, 0, {}};
  for (int i = 0; i < 5; ++i) c.prompts.push_back({kPre[i], kPost[i], want[i]});
  return c;
}

Case idefics3_case() {
  const std::vector<int32_t> want[5] = {
      {1069, 11198, 1720, 27478, 25970, 17226, 11198, 4284, 30033, 3948, 10017, 11166,
       31885, 27364, 1474, 6017, 10732, 26156, 26641, 22054, 6017, 18371, 6978, 13254},
      {12751, 16998, 15676, 9278, 15400, 7513, 13194, 14058, 24801, 25879, 1299, 10454,
       24134, 16186, 27286, 24801, 25879, 1299, 10454, 24134, 24221, 9300, 2776, 24988},
      {13844, 23742, 10851, 9119, 31506, 13913, 2852, 8013, 26691, 14522, 14423, 12141,
       18231, 25982, 22420, 29962, 26826, 2061, 26304, 1051, 17726, 22150, 15790, 14752},
      {15309, 27388, 29157, 22797, 21355, 23377, 10767, 17696, 17034, 3872, 1206, 26646,
       23498, 13343, 16950, 4610, 19962, 6017, 28429, 1006, 1745, 15140, 15410, 12065},
      {12081, 30566, 27401, 16126, 19256, 30840, 152, 16651, 10982, 19086, 19425, 25168,
       25407, 7504, 19532, 26135, 5178, 10992, 2037, 28287, 17322, 8395, 5843, 30278},
  };
  Case c{"idefics3", "llama", 2, "tiny-idefics3", true, 0, 0, {}};
  for (int i = 0; i < 5; ++i) c.prompts.push_back({kPre[i], kPost[i], want[i]});
  return c;
}

// The random tiny Gemma 4 falls into repeating a token within a few steps (its continuations are
// weaker evidence than the others'); test_reference_gemma4_image.cpp also checks its logits.
Case gemma4v_case() {
  const std::vector<int32_t> want[5] = {
      {388, 25802, 25802, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807,
       16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807, 16807},
      {18358, 5240, 5240, 5240, 5240, 21600, 21600, 21600, 21600, 21600, 21600, 21600,
       21600, 8075, 19466, 8110, 8110, 8110, 8110, 8110, 8110, 8110, 8110, 8110},
      {27705, 27705, 27705, 27705, 27705, 27705, 27705, 27705, 27705, 27705, 27705, 27705,
       27705, 27705, 27705, 27705, 27705, 27705, 27705, 27705, 27705, 27705, 27705, 27705},
      {15, 11206, 11206, 11206, 11206, 11206, 11206, 11206, 11206, 11206, 11206, 11206,
       11206, 11206, 11206, 11206, 11206, 11206, 11206, 11206, 11206, 11206, 11206, 11206},
      {5871, 5871, 5871, 5871, 5871, 5871, 5871, 5871, 5871, 5871, 5871, 5871,
       5871, 5871, 5871, 5871, 5871, 25977, 21264, 5924, 5924, 5924, 5924, 5924},
  };
  Case c{"gemma4v", "gemma4-tiny", 0, "tiny-gemma4v", false, 48, 36, {}};
  for (int i = 0; i < 5; ++i) c.prompts.push_back({kPre[i], kPost[i], want[i]});
  return c;
}

// The encoder's soft tokens for the harness's image (planar CHW from the LCG's interleaved RGB).
std::vector<float> soft_tokens(const Case& c, int& n_tokens) {
  vision::SyntheticMmprojSpec s;
  EXPECT_TRUE(vision::apply_mmproj_shape(s, c.mmproj_shape).ok());
  s.projection_dim = 64;
  s.seed = 2;
  auto file = vision::make_synthetic_mmproj(s);
  EXPECT_TRUE(file.ok());
  auto enc = vision::VisionEncoder::load(std::move(*file));
  EXPECT_TRUE(enc.ok()) << enc.error().message;
  const int W = c.width > 0 ? c.width : (*enc)->config().image_size;
  const int H = c.height > 0 ? c.height : (*enc)->config().image_size;
  const std::vector<float> chw = test::harness_image_chw(W, H);
  n_tokens = (*enc)->n_output_tokens(W, H);
  std::vector<float> out(static_cast<size_t>(n_tokens) * 64);
  ThreadPool pool(2);
  vision::VisionScratch scratch;
  EXPECT_TRUE((*enc)->encode(chw.data(), W, H, out, pool, scratch).ok());
  return out;
}

std::unique_ptr<model::Model> text_model(const Case& c) {
  model::SyntheticSpec s;
  if (c.n_layer == 0) {
    EXPECT_TRUE(model::apply_synthetic_shape(s, c.text_shape).ok());
  } else {
    s.arch = c.text_shape;
    s.n_layer = c.n_layer;
  }
  s.n_ctx = 2048;
  s.vocab_from = test::shared_path("vocab/ggml-vocab-llama-spm.gguf");
  s.seed = 1;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok());
  auto m = model::Model::load(std::move(*file));
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(*m);
}

void check_case(const Case& c) {
  const std::unique_ptr<model::Model> m = text_model(c);
  ASSERT_NE(m, nullptr);
  int n_img = 0;
  auto embd = std::make_shared<const std::vector<float>>(soft_tokens(c, n_img));
  ASSERT_GT(n_img, 0);
  ThreadPool pool(2);
  engine::ModelRunner runner(*m, pool);
  engine::EngineOptions o;
  o.kv_type = kv::KvType::f32;
  o.kv_memory_bytes = size_t{32} << 20;
  o.scheduler.max_batch_tokens = 16;
  o.scheduler.max_batch_size = 4;
  auto e = engine::Engine::create(runner, nullptr, o);
  ASSERT_TRUE(e.ok()) << e.error().message;
  int identical = 0;
  for (size_t i = 0; i < c.prompts.size(); ++i) {
    const Prompt& p = c.prompts[i];
    engine::Request r;
    r.prompt = p.pre;
    r.prompt.insert(r.prompt.end(), n_img, 5);  // placeholders: the image rows replace their embeddings
    r.prompt.insert(r.prompt.end(), p.post.begin(), p.post.end());
    engine::PromptImage im;
    im.pos0 = static_cast<int32_t>(p.pre.size());
    im.n_tokens = n_img;
    im.embd = embd;
    im.causal = c.causal;
    r.images.push_back(im);
    r.sampling.temperature = 0.0f;
    r.max_new_tokens = static_cast<int32_t>(p.want.size());
    r.stop_at_eog = false;
    auto id = (*e)->add_request(std::move(r));
    ASSERT_TRUE(id.ok()) << id.error().message;
    std::vector<int32_t> got;
    while ((*e)->has_work())
      for (const engine::TokenEvent& ev : (*e)->step())
        if (ev.token >= 0) got.push_back(ev.token);
    size_t same = 0;
    while (same < got.size() && same < p.want.size() && got[same] == p.want[same]) ++same;
    std::printf("%s prompt %zu: %zu of %zu greedy tokens equal the reference's\n", c.name, i, same, p.want.size());
    identical += got == p.want ? 1 : 0;
  }
  EXPECT_GE(identical, 4) << c.name << ": the issue asks at least 4 of 5 prompts identical over 24 tokens";
}

TEST(ReferenceImageGreedy, Gemma3MatchesTheReferenceEngine) { check_case(gemma3_case()); }

TEST(ReferenceImageGreedy, Idefics3MatchesTheReferenceEngine) { check_case(idefics3_case()); }

TEST(ReferenceImageGreedy, Gemma4vMatchesTheReferenceEngine) { check_case(gemma4v_case()); }

}  // namespace
}  // namespace edgelm
