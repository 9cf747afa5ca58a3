// Embedder: where the semantic cache level gets its query vectors (an interface with three
// implementations: LexicalEmbedder (hashed n-grams, no model), EncoderEmbedder (any embedding model
// behind embed::TextEncoder) and
// FunctionEmbedder (any callable; the server wraps the serving model's mean-pooled hidden state,
// run on the engine thread, in one)).
//
// Invariants: embed() returns an L2-normalized vector (or all zeros for text without features)
// whose length is dim() when dim() > 0 (0: known only after the first call, e.g. the serving
// model's width, which a reload may change); embed() is safe to call from several threads at once.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"

namespace edgelm::cache {

class Embedder {
 public:
  virtual ~Embedder() = default;
  virtual int dim() const = 0;
  // A short stable name ("lexical-512", "bert:<file>", "self:<model>"): vectors persisted with one
  // name are only reused by an embedder of the same name.
  virtual std::string name() const = 0;
  virtual Result<std::vector<float>> embed(std::string_view text) = 0;
  // Many texts at once (a model-backed embedder runs them in one batched pass); the same vectors
  // as embed() on each.
  virtual Result<std::vector<std::vector<float>>> embed_batch(std::span<const std::string> texts) {
    std::vector<std::vector<float>> out;
    out.reserve(texts.size());
    for (const std::string& t : texts) {
      Result<std::vector<float>> v = embed(t);
      if (!v.ok()) return v.error();
      out.push_back(std::move(v).value());
    }
    return out;
  }
};

// Scales `v` to unit length in place (leaves an all-zero vector alone).
void l2_normalize(std::vector<float>& v);

class FunctionEmbedder final : public Embedder {
 public:
  using Fn = std::function<Result<std::vector<float>>(std::string_view)>;
  FunctionEmbedder(std::string name, int dim, Fn fn) : name_(std::move(name)), dim_(dim), fn_(std::move(fn)) {}
  int dim() const override { return dim_; }
  std::string name() const override { return name_; }
  Result<std::vector<float>> embed(std::string_view text) override {
    Result<std::vector<float>> r = fn_(text);
    if (r.ok()) l2_normalize(*r);
    return r;
  }

 private:
  std::string name_;
  int dim_;
  Fn fn_;
};

}  // namespace edgelm::cache
