// POST /v1/embeddings over real sockets on an embedding model served alone (the bert-tiny
// synthetic encoder, encoder_models.h) and on a generative one (stories260K): OpenAI's four input
// shapes, usage, `dimensions` (Matryoshka truncation + renormalization), base64, the 400s naming
// the field or the input index, the token budget split, generation refused on an embedding
// server with /health and /metrics still serving. Expected vectors come from the test's own
// TextEncoder::encode() call and its own normalization, never from the server's code.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <fstream>
#include <string>
#include <vector>

#include "server/encoder_models.h"
#include "serve/embedding_vectors.h"

namespace edgelm::test {
namespace {

std::vector<float> floats(const json& j) { return j.get<std::vector<float>>(); }

// The test's own base64 decoder (RFC 4648), so that a wrong encoder cannot agree with itself.
std::vector<float> decode_base64_floats(const std::string& s) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (const char c : s) {
    if (c == '=') break;
    const int v = value(c);
    EXPECT_GE(v, 0) << "not base64: " << c;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  EXPECT_EQ(bytes.size() % 4, 0u);
  std::vector<float> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t u = static_cast<uint32_t>(static_cast<unsigned char>(bytes[4 * i])) |
                       static_cast<uint32_t>(static_cast<unsigned char>(bytes[4 * i + 1])) << 8 |
                       static_cast<uint32_t>(static_cast<unsigned char>(bytes[4 * i + 2])) << 16 |
                       static_cast<uint32_t>(static_cast<unsigned char>(bytes[4 * i + 3])) << 24;
    std::memcpy(&out[i], &u, 4);
  }
  return out;
}

void expect_400(const Reply& r, const std::string& param, const std::string& needle = "") {
  EXPECT_EQ(r.status, 400) << r.body;
  const json j = r.js();
  EXPECT_EQ(j["error"]["param"], param) << r.body;
  if (!needle.empty()) {
    EXPECT_NE(j["error"]["message"].get<std::string>().find(needle), std::string::npos) << r.body;
  }
}

class EmbeddingServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    path_ = new std::string(write_bert_tiny(*dir_));
    auto enc = embed::open_text_encoder(*path_);
    ASSERT_TRUE(enc.ok()) << enc.error().message;
    enc_ = enc->release();
  }
  static void TearDownTestSuite() {
    delete enc_;
    delete path_;
    delete dir_;
  }
  void SetUp() override {
    server_ = encoder_server(*path_);
    server_->wait_ready();
  }

  // The test's own unit vector of `text` (the encoder's file pooling, mean for bert-tiny).
  static std::vector<double> expected(const std::vector<int32_t>& tokens) {
    ThreadPool pool(1);
    const std::vector<std::vector<int32_t>> texts{tokens};
    auto out = enc_->encode(texts, enc_->info().pooling, pool);
    EXPECT_TRUE(out.ok()) << out.error().message;
    return unit((*out)[0], (*out)[0].size());
  }
  static std::vector<int32_t> tokens(const std::string& text) {
    auto t = enc_->tokenize(text);
    EXPECT_TRUE(t.ok());
    return *t;
  }

  static TempDir* dir_;
  static std::string* path_;
  static embed::TextEncoder* enc_;
  std::unique_ptr<TestServer> server_;
};
TempDir* EmbeddingServer::dir_ = nullptr;
std::string* EmbeddingServer::path_ = nullptr;
embed::TextEncoder* EmbeddingServer::enc_ = nullptr;

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "value " << i;
}

