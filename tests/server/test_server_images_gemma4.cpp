// Gemma 4 (gemma4v projector) images over real sockets: a synthetic gemma4 text model (the
// gemma4-tiny shape: per-layer embeddings, shared KV, sliding layers) with stories260K's
// vocabulary padded by Gemma 4's image tokens, and a synthetic tiny-gemma4v mmproj (patch 4,
// 3 x 3 pool), served with image input (serve/image_input.h):
//  - the prompt form is Gemma4Processor's, "\n\n<|image>" + n x "<|image|>" + "<image|>\n\n", with n
//    this image's soft tokens: the processor resizes to multiples of 12 px holding 252 to 280
//    tokens, so an 8 x 8 PNG is 192 x 192 px (256 tokens) and a 16 x 8 one 276 x 144 (276);
//  - one bidirectional span per image; chat, streamed chat and /predict get 200 and tokens, the
//    prompt grows by the image's soft tokens and markers; the same image hits the encoder cache
//    and the KV prefix, another image with the same text does not;
//  - the startup check wants a gemma4 text model for a gemma4v mmproj.
#include <gtest/gtest.h>

#include "image_server.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "serve/image_prompt.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::test {
namespace {

std::string layout(int n) {
  std::string s = "\n\n<|image>";
  for (int i = 0; i < n; ++i) s += "<|image|>";
  return s + "<image|>\n\n";
}

json chat_text(const std::string& image_text) {
  json content =
      json::array({{{"type", "text"}, {"text", "What is in this picture?"}}, {{"type", "text"}, {"text", image_text}}});
  return {{"messages", json::array({{{"role", "user"}, {"content", content}}})}, {"max_tokens", 4}, {"temperature", 0}};
}

std::string write_gemma4_model(const TempDir& dir) {
  model::SyntheticSpec s;
  EXPECT_TRUE(model::apply_synthetic_shape(s, "gemma4-tiny").ok());
  s.n_ctx = 1024;
  s.vocab_from = shared_path("models/tok512.bin");
  s.n_vocab = 515;
  s.pad_vocab = true;
  s.seed = 73;
  auto file = model::make_synthetic_model(s);
  EXPECT_TRUE(file.ok()) << (file.ok() ? "" : file.error().message);
  auto tokens = *file->metadata.get_array("tokenizer.ggml.tokens").value();
  tokens[512] = format::GgufValue::from_string("<|image>");
  tokens[513] = format::GgufValue::from_string("<image|>");
  tokens[514] = format::GgufValue::from_string("<|image|>");
  file->metadata.set("tokenizer.ggml.tokens", format::GgufValue::from_array(format::GgufType::string, tokens));
  const std::string path = dir.file("gemma4-vision.gguf");
  EXPECT_TRUE(format::write_gguf(path, *file).ok());
  return path;
}

std::string write_gemma4v_mmproj(const TempDir& dir) {
  return write_mmproj_shape(dir, "tiny-gemma4v", kEmbd, "mmproj-gemma4v.gguf");
}

class ServerImagesGemma4 : public VisionModelSuite {
 protected:
  static void SetUpTestSuite() {
    VisionModelSuite::SetUpTestSuite();
    g4_model_ = write_gemma4_model(*dir_);
    g4_mmproj_ = write_gemma4v_mmproj(*dir_);
  }
  inline static std::string g4_model_, g4_mmproj_;
};

TEST(ImagePrompt, Gemma4LayoutIsTheProcessors) {
  using vision::ProjectorType;
  EXPECT_EQ(serve::image_prompt_text(ProjectorType::gemma4v, 3, 0, 0), layout(3));
  EXPECT_EQ(serve::image_prompt_text(ProjectorType::gemma4v, 1, 0, 0), "\n\n<|image><|image|><image|>\n\n");
  EXPECT_EQ(serve::image_soft_token(ProjectorType::gemma4v), "<|image|>");
  EXPECT_FALSE(serve::image_prompt_causal(ProjectorType::gemma4v));
}

TEST_F(ServerImagesGemma4, SizesPerImageAndBidirectionalSpans) {
  serve::ImageInputOptions io;
  io.mmproj_path = g4_mmproj_;
  auto in = serve::ImageInput::open(io);
  ASSERT_TRUE(in.ok()) << in.error().message;
  auto file = format::open_model_file(g4_model_);
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::load_tokenizer(file->metadata);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  struct Case {
    const char* png;
    int n;
  } cases[] = {{kRedPng, 256}, {kWidePng, 276}, {kTallPng, 276}};
  for (const Case& c : cases) {
    auto im = (*in)->encode_url(data_url(c.png));
    ASSERT_TRUE(im.ok()) << im.error().message;
    EXPECT_EQ(im->embd->tokens_per_frame, c.n);
    ASSERT_EQ(im->embd->frames.size(), 1u);
    EXPECT_EQ(im->embd->frames[0]->size(), static_cast<size_t>(c.n * kEmbd));
    const std::vector<serve::EncodedImage> images{*im};
    auto text = (*in)->expand_markers(std::string("Look: ") + std::string(serve::kImageMarker) + " ok", images);
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_EQ(*text, "Look: " + layout(c.n) + " ok");
    const auto prompt = (*tok)->encode(*text, true, true);
    auto spans = (*in)->locate(prompt, (*tok)->vocab(), images);
    ASSERT_TRUE(spans.ok()) << spans.error().message;
    ASSERT_EQ(spans->size(), 1u);
    EXPECT_FALSE((*spans)[0].causal);
    EXPECT_EQ((*spans)[0].n_tokens, c.n);
  }
  // A run of the wrong length for the image is an error naming the counts.
  auto red = (*in)->encode_url(data_url(kRedPng));
  ASSERT_TRUE(red.ok());
  const auto wrong = (*tok)->encode(layout(276), true, true);
  auto bad = (*in)->locate(wrong, (*tok)->vocab(), {*red});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("276"), std::string::npos) << bad.error().message;
}

