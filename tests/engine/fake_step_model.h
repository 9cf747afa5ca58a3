// A StepModel without weights for scheduler and engine tests. It writes each token's (token,
// position) into the real paged KV store, and the logits after a token (each of the slice's
// last n_logits) are a one-hot vote for
//   next = chain hash of every (token, position) read back from the KV for positions [0, p],
// so a wrong block table, a bad prefix-cache hit, a missed copy-on-write or a lost block after
// preemption changes the generated tokens (or fails the position check). expected_tokens()
// computes the same chain directly from the token list: the output of a request run alone.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/step_model.h"
#include "model/arch.h"

namespace edgelm::engine::test {

inline uint64_t fake_mix(uint64_t h, int32_t token, int32_t pos) {
  h ^= static_cast<uint64_t>(static_cast<uint32_t>(token)) * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(pos);
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 31);
}

class FakeStepModel final : public StepModel {
 public:
  explicit FakeStepModel(int32_t n_vocab = 64, int32_t n_ctx = 512) {
    config_.arch = model::find_arch("llama").value();
    config_.n_ctx_train = n_ctx;
    config_.n_embd = 32;
    config_.n_layer = 1;
    config_.n_ff = 32;
    config_.n_head = 1;
    config_.n_head_kv = 1;
    config_.head_dim = 32;
    config_.n_rot = 32;
    config_.n_vocab = n_vocab;
  }
  const model::ModelConfig& config() const override { return config_; }

  Status forward(const StepBatch& batch, kv::KvStore& store, std::span<float> logits) override {
    ++n_calls;
    const int32_t bs = store.block_size();
    std::vector<float> row(static_cast<size_t>(store.n_embd_kv()), 0.0f);
    size_t t = 0, out = 0;
    for (const BatchSeq& s : batch.seqs) {
      for (int32_t i = 0; i < s.n_tokens; ++i, ++t) {
        const int32_t pos = s.pos0 + i;
        row[0] = static_cast<float>(batch.tokens[t]);
        row[1] = static_cast<float>(pos);
        store.write(0, s.blocks[static_cast<size_t>(pos / bs)], pos % bs, row.data(), row.data());
      }
      max_batch_tokens_seen = std::max<int64_t>(max_batch_tokens_seen, static_cast<int64_t>(batch.tokens.size()));
      // Logits after each of the slice's last n_logits tokens, from the context read back.
      std::vector<int32_t> ctx;
      uint64_t h = 0;
      const int32_t end = s.pos0 + s.n_tokens;
      for (int32_t pos = 0; pos < end; ++pos) {
        store.read_k(0, s.blocks[static_cast<size_t>(pos / bs)], pos % bs, row.data());
        if (row[1] != static_cast<float>(pos)) return make_error("fake model: position {} holds {}", pos, row[1]);
        h = fake_mix(h, static_cast<int32_t>(row[0]), pos);
        ctx.push_back(static_cast<int32_t>(row[0]));
        if (pos < end - s.n_logits) continue;
        const auto v = static_cast<size_t>(config_.n_vocab);
        std::span<float> lg = logits.subspan(out++ * v, v);
        if (logit_fn) {
          logit_fn(ctx, lg);
          continue;
        }
        std::fill(lg.begin(), lg.end(), 0.0f);
        lg[h % v] = 10.0f;
      }
    }
    return ok_status();
  }

  // When set, the logits after a context (the tokens read back from the KV, positions [0, p])
  // come from here instead of the one-hot chain hash.
  std::function<void(std::span<const int32_t> context, std::span<float> logits)> logit_fn;
  int64_t n_calls = 0;
  int64_t max_batch_tokens_seen = 0;

 private:
  model::ModelConfig config_;
};

// What a greedy request produces alone: the chain over prompt + generated tokens.
inline std::vector<int32_t> expected_tokens(std::vector<int32_t> tokens, int32_t n_new, int32_t n_vocab) {
  std::vector<int32_t> out;
  for (int32_t k = 0; k < n_new; ++k) {
    uint64_t h = 0;
    for (size_t pos = 0; pos < tokens.size(); ++pos) h = fake_mix(h, tokens[pos], static_cast<int32_t>(pos));
    const auto next = static_cast<int32_t>(h % static_cast<uint64_t>(n_vocab));
    out.push_back(next);
    tokens.push_back(next);
  }
  return out;
}

}  // namespace edgelm::engine::test