TEST_F(EmbeddingServer, EveryInputShapeGivesTheEncodersVector) {
  const std::vector<std::string> texts{"hello world", "the cat sat on the mat", "a"};
  std::vector<std::vector<int32_t>> ids;
  size_t n_tokens = 0;
  for (const std::string& t : texts) {
    ids.push_back(tokens(t));
    n_tokens += ids.back().size();
  }
  const int n_embd = enc_->info().n_embd;

  // One string.
  Reply one = post(*server_, "/v1/embeddings", json{{"input", texts[0]}});
  ASSERT_EQ(one.status, 200) << one.body;
  json j = one.js();
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["model"], "enc");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["object"], "embedding");
  EXPECT_EQ(j["data"][0]["index"], 0);
  EXPECT_EQ(j["usage"]["prompt_tokens"], ids[0].size());
  EXPECT_EQ(j["usage"]["total_tokens"], ids[0].size());
  ASSERT_EQ(j["data"][0]["embedding"].size(), static_cast<size_t>(n_embd));
  expect_close(floats(j["data"][0]["embedding"]), expected(ids[0]));

  // An array of strings: one vector per text, in order, each the text's own.
  Reply many = post(*server_, "/v1/embeddings", json{{"input", texts}});
  ASSERT_EQ(many.status, 200) << many.body;
  j = many.js();
  ASSERT_EQ(j["data"].size(), texts.size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], n_tokens);
  for (size_t i = 0; i < texts.size(); ++i) {
    EXPECT_EQ(j["data"][i]["index"], i);
    expect_close(floats(j["data"][i]["embedding"]), expected(ids[i]));
  }
  EXPECT_NE(floats(j["data"][0]["embedding"]), floats(j["data"][1]["embedding"]));

  // One token array, and an array of token arrays: the same vectors as the texts.
  Reply tok = post(*server_, "/v1/embeddings", json{{"input", ids[1]}});
  ASSERT_EQ(tok.status, 200) << tok.body;
  EXPECT_EQ(tok.js()["usage"]["prompt_tokens"], ids[1].size());
  expect_close(floats(tok.js()["data"][0]["embedding"]), expected(ids[1]));
  Reply toks = post(*server_, "/v1/embeddings", json{{"input", ids}});
  ASSERT_EQ(toks.status, 200) << toks.body;
  ASSERT_EQ(toks.js()["data"].size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i)
    expect_close(floats(toks.js()["data"][i]["embedding"]), expected(ids[i]));
  // Token ids need not start with the special tokens: the client's array is taken as it is.
  const std::vector<int32_t> bare(ids[1].begin() + 1, ids[1].end() - 1);
  Reply b = post(*server_, "/v1/embeddings", json{{"input", json::array({bare})}});
  ASSERT_EQ(b.status, 200) << b.body;
  expect_close(floats(b.js()["data"][0]["embedding"]), expected(bare));

  // `user` and `model` are accepted.
  EXPECT_EQ(post(*server_, "/v1/embeddings", json{{"input", "a"}, {"user", "u-1"}, {"model", "enc"}}).status, 200);
}

TEST_F(EmbeddingServer, DimensionsAndBase64) {
  const int n_embd = enc_->info().n_embd;
  Reply full = post(*server_, "/v1/embeddings", json{{"input", "hello world"}});
  ASSERT_EQ(full.status, 200) << full.body;
  const std::vector<float> v = floats(full.js()["data"][0]["embedding"]);
  // The full width is always allowed, and bert-tiny was not trained for truncation: a 400 naming it.
  Reply same = post(*server_, "/v1/embeddings", json{{"input", "hello world"}, {"dimensions", n_embd}});
  ASSERT_EQ(same.status, 200) << same.body;
  EXPECT_EQ(floats(same.js()["data"][0]["embedding"]), v);
  ASSERT_TRUE(enc_->info().matryoshka_dims.empty());
  expect_400(post(*server_, "/v1/embeddings", json{{"input", "hello world"}, {"dimensions", n_embd / 2}}),
             "dimensions", "truncation");
  expect_400(post(*server_, "/v1/embeddings", json{{"input", "x"}, {"dimensions", "64"}}), "dimensions");

  // base64: little-endian float32 of the very same values.
  Reply b64 = post(*server_, "/v1/embeddings",
                   json{{"input", {"hello world", "the cat"}}, {"encoding_format", "base64"}});
  ASSERT_EQ(b64.status, 200) << b64.body;
  ASSERT_TRUE(b64.js()["data"][0]["embedding"].is_string());
  EXPECT_EQ(decode_base64_floats(b64.js()["data"][0]["embedding"].get<std::string>()), v);
  Reply f = post(*server_, "/v1/embeddings", json{{"input", {"hello world", "the cat"}}, {"encoding_format", "float"}});
  ASSERT_EQ(f.status, 200);
  EXPECT_EQ(decode_base64_floats(b64.js()["data"][1]["embedding"].get<std::string>()),
            floats(f.js()["data"][1]["embedding"]));
  expect_400(post(*server_, "/v1/embeddings", json{{"input", "x"}, {"encoding_format", "int8"}}), "encoding_format",
             "base64");
}

