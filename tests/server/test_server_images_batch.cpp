// Concurrent image requests over real sockets coalesce in the vision encoder (serve/image_input.h):
// with a synthetic Gemma 3 text model and a gemma3 mmproj slow enough (256 patches, 64 layers)
// that one encode is still running when three more requests arrive, those three are encoded as
// one batch (x-edgelm-image-batch 3, the encoder's counters: 2 batches for 4 images) and every
// answer equals the one the same request gets on a fresh server one request at a time (batch 1).
// Also: the images of one request are one batch (a repeated image shares the first one's result),
// and a bad image among good ones is a 400 naming it, with nothing of that request encoded.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "image_server.h"

namespace edgelm::test {
namespace {

class ServerImagesBatch : public VisionModelSuite {
 protected:
  static void SetUpTestSuite() {
    VisionModelSuite::SetUpTestSuite();
    vision::SyntheticMmprojSpec m;
    // 16 x 16 patches of 14 px -> 4 x 4 = 16 soft tokens; the three queued images (768 patches)
    // fit one default batch group (VisionEncoder::kBatchPatches).
    m.image_size = 224;
    m.n_embd = 64;
    m.n_ff = 512;  // about the work of the 1024-patch, 12-layer tower this test had before
    m.n_head = 4;
    m.n_layer = 64;
    m.projection_dim = kEmbd;
    m.seed = 9;
    auto file = vision::make_synthetic_mmproj(m);
    ASSERT_TRUE(file.ok()) << file.error().message;
    slow_mmproj_ = dir_->file("mmproj-slow.gguf");
    ASSERT_TRUE(format::write_gguf(slow_mmproj_, *file).ok());
  }
  inline static std::string slow_mmproj_;
};

json question(const char* png) { return chat({image_part(data_url(png))}, 6); }

// Waits (up to 60 s) for cond on the server's encoder counters.
template <typename Cond>
bool wait_for(serve::ImageInput& in, Cond cond) {
  for (int i = 0; i < 6000; ++i) {
    if (cond(in.encoder_stats())) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST_F(ServerImagesBatch, ConcurrentRequestsAreEncodedInOneBatchWithTheSameAnswers) {
  const char* pngs[] = {kRedPng, kBluePng, kWidePng, kTallPng};
  std::vector<Reply> together(4);
  {
    ImageServer s(model_, slow_mmproj_, 3, 1000);
    serve::ImageInput& in = *s.server->context().images();
    std::thread first([&] { together[0] = post(s, "/v1/chat/completions", question(pngs[0])); });
    ASSERT_TRUE(wait_for(in, [](const serve::ImageEncoderStats& st) { return st.encoding; }));
    std::vector<std::thread> rest;
    for (int i = 1; i < 4; ++i)
      rest.emplace_back([&, i] { together[static_cast<size_t>(i)] = post(s, "/v1/chat/completions", question(pngs[i])); });
    // The three queue behind the running encode (which must still run for the test to mean anything).
    const bool queued = wait_for(in, [](const serve::ImageEncoderStats& st) { return st.queued == 3 || !st.encoding; });
    const serve::ImageEncoderStats mid = in.encoder_stats();
    first.join();
    for (std::thread& t : rest) t.join();
    ASSERT_TRUE(queued);
    ASSERT_EQ(mid.queued, 3) << "the first encode ended before the others queued: make the mmproj slower";
    const serve::ImageEncoderStats st = in.encoder_stats();
    EXPECT_EQ(st.images, 4);
    EXPECT_EQ(st.batches, 2);
    EXPECT_EQ(st.max_batch_images, 3);
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(together[i].status, 200) << together[i].body;
      const auto h = together[i].headers.find("x-edgelm-image-batch");
      ASSERT_NE(h, together[i].headers.end());
      EXPECT_EQ(h->second, i == 0 ? "1" : "3") << "request " << i;
    }
    const Reply m = get(s, "/metrics");
    EXPECT_NE(m.body.find("edge_image_encode_batch_images_count"), std::string::npos);
    EXPECT_NE(m.body.find("edge_image_encode_batch_images_sum{model_name=\"gemma3-vision\",device_id=\"test-device\"} 10\n"),
              std::string::npos)
        << "1 + 3 x 3 images' batch sizes";
  }
  ImageServer s(model_, slow_mmproj_, 3, 1000);  // a fresh encoder cache
  for (int i = 0; i < 4; ++i) {
    const Reply r = post(s, "/v1/chat/completions", question(pngs[i]));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.js()["choices"][0]["message"]["content"], together[i].js()["choices"][0]["message"]["content"])
        << "request " << i;
    EXPECT_EQ(r.js()["usage"]["prompt_tokens"], together[i].js()["usage"]["prompt_tokens"]);
    const auto h = r.headers.find("x-edgelm-image-batch");
    ASSERT_NE(h, r.headers.end());
    EXPECT_EQ(h->second, "1");
  }
  EXPECT_EQ(s.server->context().images()->encoder_stats().batches, 4);
}

TEST_F(ServerImagesBatch, TheImagesOfOneRequestAreOneBatch) {
  ImageServer s(model_, mmproj_, 4, 1000);
  // Three different images and the first again: one batch of three, the repeat shares its result.
  const Reply r = post(s, "/v1/chat/completions",
                       chat({image_part(data_url(kRedPng)), image_part(data_url(kBluePng)),
                             image_part(data_url(kWidePng)), image_part(data_url(kRedPng))}));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.find("x-edgelm-image-batch")->second, "3");
  EXPECT_EQ(r.headers.find("x-edgelm-images-cached")->second, "1");
  const serve::ImageEncoderStats st = s.server->context().images()->encoder_stats();
  EXPECT_EQ(st.batches, 1);
  EXPECT_EQ(st.images, 3);
  // A bad image among good ones: a 400 naming it, and nothing of that request is encoded.
  const Reply bad = post(s, "/v1/chat/completions",
                         chat({image_part(data_url(kTallPng)), image_part("data:image/png;base64,AAAA")}));
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.js()["error"]["param"], "messages[0].content[2]") << bad.body;
  EXPECT_EQ(s.server->context().images()->encoder_stats().images, 3);
  // The server is unharmed: the tall image alone is fine.
  EXPECT_EQ(post(s, "/v1/chat/completions", chat({image_part(data_url(kTallPng))})).status, 200);
}

}  // namespace
}  // namespace edgelm::test
