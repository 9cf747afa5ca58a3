// What the batching engine runs a step on: a model that takes a StepBatch (slices of several
// sequences over the paged KV cache) and writes the logits of the tokens the slices ask for.
//
// ModelRunner is the real one (a loaded model, a thread pool, forward_batch). Tests of the
// scheduler plug in a fake (tests/engine/fake_step_model.h) that needs no weights but still
// stores and reads the KV cache, so prefix reuse, copy-on-write and preemption bugs change its
// output.
#pragma once

#include <span>

#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/batch_forward.h"
#include "kv/kv_store.h"
#include "model/model.h"

namespace edgelm::engine {

class StepModel {
 public:
  virtual ~StepModel() = default;
  virtual const model::ModelConfig& config() const = 0;
  // logits: [sum of the slices' n_logits, n_vocab], in batch order.
  virtual Status forward(const StepBatch& batch, kv::KvStore& store, std::span<float> logits) = 0;
  // After a forward with StepBatch::want_hidden: every token's final-normed hidden state
  // [n_total, n_embd], batch order (empty: this model cannot say; the MTP drafter then has no input).
  virtual std::span<const float> hidden() const { return {}; }
};

class ModelRunner final : public StepModel {
 public:
  // Both must outlive the runner.
  ModelRunner(const model::Model& model, ThreadPool& pool) : model_(model), pool_(pool) {}
  const model::ModelConfig& config() const override { return model_.config(); }
  Status forward(const StepBatch& batch, kv::KvStore& store, std::span<float> logits) override {
    n_hidden_ = batch.want_hidden ? batch.tokens.size() * static_cast<size_t>(model_.config().n_embd) : 0;
    return forward_batch(model_, batch, store, logits, pool_, scratch_);
  }
  std::span<const float> hidden() const override { return std::span(scratch_.hidden).first(n_hidden_); }

 private:
  const model::Model& model_;
  ThreadPool& pool_;
  BatchScratch scratch_;
  size_t n_hidden_ = 0;
};

}  // namespace edgelm::engine