TEST_F(EmbeddingServer, BadInputsAre400sNamingTheFieldOrTheInput) {
  expect_400(post(*server_, "/v1/embeddings", json::object()), "input", "required");
  expect_400(post(*server_, "/v1/embeddings", json{{"input", 3}}), "input");
  expect_400(post(*server_, "/v1/embeddings", json{{"input", json::array()}}), "input");
  expect_400(post(*server_, "/v1/embeddings", json{{"input", {"a", 1}}}), "input");
  expect_400(post(*server_, "/v1/embeddings", json{{"input", json::array({json::array({1, 2}), "a"})}}), "input");
  expect_400(post(*server_, "/v1/embeddings", json{{"input", {1.5, 2.5}}}), "input");
  expect_400(post(*server_, "/v1/embeddings", json{{"input", {"a", ""}}}), "input", "input 1");
  expect_400(post(*server_, "/v1/embeddings", json{{"input", json::array({json::array({5}), json::array()})}}), "input",
             "input 1");
  const int n_vocab = enc_->tokenizer().vocab().n_tokens();
  expect_400(post(*server_, "/v1/embeddings", json{{"input", json::array({json::array({5}), json::array({n_vocab})})}}),
             "input", "input 1");
  expect_400(post(*server_, "/v1/embeddings", json{{"input", {5, -1}}}), "input", "input 0");
  // Longer than the context (128): the index of the input.
  std::string longer;
  for (int i = 0; i < 200; ++i) longer += "a ";
  expect_400(post(*server_, "/v1/embeddings", json{{"input", {"fine", longer}}}), "input", "input 1");
  std::vector<int32_t> long_ids(enc_->info().n_ctx + 1, 5);
  expect_400(post(*server_, "/v1/embeddings", json{{"input", long_ids}}), "input", "context");
  // Unknown and mistyped fields.
  expect_400(post(*server_, "/v1/embeddings", json{{"input", "x"}, {"pooling", "cls"}}), "pooling", "unknown");
  expect_400(post(*server_, "/v1/embeddings", json{{"input", "x"}, {"user", 7}}), "user");
  EXPECT_EQ(post(*server_, "/v1/embeddings", json{{"input", "x"}, {"model", "nope"}}).status, 404);
  // Nothing of the above reached the encoder; the server still answers.
  EXPECT_EQ(post(*server_, "/v1/embeddings", json{{"input", "x"}}).status, 200);
}

TEST_F(EmbeddingServer, TokenBudgetSplitGivesTheSameVectors) {
  std::vector<std::string> texts;
  for (int i = 0; i < 9; ++i) texts.push_back("text number " + std::to_string(i) + std::string(i, 'x'));
  Reply whole = post(*server_, "/v1/embeddings", json{{"input", texts}});
  ASSERT_EQ(whole.status, 200) << whole.body;
  // A budget of 12 tokens: several encode() calls, one input alone when it is larger.
  auto small = encoder_server(*path_, [](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
    cfg.embed_batch_tokens = 12;
  });
  small->wait_ready();
  Reply split = post(*small, "/v1/embeddings", json{{"input", texts}});
  ASSERT_EQ(split.status, 200) << split.body;
  ASSERT_EQ(split.js()["data"].size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(floats(split.js()["data"][i]["embedding"]), floats(whole.js()["data"][i]["embedding"])) << i;
  EXPECT_EQ(split.js()["usage"], whole.js()["usage"]);
}

TEST_F(EmbeddingServer, GenerationIsRefusedAndTheRestServes) {
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/predict"}) {
    Reply r = post(*server_, path,
                   json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"prompt", "hi"}, {"content", "hi"}});
    EXPECT_EQ(r.status, 400) << path << ": " << r.body;
    const std::string msg = r.js()["error"]["message"].get<std::string>();
    EXPECT_NE(msg.find("embedding"), std::string::npos) << msg;
    EXPECT_NE(msg.find("/v1/embeddings"), std::string::npos) << msg;
  }
  Reply h = get(*server_, "/health");
  EXPECT_EQ(h.status, 200) << h.body;
  EXPECT_EQ(h.js()["model"], "enc");
  Reply models = get(*server_, "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.js()["data"][0]["id"], "enc");
  ASSERT_EQ(post(*server_, "/v1/embeddings", json{{"input", "hello"}}).status, 200);
  // /tokenize uses the encoder's vocabulary.
  Reply t = post(*server_, "/tokenize", json{{"content", "hello world"}});
  EXPECT_EQ(t.status, 200) << t.body;
  const std::string metrics = get(*server_, "/metrics").body;
  EXPECT_NE(metrics.find("endpoint=\"/v1/embeddings\""), std::string::npos);
  EXPECT_NE(metrics.find("endpoint=\"/v1/chat/completions\""), std::string::npos);  // the 400s are counted
}

