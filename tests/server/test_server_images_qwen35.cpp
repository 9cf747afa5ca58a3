// Qwen3.5 (qwen35, hybrid) with the Qwen3-VL projector (qwen3vl_merger) over real sockets: a
// synthetic qwen35 model with tok512's vocabulary padded by <|vision_start|>, <|vision_end|> and
// <|image_pad|>, and the tiny-qwen3vl mmproj (patch 4, 2 x 2 merge: 8 px per soft token):
//  - an image is smart-resized to multiples of 8 px with at least 64 merged tokens (the
//    processor's min_pixels at Qwen3.5's 32 px per token): the 16 x 8 PNG becomes 96 x 48 px, a
//    12 x 6 grid of 72 tokens, the 8 x 16 one 6 x 12; the prompt form is "<|vision_start|>" + n x
//    "<|image_pad|>" + "<|vision_end|>", one causal span with its grid (the M-RoPE positions);
//  - max_image_tokens caps the grid (the server passes --max-batch-tokens);
//  - chat completions (plain and streamed) and /predict answer 200 with the image in the prompt;
//    the same image again hits the KV prefix (through the recurrent-state snapshots), another
//    image with the same text does not;
//  - the startup check wants a qwen35 model for a qwen3vl mmproj.
#include <gtest/gtest.h>

#include "image_server.h"
#include "model/synthetic.h"
#include "serve/image_prompt.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::test {
namespace {

std::string write_qwen35(const TempDir& dir) {
  model::SyntheticSpec s;
  s.arch = "qwen35";
  s.n_embd = kEmbd;
  s.n_layer = 4;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.head_dim = 16;
  s.n_rot = 8;
  s.n_ff = 128;
  s.n_ctx = 1024;
  s.vocab_from = shared_path("models/tok512.bin");
  s.n_vocab = 515;
  s.pad_vocab = true;
  s.pad_tokens = {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>"};
  s.seed = 75;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  const std::string path = dir.file("qwen35-vision.gguf");
  EXPECT_TRUE(format::write_gguf(path, *file).ok());
  return path;
}

std::string write_qwen3vl_mmproj(const TempDir& dir) {
  return write_mmproj_shape(dir, "tiny-qwen3vl", kEmbd, "mmproj-qwen3vl.gguf");
}

std::string layout(int n) {
  std::string s = "<|vision_start|>";
  for (int i = 0; i < n; ++i) s += "<|image_pad|>";
  return s + "<|vision_end|>";
}

json chat_text(const std::string& image_text) {
  json content =
      json::array({{{"type", "text"}, {"text", "What is in this picture?"}}, {{"type", "text"}, {"text", image_text}}});
  return {{"messages", json::array({{{"role", "user"}, {"content", content}}})}, {"max_tokens", 4}, {"temperature", 0}};
}

class ServerImagesQwen35 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    model_ = write_qwen35(*dir_);
    mmproj_ = write_qwen3vl_mmproj(*dir_);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  inline static TempDir* dir_ = nullptr;
  inline static std::string model_, mmproj_;
};

TEST_F(ServerImagesQwen35, SmartResizedGridPromptFormAndSpans) {
  serve::ImageInputOptions io;
  io.mmproj_path = mmproj_;
  auto in = serve::ImageInput::open(io);
  ASSERT_TRUE(in.ok()) << in.error().message;
  auto file = format::open_model_file(model_);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*in)->check_model(model::config_from_metadata(file->metadata).value()).ok());
  auto tok = tokenizer::load_tokenizer(file->metadata);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  ASSERT_TRUE((*in)->check_vocab((*tok)->vocab()).ok());
  struct Case {
    const char* png;
    int gw, gh;
  } cases[] = {{kWidePng, 12, 6}, {kTallPng, 6, 12}, {kRedPng, 8, 8}};
  for (const Case& c : cases) {
    auto im = (*in)->encode_url(data_url(c.png));
    ASSERT_TRUE(im.ok()) << im.error().message;
    EXPECT_EQ(im->embd->grid_w, c.gw);
    EXPECT_EQ(im->embd->grid_h, c.gh);
    ASSERT_EQ(im->embd->frames.size(), 1u);
    EXPECT_EQ(im->embd->frames[0]->size(), static_cast<size_t>(c.gw * c.gh * kEmbd));
    const std::vector<serve::EncodedImage> images{*im};
    auto text = (*in)->expand_markers(std::string("Look: ") + std::string(serve::kImageMarker) + " ok", images);
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_EQ(*text, "Look: " + layout(c.gw * c.gh) + " ok");
    const auto prompt = (*tok)->encode(*text, true, true);
    auto spans = (*in)->locate(prompt, (*tok)->vocab(), images);
    ASSERT_TRUE(spans.ok()) << spans.error().message;
    ASSERT_EQ(spans->size(), 1u);
    EXPECT_TRUE((*spans)[0].causal);
    EXPECT_EQ((*spans)[0].n_tokens, c.gw * c.gh);
    EXPECT_EQ((*spans)[0].grid_w, c.gw);
    EXPECT_EQ((*spans)[0].grid_h, c.gh);
  }
  // A cap on the tokens of one image shrinks the grid (min_pixels follows the cap).
  io.max_image_tokens = 16;
  auto capped = serve::ImageInput::open(io);
  ASSERT_TRUE(capped.ok());
  auto im = (*capped)->encode_url(data_url(kWidePng));
  ASSERT_TRUE(im.ok()) << im.error().message;
  EXPECT_LE(im->embd->grid_w * im->embd->grid_h, 16);
  EXPECT_GT(im->embd->grid_w, im->embd->grid_h) << "still wide";
}

