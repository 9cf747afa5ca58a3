// SmolVLM (idefics3 projector) images over real sockets: a synthetic llama with SmolVLM's image
// tokens (model::smolvlm_image_tokens) and a synthetic tiny idefics3 mmproj (64 px tiles, 4
// tokens per frame, longest edge 128), served with image input (serve/image_input.h):
//  - the prompt form is the Idefics3 processor's, written out here by hand: a square image is
//    2 x 2 tiles + the global view (5 frames), a wide or tall one 1 x 2 / 2 x 1 (3 frames), and
//    with a longest edge of one tile the image alone (1 frame); each frame a causal span of 4;
//  - a chat request gets 200 and tokens, and its prompt is exactly as long as the same chat
//    with the hand-written layout as text; the same image again hits the encoder cache and the
//    KV prefix, another image with the same text does not;
//  - the startup check wants a llama for an idefics3 mmproj; a vocabulary without the image
//    tokens is a 500 naming the token;
//  - a chat template in the style of SmolVLM's, which reads content as typed parts and drops
//    string content, gets the user's text and the image (ChatFormat::typed_content).
#include <gtest/gtest.h>

#include <set>

#include "image_server.h"
#include "model/synthetic.h"
#include "serve/chat_template.h"
#include "serve/image_prompt.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::test {
namespace {

constexpr int kPerFrame = 4;

std::string run(const std::string& token, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += token;
  return s;
}

// The Idefics3 processor's prompt for rows x cols tiles (0 x 0: not split), 4 tokens per frame.
std::string layout(int rows, int cols) {
  const std::string fake = "<fake_token_around_image>", img = run("<image>", kPerFrame);
  std::string s;
  for (int r = 1; r <= rows; ++r) {
    for (int c = 1; c <= cols; ++c) s += fake + "<row_" + std::to_string(r) + "_col_" + std::to_string(c) + ">" + img;
    s += "\n";
  }
  if (rows > 0) s += "\n";
  return s + fake + "<global-img>" + img + fake;
}

// The chat of test_server_images with the image replaced by text.
json chat_text(const std::string& image_text) {
  json content =
      json::array({{{"type", "text"}, {"text", "What is in this picture?"}}, {{"type", "text"}, {"text", image_text}}});
  return {{"messages", json::array({{{"role", "user"}, {"content", content}}})}, {"max_tokens", 4}, {"temperature", 0}};
}

class ServerImagesSmolVlm : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    model_ = write_smolvlm_model(*dir_, true);
    mmproj_ = write_idefics3_mmproj(*dir_, kEmbd);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static TempDir* dir_;
  static std::string model_, mmproj_;
};
TempDir* ServerImagesSmolVlm::dir_ = nullptr;
std::string ServerImagesSmolVlm::model_, ServerImagesSmolVlm::mmproj_;

TEST(ImagePrompt, Idefics3LayoutIsTheProcessors) {
  using vision::ProjectorType;
  EXPECT_EQ(serve::image_prompt_text(ProjectorType::idefics3, kPerFrame, 2, 2), layout(2, 2));
  EXPECT_EQ(serve::image_prompt_text(ProjectorType::idefics3, kPerFrame, 1, 2), layout(1, 2));
  EXPECT_EQ(serve::image_prompt_text(ProjectorType::idefics3, kPerFrame, 0, 0), layout(0, 0));
  // Spelled out once: two rows of one tile.
  EXPECT_EQ(serve::image_prompt_text(ProjectorType::idefics3, 1, 2, 1),
            "<fake_token_around_image><row_1_col_1><image>\n<fake_token_around_image><row_2_col_1><image>\n\n"
            "<fake_token_around_image><global-img><image><fake_token_around_image>");
  EXPECT_EQ(serve::image_soft_token(ProjectorType::idefics3), "<image>");
  EXPECT_TRUE(serve::image_prompt_causal(ProjectorType::idefics3));
  EXPECT_FALSE(serve::image_prompt_causal(ProjectorType::gemma3));
  const auto tokens = serve::image_prompt_tokens(ProjectorType::idefics3, 2);
  EXPECT_EQ(tokens.size(), size_t{3 + 4});
  EXPECT_EQ(tokens.back(), "<row_2_col_2>");
}

