#include "engine/assistant_drafter.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "engine/draft_sampling.h"
#include "engine/scheduler.h"
#include "kernels/ops_vector.h"
#include "model/ops.h"

namespace edgelm::engine {

Result<std::unique_ptr<AssistantDrafter>> AssistantDrafter::create(const model::Model& target,
                                                                   const model::Gemma4Assistant& assistant,
                                                                   ThreadPool& pool) {
  EDGELM_TRY_STATUS(assistant.check_target(target));
  return std::unique_ptr<AssistantDrafter>(new AssistantDrafter(target, assistant, pool));
}

AssistantDrafter::AssistantDrafter(const model::Model& target, const model::Gemma4Assistant& a, ThreadPool& pool)
    : target_(target), a_(a), pool_(pool) {
  for (int32_t l = 0; l < a.config().n_layer; ++l) kv_index_.push_back(a.target_kv_index(target, l));
}

AssistantDrafter::State& AssistantDrafter::state(const Sequence& s) {
  return draft_state(states_, s, 0xbb67ae8584caa73bull);
}

void AssistantDrafter::observe(const Sequence& s, int32_t pos0, std::span<const float> rows) {
  const auto B = static_cast<size_t>(a_.config().n_backbone);
  if (rows.size() < B) return;
  State& st = state(s);
  st.h.assign(rows.end() - static_cast<std::ptrdiff_t>(B), rows.end());
  st.h_pos = pos0 + static_cast<int32_t>(rows.size() / B) - 1;
}

void AssistantDrafter::step(std::span<const int32_t> tokens, const float* h, std::span<const int32_t> pos,
                            std::span<const std::span<const kv::BlockId>> blocks, float* logits, float* h_out) {
  EDGELM_CHECK(store_ != nullptr, "assistant drafter without the target's K/V store");
  const model::AssistantConfig& c = a_.config();
  const model::ModelConfig& tc = target_.config();
  const kernels::VectorOps& ops = kernels::active_vector_ops();
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t E = c.n_embd, B = c.n_backbone, F = c.n_ff, H = c.n_head;
  const float embd_scale = std::sqrt(static_cast<float>(B));
  in_.resize(static_cast<size_t>(n * 2 * B));
  for (int64_t r = 0; r < n; ++r) {
    float* row = &in_[static_cast<size_t>(r * 2 * B)];
    kernels::get_row(target_.weights().token_embd, tokens[static_cast<size_t>(r)], row);
    for (int64_t i = 0; i < B; ++i) row[i] *= embd_scale;
    std::copy_n(h + r * B, B, row + B);
  }
  x_.resize(static_cast<size_t>(n * E));
  xn_.resize(static_cast<size_t>(n * E));
  proj_.resize(static_cast<size_t>(n * E));
  model::linear(x_.data(), in_.data(), n, a_.pre_proj(), nullptr, pool_, mm_);
  bseqs_.clear();
  tok_seq_.resize(static_cast<size_t>(n));
  tok_pos_.resize(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    BatchSeq bs;
    bs.pos0 = pos[static_cast<size_t>(r)];
    bs.blocks = blocks[static_cast<size_t>(r)];
    bseqs_.push_back(bs);
    tok_seq_[static_cast<size_t>(r)] = static_cast<int32_t>(r);
    // Attention covers the target's positions [0, pos): the plan's last position is pos - 1.
    tok_pos_[static_cast<size_t>(r)] = pos[static_cast<size_t>(r)] - 1;
  }
  for (int32_t l = 0; l < c.n_layer; ++l) {
    const model::AssistantLayer& L = a_.layer(l);
    const int64_t D = c.layer_head_dim(l), Q = H * D;
    const int32_t kv = kv_index_[static_cast<size_t>(l)];
    const int32_t tl = tc.kv_index_layer(kv);
    const model::RopeTable& rope = target_.rope_for(tl, tc.n_ctx_train);
    for (int64_t r = 0; r < n; ++r) ops.rms_norm(&xn_[static_cast<size_t>(r * E)], &x_[static_cast<size_t>(r * E)],
                                                 L.attn_norm, E, c.rms_eps);
    q_.resize(static_cast<size_t>(n * Q));
    attn_.resize(static_cast<size_t>(n * Q));
    model::linear(q_.data(), xn_.data(), n, L.wq, nullptr, pool_, mm_);
    for (int64_t r = 0; r < n; ++r) {
      float* qr = &q_[static_cast<size_t>(r * Q)];
      for (int64_t hd = 0; hd < H; ++hd) ops.rms_norm(qr + hd * D, qr + hd * D, L.q_norm, D, c.rms_eps);
      rope.apply(qr, static_cast<int32_t>(H), static_cast<int32_t>(D), pos[static_cast<size_t>(r)]);
    }
    // Local layers see the cells p with pos - p < n_swa, p < pos: the last n_swa - 1 before pos.
    const int32_t window = c.local[static_cast<size_t>(l)] ? std::max(1, c.n_swa - 1) : 0;
    attention_plan(attn_scratch_, n, tok_pos_.data(), static_cast<int32_t>(H), static_cast<int32_t>(D),
                   pool_.n_threads(), window);
    const AttnLayer al{*store_,      kv,
                       bseqs_.data(), tok_seq_.data(),
                       tok_pos_.data(), q_.data(),
                       attn_.data(), static_cast<int32_t>(H),
                       tc.n_head_kv, static_cast<int32_t>(D),
                       1.0f};
    attention_run(al, attn_scratch_, pool_);
    model::linear(proj_.data(), attn_.data(), n, L.wo, nullptr, pool_, mm_);
    for (int64_t r = 0; r < n; ++r) {
      float* p = &proj_[static_cast<size_t>(r * E)];
      ops.rms_norm(p, p, L.post_attn_norm, E, c.rms_eps);
      ops.add(&x_[static_cast<size_t>(r * E)], p, E);
      ops.rms_norm(&xn_[static_cast<size_t>(r * E)], &x_[static_cast<size_t>(r * E)], L.ffn_norm, E, c.rms_eps);
    }
    gate_.resize(static_cast<size_t>(n * F));
    up_.resize(static_cast<size_t>(n * F));
    model::linear(gate_.data(), xn_.data(), n, L.w_gate, nullptr, pool_, mm_);
    model::linear(up_.data(), xn_.data(), n, L.w_up, nullptr, pool_, mm_);
    model::geglu(gate_.data(), up_.data(), n * F);
    model::linear(proj_.data(), gate_.data(), n, L.w_down, nullptr, pool_, mm_);
    for (int64_t r = 0; r < n; ++r) {
      float* p = &proj_[static_cast<size_t>(r * E)];
      float* x = &x_[static_cast<size_t>(r * E)];
      ops.rms_norm(p, p, L.post_ffw_norm, E, c.rms_eps);
      ops.add(x, p, E);
      if (L.out_scale != nullptr)
        for (int64_t i = 0; i < E; ++i) x[i] *= L.out_scale[0];
    }
  }
  for (int64_t r = 0; r < n; ++r)
    ops.rms_norm(&xn_[static_cast<size_t>(r * E)], &x_[static_cast<size_t>(r * E)], a_.output_norm(), E, c.rms_eps);
  model::linear(h_out, xn_.data(), n, a_.post_proj(), nullptr, pool_, mm_);
  model::linear(logits, xn_.data(), n, a_.token_embd(), nullptr, pool_, mm_);
}

void AssistantDrafter::propose(std::span<Sequence* const> seqs, std::span<const int32_t> k) {
  const auto B = static_cast<size_t>(a_.config().n_backbone);
  const auto V = static_cast<size_t>(a_.config().n_vocab);
  struct Active {
    Sequence* s;
    State* st;
    int32_t k;
  };
  std::vector<Active> act;
  int32_t k_most = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    if (k[i] <= 0) continue;
    State& st = state(s);
    const int32_t n = s.kv.n_tokens;  // target positions [0, n) in the K/V; token n pending
    if (n < 1 || st.h_pos != n - 1 || static_cast<int32_t>(s.tokens.size()) != n + 1) continue;
    act.push_back({&s, &st, k[i]});
    k_most = std::max(k_most, k[i]);
  }
  if (act.empty()) return;
  std::vector<int32_t> tokens, pos;
  std::vector<std::span<const kv::BlockId>> blocks;
  std::vector<Active*> rows;
  for (int32_t j = 0; j < k_most; ++j) {
    tokens.clear(), pos.clear(), blocks.clear(), rows.clear();
    std::vector<float> h_next;
    for (size_t i = 0; i < act.size(); ++i) {
      Active& a = act[i];
      if (a.k <= j) continue;
      tokens.push_back(j == 0 ? a.s->tokens.back() : a.s->draft.back());
      pos.push_back(a.s->kv.n_tokens);
      blocks.emplace_back(a.s->kv.blocks);
      const float* h = j == 0 ? a.st->h.data() : &h_out_[i * B];
      h_next.insert(h_next.end(), h, h + B);
      rows.push_back(&a);
    }
    h_in_.assign(h_next.begin(), h_next.end());
    logits_.resize(rows.size() * V);
    std::vector<float> h_out(rows.size() * B);
    step(tokens, h_in_.data(), pos, blocks, logits_.data(), h_out.data());
    // h_out_ is indexed by the sequence's place in act (rows of later steps are a prefix of them).
    h_out_.resize(act.size() * B);
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto i = static_cast<size_t>(rows[r] - act.data());
      std::copy_n(&h_out[r * B], B, &h_out_[i * B]);
      append_draft_token(*rows[r]->s, rows[r]->st->sampler, std::span<float>(logits_.data() + r * V, V), hist_,
                         probs_);
    }
  }
}

}  // namespace edgelm::engine
