// The dashboard end to end in headless Debian chromium: `edgelm serve` (stories260K, an admin
// token) in a child process, and tests/browser/dashboard.mjs (playwright-core from npm,
// installed by scripts/setup.sh) driving /usr/bin/chromium against it. The script's checks: no
// console error while loading, counters and tokens/s that follow requests sent from the test,
// a streamed playground chat, the 403 of a wrong admin token and the new model name after a
// reload with the right one, an upload; and against a second server with an API key, the
// playground's 401 until the key is typed; against a third server with a hybrid recurrent
// model (qwen35, written by `edgelm synth`, with --kv-disk), its recurrent-state memory tile and
// the KV disk tile's snapshot counters; and against a fourth
// with --mmproj (the image tests' synthetic Gemma 3), an image attached by the file picker and one
// pasted into the prompt, with the encode time, then "cached", under the reply. Screenshots of
// each view land in EDGELM_ARTIFACT_DIR (printed).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/serve_process.h"
#include "server/vision_model.h"
#include "serve/image_input.h"
#include "support/subprocess.h"
#include "support/test_data.h"

namespace edgelm::serve {
namespace {

TEST(DashboardBrowser, LiveViewPlaygroundAndOperationsInChromium) {
  const std::string dir = std::string(EDGELM_SOURCE_DIR) + "/tests/browser";
  ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/playwright-core/package.json"))
      << "playwright-core is not installed: run scripts/setup.sh (npm ci in " << dir << ")";
  ASSERT_TRUE(std::filesystem::exists("/usr/bin/chromium"))
      << "Debian's chromium is not installed: run scripts/setup.sh";
  const std::string admin = "browser-admin-7e1";
  const std::string model = test::shared_path("models/stories260K.bin");
  const std::string tokenizer = test::shared_path("models/tok512.bin");
  // Uploads land in a folder of this build (the shared models' folder is read-only).
  const std::string uploads = std::string(EDGELM_ARTIFACT_DIR) + "/../uploads";
  std::filesystem::remove_all(uploads);
  std::filesystem::create_directories(uploads);
  ServeProcess server({"-m", model, "--tokenizer", tokenizer, "--host", "127.0.0.1", "--port", "0", "-t", "1",
                       "--kv-memory", "32M", "--admin-token", admin, "--upload-dir", uploads});
  const int port = server.wait_ready();
  ASSERT_GT(port, 0) << server.log();
  // The second server wants an API key (ServeProcess's default: kKey, model "cloud-stories").
  ServeProcess keyed;
  const int keyed_port = keyed.wait_ready();
  ASSERT_GT(keyed_port, 0) << keyed.log();
  // The third server: a tiny qwen35 (Gated DeltaNet) model with a snapshot at every KV block.
  const std::string hybrid_model = uploads + "/../qwen35-tiny.gguf";
  const test::ProcessResult synth = test::run_process({EDGELM_BIN, "synth", "--arch", "qwen35", "--layers", "4",
                                                       "--vocab", tokenizer, "--ctx", "1024", "-o", hybrid_model},
                                                      60);
  ASSERT_EQ(synth.exit_code, 0) << synth.out << synth.err;
  // With a KV disk tier: its tile shows the snapshot counters.
  const std::string hybrid_disk = uploads + "/../hybrid-kv-disk";
  std::filesystem::remove_all(hybrid_disk);
  ServeProcess hybrid({"-m", hybrid_model, "--host", "127.0.0.1", "--port", "0", "-t", "1", "--kv-memory", "16M",
                       "--state-snapshot-interval", "1", "--model-name", "hybrid-qwen35", "--kv-disk", hybrid_disk});
  const int hybrid_port = hybrid.wait_ready();
  ASSERT_GT(hybrid_port, 0) << hybrid.log();
  // The fourth serves images (a synthetic Gemma 3 and its tiny mmproj).
  test::TempDir vdir;
  const std::string png = vdir.file("red.png");
  std::ofstream(png, std::ios::binary) << *base64_decode(test::kRedPng);
  ServeProcess vision({"-m", test::write_model(vdir, true), "--mmproj", test::write_mmproj(vdir, test::kEmbd), "--host",
                       "127.0.0.1", "--port", "0", "-t", "1", "--kv-memory", "16M"});
  const int vision_port = vision.wait_ready();
  ASSERT_GT(vision_port, 0) << vision.log();
  const test::ProcessResult r = test::run_process(
      {"/usr/bin/env", "node", dir + "/dashboard.mjs", "http://127.0.0.1:" + std::to_string(port), admin, model,
       tokenizer, test::shared_path("models/stories260K-f16.gguf"), EDGELM_ARTIFACT_DIR,
       "http://127.0.0.1:" + std::to_string(keyed_port), kKey, "http://127.0.0.1:" + std::to_string(hybrid_port),
       "http://127.0.0.1:" + std::to_string(vision_port), png},
      180);
  std::cout << r.out;  // the steps and the screenshots' paths
  EXPECT_FALSE(r.signaled) << "node was killed (signal " << r.signal << ")\n" << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\nserver log:\n" << server.log() << "\nhybrid server log:\n" << hybrid.log();
  EXPECT_NE(r.out.find("all checks passed"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace edgelm::serve
