// Images over real sockets: a synthetic Gemma 3 text model (stories260K's vocabulary padded with
// <start_of_image>, <end_of_image>, <image_soft_token>) and a synthetic tiny gemma3 mmproj
// (112 px, 4 soft tokens), served with image input (serve/image_input.h):
//  - a chat request with an image_url data URL gets 200 and tokens; the same image again is
//    served from the encoder cache and its KV prefix; another image with the same text is not;
//  - bad base64, an undecodable image, a non-image data URL, an http URL, too many pixels, too
//    many images, an unknown detail value or field: each a 400 naming the content part;
//  - without --mmproj an image part is a 400 that says how to load an encoder; a vocabulary
//    without the image tokens is a 500 naming the token;
//  - the startup check refuses an mmproj of another width or a text-only architecture;
//  - /metrics shows edge_images_total and the decode / encode histograms.
#include <gtest/gtest.h>

#include "image_server.h"

namespace edgelm::test {
namespace {

// A 400 whose error names `param`.
void expect_part_error(const Reply& r, const std::string& param, const std::string& needle = "") {
  EXPECT_EQ(r.status, 400) << r.body;
  const json e = r.js()["error"];
  EXPECT_EQ(e.value("param", ""), param) << r.body;
  EXPECT_NE(e.value("message", "").find(param), std::string::npos) << r.body;
  if (!needle.empty()) {
    EXPECT_NE(e.value("message", "").find(needle), std::string::npos) << r.body;
  }
}

class ServerImages : public VisionModelSuite {};

TEST_F(ServerImages, AnImageGetsTokensAndIsCachedByContent) {
  ImageServer s(model_, mmproj_);
  const Reply a = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(a.status, 200) << a.body;
  const json ja = a.js();
  EXPECT_EQ(ja["usage"]["completion_tokens"], 4);
  EXPECT_GT(ja["usage"]["prompt_tokens"].get<int>(), 6);  // text + <start_of_image> + 4 soft + <end_of_image>
  const Reply b = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.js()["choices"][0]["message"]["content"], ja["choices"][0]["message"]["content"]);
  const int cached_same = b.js()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GT(cached_same, 0) << "the same image shares its KV prefix";
  const Reply c = post(s, "/v1/chat/completions", chat({image_part(data_url(kBluePng))}));
  ASSERT_EQ(c.status, 200) << c.body;
  const int cached_other = c.js()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_LT(cached_other, cached_same) << "another image must not reuse the first one's KV";
  // "detail" with OpenAI's values is accepted.
  json d = image_part(data_url(kRedPng));
  d["image_url"]["detail"] = "low";
  EXPECT_EQ(post(s, "/v1/chat/completions", chat({d})).status, 200);
  // Streamed too.
  json st = chat({image_part(data_url(kBluePng))});
  st["stream"] = true;
  const Reply sr = post(s, "/v1/chat/completions", st);
  ASSERT_EQ(sr.status, 200) << sr.body;
  EXPECT_TRUE(parse_sse(sr.body).done);

  const json models = get(s, "/v1/models").js();
  EXPECT_EQ(models["data"][0]["capabilities"], json::array({"completion", "vision"})) << models.dump();

  const Reply m = get(s, "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("edge_images_total{"), std::string::npos);
  EXPECT_NE(m.body.find("result=\"encoded\""), std::string::npos);
  EXPECT_NE(m.body.find("result=\"cached\""), std::string::npos);
  EXPECT_NE(m.body.find("edge_image_encode_seconds_count"), std::string::npos);
  EXPECT_NE(m.body.find("edge_image_decode_seconds_count"), std::string::npos);
}

TEST_F(ServerImages, TheResponseCacheKeysOnTheImage) {
  ImageServer s(model_, mmproj_, 3, 1000, "semantic");
  auto level = [](const Reply& r) {
    for (const auto& [k, v] : r.headers)
      if (k == "x-edgelm-cache") return v;
    return std::string("(none)");
  };
  const Reply a = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(level(a), "miss");
  const Reply b = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  EXPECT_EQ(level(b), "exact") << "the same image and text";
  const Reply c = post(s, "/v1/chat/completions", chat({image_part(data_url(kBluePng))}));
  EXPECT_EQ(level(c), "miss") << "another image with the same text must not hit, exactly or semantically";
  const Reply d = post(s, "/v1/chat/completions", chat({}));
  EXPECT_EQ(level(d), "miss") << "no image with the same text";
}

TEST_F(ServerImages, BadImagesAreA400NamingThePart) {
  ImageServer s(model_, mmproj_, /*max_images=*/2, /*max_pixels=*/1000);
  const std::string p1 = "messages[0].content[1]";
  expect_part_error(post(s, "/v1/chat/completions", chat({image_part("data:image/png;base64,@@not base64@@")})), p1,
                    "base64");
  expect_part_error(post(s, "/v1/chat/completions", chat({image_part("data:image/png;base64,aGVsbG8gd29ybGQ=")})), p1,
                    "decoded");
  expect_part_error(post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng, "text/plain"))})), p1, "image/");
  expect_part_error(post(s, "/v1/chat/completions", chat({image_part("http://127.0.0.1/cat.png")})), p1, "data:");
  expect_part_error(post(s, "/v1/chat/completions", chat({image_part("data:image/png;base64,")})), p1);
  // Three images where two are allowed: the third is named.
  expect_part_error(
      post(s, "/v1/chat/completions",
           chat({image_part(data_url(kRedPng)), image_part(data_url(kBluePng)), image_part(data_url(kRedPng))})),
      "messages[0].content[3]", "--max-images-per-request");
  json bad_detail = image_part(data_url(kRedPng));
  bad_detail["image_url"]["detail"] = "ultra";
  EXPECT_EQ(post(s, "/v1/chat/completions", chat({bad_detail})).js()["error"]["param"],
            "messages[0].content[1].image_url.detail");
  json unknown = image_part(data_url(kRedPng));
  unknown["image_url"]["size"] = 3;
  EXPECT_EQ(post(s, "/v1/chat/completions", chat({unknown})).status, 400);
  // The server is unharmed.
  EXPECT_EQ(post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))})).status, 200);
  EXPECT_NE(get(s, "/metrics").body.find("result=\"rejected\""), std::string::npos);
}

