// Images through the official OpenAI Node client: `edgelm serve --mmproj` (a synthetic Gemma 3
// with image tokens and a tiny synthetic encoder, tests/server/vision_model.h) in a child
// process, and tests/clients/openai_node/vision.mjs against it: a data-URI image with a
// json_schema inspection verdict parses, streamed and not; repeated it is a prefix-cache hit;
// another image with the same text misses; a bad image is a 400 naming the part. The same for
// SmolVLM (a synthetic llama with SmolVLM's image tokens and a tiny idefics3 encoder: tiled
// images, causal spans). Also the startup check: an mmproj of another width makes the server
// exit with an error naming n_embd, an idefics3 mmproj beside a Gemma 3 model one naming llama.
#include <gtest/gtest.h>

#include <filesystem>

#include "server/serve_process.h"
#include "server/vision_model.h"
#include "support/subprocess.h"
#include "support/test_data.h"

namespace edgelm::serve {
namespace {

// vision.mjs against `edgelm serve -m model --mmproj mmproj` named `name`.
void run_vision_client(const std::string& model, const std::string& mmproj, const std::string& name) {
  const std::string dir = std::string(EDGELM_SOURCE_DIR) + "/tests/clients/openai_node";
  ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/openai/package.json"))
      << "the OpenAI Node client is not installed: run scripts/setup.sh (npm ci in " << dir << ")";
  ServeProcess server({"-m", model, "--mmproj", mmproj, "--host", "127.0.0.1", "--port", "0", "-t", "1", "--kv-memory",
                       "16M", "--model-name", name});
  const int port = server.wait_ready();
  ASSERT_GT(port, 0) << server.log();
  const test::ProcessResult r =
      test::run_process({"/usr/bin/env", "node", dir + "/vision.mjs", "http://127.0.0.1:" + std::to_string(port), name,
                         test::kRedPng, test::kBluePng},
                        600);
  EXPECT_FALSE(r.signaled) << "node was killed (signal " << r.signal << ")\n" << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\nserver log:\n" << server.log();
  EXPECT_NE(r.out.find("all checks passed"), std::string::npos) << r.out;
}

TEST(OpenAiNodeClient, ImagesWithAJsonSchemaVerdict) {
  test::TempDir tmp;
  run_vision_client(test::write_model(tmp, true), test::write_mmproj(tmp, test::kEmbd), "gemma3-vision");
}

TEST(OpenAiNodeClient, SmolVlmImagesWithAJsonSchemaVerdict) {
  test::TempDir tmp;
  run_vision_client(test::write_smolvlm_model(tmp, true), test::write_idefics3_mmproj(tmp, test::kEmbd), "smolvlm");
}

TEST(ServeMmproj, AnIdefics3EncoderBesideGemma3StopsTheServer) {
  test::TempDir tmp;
  const test::ProcessResult r = test::run_process({EDGELM_BIN, "serve", "-m", test::write_model(tmp, true), "--mmproj",
                                                   test::write_idefics3_mmproj(tmp, test::kEmbd), "--host", "127.0.0.1",
                                                   "--port", "0", "-t", "1", "--kv-memory", "16M"},
                                                  60);
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("feeds llama"), std::string::npos) << r.err;
}

TEST(ServeMmproj, AnEncoderOfAnotherWidthStopsTheServer) {
  test::TempDir tmp;
  const std::string model = test::write_model(tmp, true);
  const std::string mmproj = test::write_mmproj(tmp, 32);
  const test::ProcessResult r = test::run_process({EDGELM_BIN, "serve", "-m", model, "--mmproj", mmproj, "--host",
                                                   "127.0.0.1", "--port", "0", "-t", "1", "--kv-memory", "16M"},
                                                  60);
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("n_embd"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace edgelm::serve