// ImageInput on its own: tiles per aspect, the expanded text, and the causal spans located in
// the tokenized prompt (one per frame, distinct prefix keys).
TEST_F(ServerImagesSmolVlm, TilesPromptFormAndCausalSpans) {
  serve::ImageInputOptions io;
  io.mmproj_path = mmproj_;
  auto in = serve::ImageInput::open(io);
  ASSERT_TRUE(in.ok()) << in.error().message;
  EXPECT_EQ((*in)->longest_edge(), 128);
  EXPECT_EQ((*in)->max_grid(), 2);
  struct Case {
    const char* png;
    int rows, cols;
  } cases[] = {{kRedPng, 2, 2}, {kWidePng, 1, 2}, {kTallPng, 2, 1}};
  auto file = format::open_model_file(model_);
  ASSERT_TRUE(file.ok());
  auto tok = tokenizer::load_tokenizer(file->metadata);
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  for (const Case& c : cases) {
    auto im = (*in)->encode_url(data_url(c.png));
    ASSERT_TRUE(im.ok()) << im.error().message;
    EXPECT_EQ(im->embd->rows, c.rows);
    EXPECT_EQ(im->embd->cols, c.cols);
    ASSERT_EQ(im->embd->frames.size(), static_cast<size_t>(c.rows * c.cols + 1));
    for (const auto& f : im->embd->frames) EXPECT_EQ(f->size(), size_t{kPerFrame * kEmbd});
    EXPECT_NE(*im->embd->frames.front(), *im->embd->frames.back()) << "a tile is not the global view";
    const std::vector<serve::EncodedImage> images{*im};
    auto text = (*in)->expand_markers(std::string("Look: ") + std::string(serve::kImageMarker) + " ok", images);
    ASSERT_TRUE(text.ok()) << text.error().message;
    EXPECT_EQ(*text, "Look: " + layout(c.rows, c.cols) + " ok");
    const auto prompt = (*tok)->encode(*text, true, true);
    auto spans = (*in)->locate(prompt, (*tok)->vocab(), images);
    ASSERT_TRUE(spans.ok()) << spans.error().message;
    ASSERT_EQ(spans->size(), im->embd->frames.size());
    std::set<uint64_t> hashes;
    for (size_t i = 0; i < spans->size(); ++i) {
      const engine::PromptImage& s = (*spans)[i];
      EXPECT_TRUE(s.causal);
      EXPECT_EQ(s.n_tokens, kPerFrame);
      EXPECT_EQ(s.embd, im->embd->frames[i]);
      hashes.insert(s.hash);
      if (i > 0) {
        EXPECT_GT(s.pos0, (*spans)[i - 1].pos0 + kPerFrame) << "frames are separated by marker tokens";
      }
    }
    EXPECT_EQ(hashes.size(), spans->size());
  }
  // Two markers for one image, and runs that do not match the frames, are errors.
  auto one = (*in)->encode_url(data_url(kRedPng));
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE((*in)->expand_markers(std::string(serve::kImageMarker) + std::string(serve::kImageMarker), {*one}).ok());
  const auto short_run = (*tok)->encode(layout(0, 0), true, true);
  EXPECT_FALSE((*in)->locate(short_run, (*tok)->vocab(), {*one}).ok()) << "1 frame's run for 5 frames";
}

TEST_F(ServerImagesSmolVlm, ChatsGetTokensAndTheProcessorsLayout) {
  ImageServer s(model_, mmproj_, 3, 1000, "off", "smolvlm");
  auto prompt_tokens = [&](const json& body) {
    const Reply r = post(s, "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.js()["usage"]["prompt_tokens"].get<int>() : -1;
  };
  const Reply a = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.js()["usage"]["completion_tokens"], 4);
  // Each image's prompt is as long as the processor's layout given as text: tiled 2 x 2 (20
  // image tokens), 1 x 2 and 2 x 1 (12 each).
  const int square = a.js()["usage"]["prompt_tokens"].get<int>();
  EXPECT_EQ(square, prompt_tokens(chat_text(layout(2, 2))));
  const int wide = prompt_tokens(chat({image_part(data_url(kWidePng))}));
  EXPECT_EQ(wide, prompt_tokens(chat_text(layout(1, 2))));
  EXPECT_EQ(prompt_tokens(chat({image_part(data_url(kTallPng))})), prompt_tokens(chat_text(layout(2, 1))));
  EXPECT_GE(square - wide, 2 * (2 + kPerFrame)) << "two more tiles, each a marker, a tile token and 4 images";
  // Two images in one request: both layouts.
  EXPECT_EQ(prompt_tokens(chat({image_part(data_url(kRedPng)), image_part(data_url(kWidePng))})),
            prompt_tokens(chat_text(layout(2, 2) + layout(1, 2))));
  // Streamed too.
  json st = chat({image_part(data_url(kWidePng))});
  st["stream"] = true;
  const Reply sr = post(s, "/v1/chat/completions", st);
  ASSERT_EQ(sr.status, 200) << sr.body;
  EXPECT_TRUE(parse_sse(sr.body).done);
}

TEST_F(ServerImagesSmolVlm, AnUnsplitImageIsOneFrame) {
  ImageServer s(model_, write_idefics3_mmproj(*dir_, kEmbd, /*edge=*/64), 3, 1000, "off", "smolvlm");
  const Reply a = post(s, "/v1/chat/completions", chat({image_part(data_url(kWidePng))}));
  ASSERT_EQ(a.status, 200) << a.body;
  const Reply t = post(s, "/v1/chat/completions", chat_text(layout(0, 0)));
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(a.js()["usage"]["prompt_tokens"], t.js()["usage"]["prompt_tokens"]);
}