// A reload swaps the kind of model: the routes follow the model now served.
TEST_F(EmbeddingServer, ReloadSwitchesBetweenEmbeddingAndGenerativeModels) {
  const std::vector<float> before =
      floats(post(*server_, "/v1/embeddings", json{{"input", "hello world"}}).js()["data"][0]["embedding"]);
  auto r = server_->service->reload(
      {shared_path("models/stories260K.bin"), shared_path("models/tok512.bin"), "stories260K"});
  ASSERT_FALSE(r.error) << r.error->message;
  Reply gen = post(*server_, "/v1/completions", json{{"prompt", "Once upon a time"}, {"max_tokens", 4}});
  EXPECT_EQ(gen.status, 200) << gen.body;
  Reply e = post(*server_, "/v1/embeddings", json{{"input", "Once upon a time"}});
  EXPECT_EQ(e.status, 200) << e.body;
  EXPECT_EQ(e.js()["model"], "stories260K");
  expect_400(post(*server_, "/v1/rerank", json{{"query", "q"}, {"documents", {"a"}}}), "model", "generative");
  r = server_->service->reload({*path_, "", "enc"});
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(post(*server_, "/v1/completions", json{{"prompt", "Once"}, {"max_tokens", 4}}).status, 400);
  EXPECT_EQ(floats(post(*server_, "/v1/embeddings", json{{"input", "hello world"}}).js()["data"][0]["embedding"]),
            before);
}

TEST_F(EmbeddingServer, ApiKeysGuardTheEmbeddingRoutes) {
  auto keyed = encoder_server(*path_, [](serve::ServeConfig& cfg, serve::EngineServiceOptions&) {
    cfg.api_keys = {"k-123"};
  });
  keyed->wait_ready();
  EXPECT_EQ(post(*keyed, "/v1/embeddings", json{{"input", "x"}}).status, 401);
  EXPECT_EQ(post(*keyed, "/v1/rerank", json{{"query", "x"}, {"documents", {"y"}}}).status, 401);
  EXPECT_EQ(post(*keyed, "/v1/embeddings", json{{"input", "x"}}, {{"Authorization", "Bearer k-123"}}).status, 200);
}

TEST_F(EmbeddingServer, PoolingOverride) {
  auto cls = encoder_server(*path_, [](serve::ServeConfig&, serve::EngineServiceOptions& so) { so.pooling = "cls"; });
  cls->wait_ready();
  Reply r = post(*cls, "/v1/embeddings", json{{"input", "hello world"}});
  ASSERT_EQ(r.status, 200) << r.body;
  ThreadPool pool(1);
  const std::vector<std::vector<int32_t>> texts{tokens("hello world")};
  auto want = enc_->encode(texts, embed::Pooling::cls, pool);
  ASSERT_TRUE(want.ok());
  expect_close(floats(r.js()["data"][0]["embedding"]), unit((*want)[0], (*want)[0].size()));
  EXPECT_NE(floats(r.js()["data"][0]["embedding"]),
            floats(post(*server_, "/v1/embeddings", json{{"input", "hello world"}}).js()["data"][0]["embedding"]));
  // A pooling the model cannot do fails the load, naming it.
  serve::EngineServiceOptions so;
  so.model_path = *path_;
  so.threads = 1;
  so.pooling = "rank";  // bert-tiny has no classification head
  serve::EngineService bad(so);
  Status st = bad.wait_ready();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("rank"), std::string::npos) << st.error().message;
}