TEST_F(ServerImagesGemma4, ChatsAndPredictGetTokens) {
  ImageServer s(g4_model_, g4_mmproj_, 3, 1000, "off", "gemma4-vision");
  auto prompt_tokens = [&](const json& body) {
    const Reply r = post(s, "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.js()["usage"]["prompt_tokens"].get<int>() : -1;
  };
  const Reply a = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.js()["usage"]["completion_tokens"], 4);
  // The image's tokens: its soft tokens and the two markers (the "\n\n" around them tokenize
  // apart from the text, so the count is compared with the text-only chat, not exact).
  const int square = a.js()["usage"]["prompt_tokens"].get<int>();
  const int plain = prompt_tokens(chat({}));
  EXPECT_GE(square - plain, 256 + 2);
  EXPECT_LE(square - plain, 256 + 8);  // measured: 263 (the newlines as single tokens)
  EXPECT_GE(prompt_tokens(chat_text(layout(256))), square - 2);
  // A wide image holds 20 more soft tokens than a square one.
  EXPECT_EQ(prompt_tokens(chat({image_part(data_url(kWidePng))})) - square, 276 - 256);
  json st = chat({image_part(data_url(kTallPng))});
  st["stream"] = true;
  const Reply sr = post(s, "/v1/chat/completions", st);
  ASSERT_EQ(sr.status, 200) << sr.body;
  EXPECT_TRUE(parse_sse(sr.body).done);
  const Reply p = post(s, "/predict", json{{"input", "Describe:"}, {"image", kBluePng}, {"max_tokens", 3}});
  ASSERT_EQ(p.status, 200) << p.body;
}

TEST_F(ServerImagesGemma4, TheSameImageHitsTheCachesAnotherDoesNot) {
  ImageServer s(g4_model_, g4_mmproj_, 3, 1000, "off", "gemma4-vision");
  const Reply a = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(a.status, 200) << a.body;
  const Reply b = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.js()["choices"][0]["message"]["content"], a.js()["choices"][0]["message"]["content"]);
  const int cached_same = b.js()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GT(cached_same, 256) << "the same image shares its KV prefix";
  const Reply c = post(s, "/v1/chat/completions", chat({image_part(data_url(kBluePng))}));
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.js()["usage"]["prompt_tokens"], a.js()["usage"]["prompt_tokens"]) << "same size, same layout";
  const int cached_other = c.js()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_LT(cached_other, cached_same) << "another image must not reuse the first one's KV";
}

TEST_F(ServerImagesGemma4, StartupCheckWantsGemma4) {
  serve::ImageInputOptions io;
  io.mmproj_path = g4_mmproj_;
  auto in = serve::ImageInput::open(io);
  ASSERT_TRUE(in.ok()) << in.error().message;
  auto m = model::Model::load(std::move(format::open_model_file(g4_model_)).value());
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE((*in)->check_model((*m)->config()).ok());
  auto g = model::Model::load(std::move(format::open_model_file(model_)).value());  // the suite's gemma3
  ASSERT_TRUE(g.ok());
  const Status st = (*in)->check_model((*g)->config());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("feeds gemma4"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace edgelm::test