TEST_F(ServerImagesSmolVlm, TheSameImageHitsTheCachesAnotherDoesNot) {
  ImageServer s(model_, mmproj_, 3, 1000, "off", "smolvlm");
  const Reply a = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(a.status, 200) << a.body;
  const Reply b = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.js()["choices"][0]["message"]["content"], a.js()["choices"][0]["message"]["content"]);
  const int cached_same = b.js()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GT(cached_same, 0) << "the same image shares its KV prefix";
  const Reply c = post(s, "/v1/chat/completions", chat({image_part(data_url(kBluePng))}));
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.js()["usage"]["prompt_tokens"], a.js()["usage"]["prompt_tokens"]) << "same size, same layout";
  const int cached_other = c.js()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_LT(cached_other, cached_same) << "another image must not reuse the first one's KV";
  const Reply m = get(s, "/metrics");
  EXPECT_NE(m.body.find("result=\"cached\""), std::string::npos);
}

TEST_F(ServerImagesSmolVlm, StartupCheckAndVocabulary) {
  serve::ImageInputOptions io;
  io.mmproj_path = mmproj_;
  auto in = serve::ImageInput::open(io);
  ASSERT_TRUE(in.ok()) << in.error().message;
  auto m = model::Model::load(std::move(format::open_model_file(model_)).value());
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE((*in)->check_model((*m)->config()).ok());
  // A gemma3 text model of the same width takes no idefics3 images.
  auto g = model::Model::load(std::move(format::open_model_file(write_model(*dir_, true))).value());
  ASSERT_TRUE(g.ok());
  const Status st = (*in)->check_model((*g)->config());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("feeds llama"), std::string::npos) << st.error().message;
  // A vocabulary without the image tokens: a 500 naming the first.
  ImageServer s(write_smolvlm_model(*dir_, false), mmproj_, 3, 1000, "off", "smolvlm");
  const Reply r = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("<fake_token_around_image>"), std::string::npos) << r.body;
}

// A chat template as SmolVLM-256M-Instruct's (its structure, written from memory): content is iterated
// as typed parts; a string content renders as nothing.
constexpr const char* kSmolVlmTemplate =
    "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}{% if message['content'][0]['type'] == "
    "'image' %}{{':'}}{% else %}{{': '}}{% endif %}{% for line in message['content'] %}{% if line['type'] == 'text' "
    "%}{{line['text']}}{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}<end_of_utterance>\n{% "
    "endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}";

TEST(ChatTemplateTypedContent, SmolVlmsTemplateGetsTheTextAsAPart) {
  format::GgufMetadata md;
  md.set("tokenizer.chat_template", format::GgufValue::from_string(kSmolVlmTemplate));
  auto f = serve::choose_chat_format(md, "");
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_TRUE(f->typed_content);
  const std::vector<serve::ChatMessage> msgs{{"user", "Hi" + std::string(serve::kImageMarker)}};
  auto text = serve::render_chat(*f, msgs, nullptr, true, "", "");
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(*text, "<|im_start|>User: Hi<__media__><end_of_utterance>\nAssistant:");
  // A template that prints string content stays as it was.
  format::GgufMetadata plain;
  plain.set("tokenizer.chat_template",
            format::GgufValue::from_string("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] "
                                           "}}<|im_end|>\n{% endfor %}"));
  auto g = serve::choose_chat_format(plain, "");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_FALSE(g->typed_content);
}

TEST_F(ServerImagesSmolVlm, ItsChatTemplateCarriesTextAndImage) {
  auto file = format::open_model_file(model_);
  ASSERT_TRUE(file.ok());
  file->metadata.set("tokenizer.chat_template", format::GgufValue::from_string(kSmolVlmTemplate));
  const std::string path = dir_->file("smolvlm-template.gguf");
  ASSERT_TRUE(format::write_gguf(path, *file).ok());
  ImageServer s(path, mmproj_, 3, 1000, "off", "smolvlm");
  const Reply a = post(s, "/v1/chat/completions", chat({image_part(data_url(kWidePng))}));
  ASSERT_EQ(a.status, 200) << a.body;
  const Reply t = post(s, "/v1/chat/completions", chat_text(layout(1, 2)));
  ASSERT_EQ(t.status, 200) << t.body;
  EXPECT_EQ(a.js()["usage"]["prompt_tokens"], t.js()["usage"]["prompt_tokens"]);
  const Reply empty = post(s, "/v1/chat/completions", chat_text(""));
  ASSERT_EQ(empty.status, 200) << empty.body;
  EXPECT_GT(t.js()["usage"]["prompt_tokens"].get<int>(), empty.js()["usage"]["prompt_tokens"].get<int>() + 20)
      << "the layout's tokens are in the prompt";
}

}  // namespace
}  // namespace edgelm::test