TEST_F(ServerImagesQwen35, ChatsAndPredictGetTokensWithTheImageInThePrompt) {
  ImageServer s(model_, mmproj_, 3, 1000, "off", "qwen35-vision");
  const Reply a = post(s, "/v1/chat/completions", chat({image_part(data_url(kWidePng))}));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.js()["usage"]["completion_tokens"], 4);
  const Reply t = post(s, "/v1/chat/completions", chat_text(layout(72)));
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(a.js()["usage"]["prompt_tokens"], t.js()["usage"]["prompt_tokens"]) << "the 12 x 6 grid's 72 tokens";
  // Two images (a wide and a tall one) in one request, streamed.
  json two = chat({image_part(data_url(kWidePng)), image_part(data_url(kTallPng))});
  two["stream"] = true;
  const Reply sr = post(s, "/v1/chat/completions", two);
  ASSERT_EQ(sr.status, 200) << sr.body;
  EXPECT_TRUE(parse_sse(sr.body).done);
  // /predict with the image as base64.
  json p = {{"input", "What is this?"}, {"max_tokens", 3}, {"image", kTallPng}};
  const Reply pr = post(s, "/predict", p);
  ASSERT_EQ(pr.status, 200) << pr.body;
  EXPECT_EQ(pr.js()["usage"]["completion_tokens"], 3);
  EXPECT_GE(pr.js()["usage"]["prompt_tokens"].get<int>(), 72 + 2);
}

TEST_F(ServerImagesQwen35, TheSameImageHitsThePrefixAnotherDoesNot) {
  // A state snapshot at every KV block, so that a prompt this short has some to restore.
  ImageServer s(model_, mmproj_, 3, 1000, "off", "qwen35-vision", {}, /*state_snapshot_interval=*/1);
  const Reply a = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(a.status, 200) << a.body;
  const Reply b = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.js()["choices"][0]["message"]["content"], a.js()["choices"][0]["message"]["content"]);
  const int cached_same = b.js()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GT(cached_same, 0) << "the same image shares its KV prefix (a state snapshot)";
  const Reply c = post(s, "/v1/chat/completions", chat({image_part(data_url(kBluePng))}));
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.js()["usage"]["prompt_tokens"], a.js()["usage"]["prompt_tokens"]) << "same size, same grid";
  EXPECT_LT(c.js()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), cached_same)
      << "another image must not reuse the first one's KV or state";
}

TEST_F(ServerImagesQwen35, StartupCheckWantsQwen35) {
  serve::ImageInputOptions io;
  io.mmproj_path = mmproj_;
  auto in = serve::ImageInput::open(io);
  ASSERT_TRUE(in.ok()) << in.error().message;
  auto gemma = format::open_model_file(write_model(*dir_, true));
  ASSERT_TRUE(gemma.ok());
  const Status st = (*in)->check_model(model::config_from_metadata(gemma->metadata).value());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("qwen35"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace edgelm::test