// Encoding runs as a job of the service's own thread: /health answers at once meanwhile.
TEST(EmbeddingServerLoad, HealthAnswersWhileAnEncodeRuns) {
  TempDir dir;
  model::SyntheticSpec s;
  s.arch = "bert";
  s.n_embd = 256;
  s.n_layer = 4;
  s.n_ff = 1024;
  s.n_head = 4;
  s.n_vocab = 512;
  s.n_ctx = 512;
  s.seed = 3;
  const std::string path = dir.file("slow.gguf");
  std::string why;
  ASSERT_TRUE(write_synthetic(s, path, &why)) << why;
  auto server = encoder_server(path);
  server->wait_ready();
  std::string text;
  for (int i = 0; i < 400; ++i) {
    text += static_cast<char>('a' + i % 26);
    text += ' ';
  }
  std::atomic<bool> done{false};
  std::atomic<int> status{0};
  std::thread embed([&] {
    status = post(*server, "/v1/embeddings", json{{"input", std::vector<std::string>(4, text)}}).status;
    done = true;
  });
  while (server->server->context().in_flight.load() == 0 && !done)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto t0 = std::chrono::steady_clock::now();
  Reply h = get(*server, "/health");
  const double health_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool still_encoding = !done;
  embed.join();
  EXPECT_EQ(status.load(), 200);
  EXPECT_EQ(h.status, 200) << h.body;
  if (!still_encoding) GTEST_SKIP() << "the encode finished before /health was asked: inconclusive on this machine";
  EXPECT_LT(health_s, 0.5) << "/health waited for the encode";
}

// Matryoshka truncation on a model trained for it (skipped until a small synthetic one exists).
TEST(EmbeddingDimensions, TruncatedThenRenormalized) {
  TempDir dir;
  const auto path = find_small_encoder(dir, [](const embed::EncoderInfo& i) { return !i.matryoshka_dims.empty(); });
  if (!path) GTEST_SKIP() << "no small synthetic encoder with Matryoshka dimensions yet";
  auto enc = embed::open_text_encoder(*path);
  ASSERT_TRUE(enc.ok());
  const embed::EncoderInfo info = (*enc)->info();
  int32_t smallest = info.n_embd;
  for (const int32_t d : info.matryoshka_dims) smallest = std::min(smallest, d);
  auto server = encoder_server(*path);
  server->wait_ready();
  Reply full = post(*server, "/v1/embeddings", json{{"input", "hello world"}});
  ASSERT_EQ(full.status, 200) << full.body;
  const std::vector<float> v = floats(full.js()["data"][0]["embedding"]);
  for (const int32_t d : {smallest, (smallest + info.n_embd) / 2}) {
    Reply r = post(*server, "/v1/embeddings", json{{"input", "hello world"}, {"dimensions", d}});
    ASSERT_EQ(r.status, 200) << r.body;
    const std::vector<float> got = floats(r.js()["data"][0]["embedding"]);
    ASSERT_EQ(got.size(), static_cast<size_t>(d));
    expect_close(got, unit(v, static_cast<size_t>(d)));  // the prefix of the full vector, unit length again
    Reply b = post(*server, "/v1/embeddings",
                   json{{"input", "hello world"}, {"dimensions", d}, {"encoding_format", "base64"}});
    EXPECT_EQ(decode_base64_floats(b.js()["data"][0]["embedding"].get<std::string>()), got);
  }
  expect_400(post(*server, "/v1/embeddings", json{{"input", "x"}, {"dimensions", smallest - 1}}), "dimensions");
  expect_400(post(*server, "/v1/embeddings", json{{"input", "x"}, {"dimensions", info.n_embd + 1}}), "dimensions");
}

