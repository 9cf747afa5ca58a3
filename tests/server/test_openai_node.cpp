// Structured output and tool calling through the official OpenAI Node client: `edgelm serve`
// (stories260K, a context of 2048 so the tool definitions fit) in a child process, and
// tests/clients/openai_node/structured.mjs (openai@4 + zod@3, installed by scripts/setup.sh)
// against it over real sockets. The script's checks: zodResponseFormat parse greedy and at T=1
// with several seeds, json_object, a named forced tool call, a streamed `required` call, a
// conversation with tool results, and a bad schema's 400.
#include <gtest/gtest.h>

#include <filesystem>

#include "server/serve_process.h"
#include "support/subprocess.h"
#include "support/test_data.h"

namespace edgelm::serve {
namespace {

TEST(OpenAiNodeClient, StructuredOutputAndToolCalls) {
  const std::string dir = std::string(EDGELM_SOURCE_DIR) + "/tests/clients/openai_node";
  ASSERT_TRUE(std::filesystem::exists(dir + "/node_modules/openai/package.json"))
      << "the OpenAI Node client is not installed: run scripts/setup.sh (npm ci in " << dir << ")";
  ServeProcess server({"-m", test::shared_path("models/stories260K.bin"), "--tokenizer",
                       test::shared_path("models/tok512.bin"), "--host", "127.0.0.1", "--port", "0", "-t", "1",
                       "--kv-memory", "32M", "-c", "2048", "--api-key", kKey, "--model-name", "cloud-stories"});
  const int port = server.wait_ready();
  ASSERT_GT(port, 0) << server.log();
  const test::ProcessResult r = test::run_process(
      {"/usr/bin/env", "node", dir + "/structured.mjs", "http://127.0.0.1:" + std::to_string(port), kKey}, 600);
  EXPECT_FALSE(r.signaled) << "node was killed (signal " << r.signal << ")\n" << r.out << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err << "\nserver log:\n" << server.log();
  EXPECT_NE(r.out.find("all checks passed"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace edgelm::serve