TEST_F(ServerImages, TooManyPixelsIsA400) {
  ImageServer s(model_, mmproj_, 3, /*max_pixels=*/63);  // the PNGs are 8 x 8
  expect_part_error(post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))})), "messages[0].content[1]",
                    "limit");
}

TEST_F(ServerImages, WithoutAnEncoderAnImageSaysHowToLoadOne) {
  ImageServer s(model_, "");
  expect_part_error(post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))})), "messages[0].content[1]",
                    "--mmproj");
  EXPECT_EQ(post(s, "/v1/chat/completions", chat({})).status, 200);  // text still works
  EXPECT_FALSE(get(s, "/v1/models").js()["data"][0].contains("capabilities"));
}

TEST_F(ServerImages, AVocabularyWithoutImageTokensIsA500NamingTheToken) {
  ImageServer s(write_model(*dir_, false), mmproj_);
  const Reply r = post(s, "/v1/chat/completions", chat({image_part(data_url(kRedPng))}));
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_NE(r.body.find("<start_of_image>"), std::string::npos) << r.body;
}

TEST_F(ServerImages, TheStartupCheckMatchesTheModel) {
  serve::ImageInputOptions io;
  io.mmproj_path = write_mmproj(*dir_, 32);
  auto in = serve::ImageInput::open(io);
  ASSERT_TRUE(in.ok()) << in.error().message;
  auto file = format::open_model_file(model_);
  ASSERT_TRUE(file.ok());
  auto m = model::Model::load(std::move(file).value());
  ASSERT_TRUE(m.ok());
  const Status wide = (*in)->check_model((*m)->config());
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.error().message.find("n_embd"), std::string::npos) << wide.error().message;
  model::SyntheticSpec ls;  // a llama of the right width: no image support
  ls.n_embd = 32;
  auto lf = model::make_synthetic_model(ls);
  ASSERT_TRUE(lf.ok());
  auto lm = model::Model::load(std::move(lf).value());
  ASSERT_TRUE(lm.ok());
  EXPECT_FALSE((*in)->check_model((*lm)->config()).ok());
  // A missing file is an error naming the flag.
  io.mmproj_path = dir_->file("none.gguf");
  auto missing = serve::ImageInput::open(io);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("--mmproj"), std::string::npos);
}

TEST_F(ServerImages, AQwen3vlMmprojOpensButFeedsOnlyQwen35) {
  vision::SyntheticMmprojSpec m;
  ASSERT_TRUE(vision::apply_mmproj_shape(m, "tiny-qwen3vl").ok());
  m.projection_dim = kEmbd;
  auto file = vision::make_synthetic_mmproj(m);
  ASSERT_TRUE(file.ok());
  serve::ImageInputOptions io;
  io.mmproj_path = dir_->file("qwen3vl.gguf");
  ASSERT_TRUE(format::write_gguf(io.mmproj_path, *file).ok());
  auto in = serve::ImageInput::open(io);
  ASSERT_TRUE(in.ok()) << in.error().message;
  auto gemma = format::open_model_file(model_);
  ASSERT_TRUE(gemma.ok());
  const Status st = (*in)->check_model(model::config_from_metadata(gemma->metadata).value());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("a qwen3vl_merger projector feeds qwen35"), std::string::npos) << st.error().message;
}

TEST(ImageBase64, DecodesStrictly) {
  EXPECT_EQ(serve::base64_decode("aGVsbG8="), "hello");
  EXPECT_EQ(serve::base64_decode("aGVsbG8"), "hello");
  EXPECT_EQ(serve::base64_decode(""), "");
  EXPECT_FALSE(serve::base64_decode("aGVs bG8="));
  EXPECT_FALSE(serve::base64_decode("a"));
}

}  // namespace
}  // namespace edgelm::test