// A generative model keeps its mean-pooled hidden state; only its full width is a `dimensions`.
TEST(GenerativeEmbeddings, FullWidthOnlyAndBase64) {
  TestServer server;
  server.wait_ready();
  const int32_t n_embd = server.service->model().model->config().n_embd;
  Reply r = post(server, "/v1/embeddings", json{{"input", "Once upon a time"}, {"dimensions", n_embd}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<float> v = floats(r.js()["data"][0]["embedding"]);
  ASSERT_EQ(v.size(), static_cast<size_t>(n_embd));
  expect_400(post(server, "/v1/embeddings", json{{"input", "Once upon a time"}, {"dimensions", n_embd - 8}}),
             "dimensions");
  Reply b = post(server, "/v1/embeddings", json{{"input", "Once upon a time"}, {"encoding_format", "base64"}});
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(decode_base64_floats(b.js()["data"][0]["embedding"].get<std::string>()), v);
  Reply t = post(server, "/v1/embeddings", json{{"input", json::array({json::array({1, 2, 3})})}});
  EXPECT_EQ(t.status, 200) << t.body;
  expect_400(post(server, "/v1/embeddings", json{{"input", json::array({json::array({1, 100000})})}}), "input",
             "vocabulary");
}

TEST(EmbeddingSettings, PoolingAndBatchTokensAreValidated) {
  serve::ServeConfig c;
  c.model_path = "m.gguf";
  EXPECT_TRUE(serve::validate(c).ok());
  EXPECT_EQ(c.embed_batch_tokens, 8192);
  c.pooling = "cls";
  EXPECT_TRUE(serve::validate(c).ok());
  c.pooling = "rank";
  ASSERT_FALSE(serve::validate(c).ok());
  EXPECT_NE(serve::validate(c).error().message.find("pooling"), std::string::npos);
  c.pooling.clear();
  c.embed_batch_tokens = 0;
  ASSERT_FALSE(serve::validate(c).ok());
  EXPECT_NE(serve::validate(c).error().message.find("embed_batch_tokens"), std::string::npos);
  TempDir dir;
  std::ofstream(dir.file("c.yaml")) << "model_path: m.gguf\npooling: last\nembed_batch_tokens: 64\n";
  auto loaded = serve::load_config_file(dir.file("c.yaml"), serve::ServeConfig{});
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->pooling, "last");
  EXPECT_EQ(loaded->embed_batch_tokens, 64);
}

TEST(EmbeddingVectors, SplitByTokenBudget) {
  using serve::split_by_token_budget;
  using Ranges = std::vector<std::pair<size_t, size_t>>;
  const std::vector<size_t> sizes{4, 4, 4, 20, 1, 1};
  EXPECT_EQ(split_by_token_budget(sizes, 8), (Ranges{{0, 2}, {2, 3}, {3, 4}, {4, 6}}));
  EXPECT_EQ(split_by_token_budget(sizes, 1000), (Ranges{{0, 6}}));
  EXPECT_EQ(split_by_token_budget(sizes, 1), (Ranges{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}}));
  EXPECT_TRUE(split_by_token_budget(std::vector<size_t>{}, 8).empty());
}

TEST(EmbeddingVectors, Base64AndNormalization) {
  EXPECT_EQ(serve::base64_encode(""), "");
  EXPECT_EQ(serve::base64_encode("f"), "Zg==");
  EXPECT_EQ(serve::base64_encode("fo"), "Zm8=");
  EXPECT_EQ(serve::base64_encode("foo"), "Zm9v");
  EXPECT_EQ(serve::base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(serve::floats_to_base64(std::vector<float>{1.0f}), "AACAPw==");  // 0x3f800000, little-endian
  const std::vector<float> v{3, 4, 12};
  EXPECT_EQ(serve::truncate_and_normalize(v, 2), (std::vector<float>{0.6f, 0.8f}));
  const std::vector<float> n = serve::truncate_and_normalize(v, 3);
  EXPECT_NEAR(n[2], 12.0 / 13.0, 1e-7);
  EXPECT_EQ(serve::truncate_and_normalize(std::vector<float>{0, 0}, 2), (std::vector<float>{0, 0}));
}

}  // namespace
}  // namespace edgelm::test
