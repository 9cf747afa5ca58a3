// The synthetic embedding and reranker models of the /v1/embeddings and /v1/rerank socket tests,
// written by the same code as `edgelm synth`, plus a TestServer (server_fixture.h) that serves one.
//
// write_bert_tiny(): the bert-tiny shape (mean pooling, 64 wide, context 128, a generated
// WordPiece vocabulary of 512), always available. find_small_encoder(): the first small
// synthetic model that opens as a TextEncoder and satisfies a predicate (can_rank, Matryoshka
// dimensions): the small named encoder shapes, then the decoder embedders' tiny shapes (with the
// shared vocabularies of their kind); a test whose predicate none meets skips, saying so.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "embed/text_encoder.h"
#include "format/gguf_writer.h"
#include "model/synthetic.h"
#include "server/server_fixture.h"
#include "support/test_data.h"

namespace edgelm::test {

// Writes `spec` to `path`; false (with the reason in `why`) when it cannot be made.
inline bool write_synthetic(const model::SyntheticSpec& spec, const std::string& path, std::string* why = nullptr) {
  auto f = model::make_synthetic_model(spec);
  if (!f.ok()) {
    if (why) *why = f.error().message;
    return false;
  }
  auto st = format::write_gguf(path, *f);
  if (!st.ok() && why) *why = st.error().message;
  return st.ok();
}

inline std::string write_bert_tiny(const TempDir& dir, const std::string& name = "bert-tiny.gguf") {
  model::SyntheticSpec s;
  EXPECT_TRUE(model::apply_synthetic_shape(s, "bert-tiny").ok());
  s.seed = 11;
  const std::string path = dir.file(name);
  std::string why;
  EXPECT_TRUE(write_synthetic(s, path, &why)) << why;
  return path;
}

// The path of the first small synthetic encoder (a named shape of at most 128 wide, or a tiny
// decoder in embedding mode) for which `want(info)` holds, written into `dir`; nullopt if none.
inline std::optional<std::string> find_small_encoder(const TempDir& dir,
                                                     const std::function<bool(const embed::EncoderInfo&)>& want) {
  std::vector<model::SyntheticSpec> candidates;
  for (const model::SyntheticShape& shape : model::synthetic_shapes()) {
    if (shape.n_embd > 128 || shape.n_layer > 8 || shape.n_vocab > 4096) continue;
    model::SyntheticSpec s;
    if (!model::apply_synthetic_shape(s, shape.name).ok()) continue;
    candidates.push_back(s);
  }
  for (const char* name : {"qwen3-embedding-tiny", "embeddinggemma-tiny"}) {  // the decoder embedders' test shapes
    model::SyntheticSpec s;
    if (!model::apply_synthetic_shape(s, name).ok()) continue;
    s.vocab_from = shared_path(s.arch == "qwen3" ? "vocab/ggml-vocab-gpt-2.gguf" : "vocab/ggml-vocab-llama-spm.gguf");
    candidates.push_back(s);
  }
  for (const char* arch : {"qwen3", "gemma-embedding"}) {  // decoders in embedding mode (last-token pooling)
    model::SyntheticSpec s;
    s.arch = arch;
    s.n_ctx = 128;
    s.pooling_type = 3;
    candidates.push_back(s);
  }
  int i = 0;
  for (model::SyntheticSpec& s : candidates) {
    s.seed = 5;
    const std::string path = dir.file("candidate" + std::to_string(i++) + ".gguf");
    if (!write_synthetic(s, path)) continue;
    auto is = embed::is_text_encoder_file(path);
    if (!is.ok() || !*is) continue;
    auto enc = embed::open_text_encoder(path);
    if (enc.ok() && want((*enc)->info())) return path;
  }
  return std::nullopt;
}

// A server over the embedding/reranker model at `path` (name "enc"), 1 thread.
inline std::unique_ptr<TestServer> encoder_server(
    const std::string& path, const std::function<void(serve::ServeConfig&, serve::EngineServiceOptions&)>& more = {}) {
  return std::make_unique<TestServer>([&](serve::ServeConfig& cfg, serve::EngineServiceOptions& so) {
    cfg.model_path = path;
    cfg.tokenizer_path.clear();
    cfg.model_name = "enc";
    so.model_path = path;
    so.tokenizer_path.clear();
    so.model_name = "enc";
    if (more) more(cfg, so);
  });
}

// The test's own L2 normalization of the first `dims` values (independent of the server's).
inline std::vector<double> unit(const std::vector<float>& v, size_t dims) {
  double sq = 0;
  for (size_t i = 0; i < dims; ++i) sq += double{v[i]} * v[i];
  std::vector<double> out(dims);
  for (size_t i = 0; i < dims; ++i) out[i] = v[i] / std::sqrt(sq);
  return out;
}

}  // namespace edgelm::test
