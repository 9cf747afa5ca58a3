#include "engine/mtp_drafter.h"

#include <algorithm>

#include "core/check.h"
#include "engine/draft_sampling.h"
#include "engine/scheduler.h"
#include "kernels/ops_vector.h"
#include "model/ops.h"

namespace edgelm::engine {

Result<std::unique_ptr<MtpDrafter>> MtpDrafter::create(const model::Model& target, ThreadPool& pool,
                                                       int32_t block_size, kv::KvType kv_type, int32_t n_blocks) {
  EDGELM_TRY(std::unique_ptr<model::Model> head, target.mtp_head());
  if (n_blocks < 2) return make_error("the MTP head's K/V needs at least 2 blocks, got {}", n_blocks);
  EDGELM_TRY(kv::KvStore store, kv::KvStore::create(head->config(), n_blocks, block_size, kv_type));
  return std::unique_ptr<MtpDrafter>(new MtpDrafter(target, std::move(head), pool, std::move(store), block_size));
}

MtpDrafter::MtpDrafter(const model::Model& target, std::unique_ptr<model::Model> head, ThreadPool& pool,
                       kv::KvStore store, int32_t block_size)
    : target_(target),
      head_(std::move(head)),
      pool_threads_(pool),
      store_(std::move(store)),
      pool_(store_.n_blocks(), block_size),
      kv_(pool_, store_) {}

MtpDrafter::State& MtpDrafter::state(const Sequence& s) {
  return draft_state(states_, s, 0x6a09e667f3bcc909ull);
}

void MtpDrafter::reset(State& st, int32_t pos) {
  kv_.free(st.kv);
  st.kv.cache_prefix = false;
  st.base = st.h_pos = pos;
  st.h.clear();
  st.n_catchup = 0;
  st.fed.clear();
}

void MtpDrafter::observe(const Sequence& s, int32_t pos0, std::span<const float> rows) {
  if (rows.empty()) return;
  State& st = state(s);
  const auto E = static_cast<size_t>(target_.config().n_embd);
  const auto expected = st.h_pos + static_cast<int32_t>(st.h.size() / E);
  const bool fresh = st.kv.n_tokens == 0 && st.kv.n_reserved == 0 && st.h.empty();
  if (fresh || pos0 != expected) reset(st, pos0);
  st.h.insert(st.h.end(), rows.begin(), rows.end());
}

void MtpDrafter::input_rows(std::span<const int32_t> tokens, const float* hidden, int64_t n) {
  const model::ModelConfig& c = target_.config();
  const model::MtpWeights& m = target_.weights().mtp;
  const int64_t E = c.n_embd;
  const kernels::VectorOps& ops = kernels::active_vector_ops();
  cat_.resize(static_cast<size_t>(n * 2 * E));
  in_.resize(static_cast<size_t>(n * E));
  for (int64_t t = 0; t < n; ++t) {
    float* e = &cat_[static_cast<size_t>(t * 2 * E)];
    kernels::get_row(target_.weights().token_embd, tokens[static_cast<size_t>(t)], e);
    ops.rms_norm(e, e, m.enorm, E, c.rms_eps);
    ops.rms_norm(e + E, hidden + t * E, m.hnorm, E, c.rms_eps);
  }
  if (m.eh_proj) {
    model::linear(in_.data(), cat_.data(), n, m.eh_proj, nullptr, pool_threads_, mm_);
    return;
  }
  for (int64_t t = 0; t < n; ++t) {  // no eh_proj: the sum of the two normed rows
    std::copy_n(&cat_[static_cast<size_t>(t * 2 * E)], E, &in_[static_cast<size_t>(t * E)]);
    ops.add(&in_[static_cast<size_t>(t * E)], &cat_[static_cast<size_t>(t * 2 * E + E)], E);
  }
}

void MtpDrafter::propose(std::span<Sequence* const> seqs, std::span<const int32_t> k) {
  const auto E = static_cast<size_t>(target_.config().n_embd);
  const auto V = static_cast<size_t>(target_.config().n_vocab);
  struct Active {
    Sequence* s;
    State* st;
    int32_t k;
    int32_t pos;             // next MTP position to feed
    std::vector<float> g;    // the head's final-normed output of the last entry: the next chained hidden
  };
  std::vector<Active> act;
  int32_t k_most = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    if (k[i] <= 0) continue;
    State& st = state(s);
    EDGELM_CHECK(st.kv.n_reserved == 0, "MTP K/V reserved across steps");
    const int32_t n_main = s.kv.n_tokens;  // main positions [0, n_main) computed; token n_main pending
    const auto n_h = static_cast<int32_t>(st.h.size() / E);
    // The last entry (main position n_main - 1) needs that position's hidden state.
    if (n_h == 0 || st.h_pos + n_h != n_main || static_cast<int32_t>(s.tokens.size()) != n_main + 1) continue;
    if (!kv_.reserve(st.kv, n_h + k[i] - 1)) {
      // Start this sequence's MTP K/V over from the hidden rows it holds, after evicting the MTP
      // K/V of sequences not drafting now (they restart from their next hidden rows).
      kv_.free(st.kv);
      st.kv.cache_prefix = false;
      st.base = st.h_pos;
      if (!kv_.reserve(st.kv, n_h + k[i] - 1)) {
        for (auto& entry : states_) {
          const auto id = entry.first;  // not a structured binding: clang 14 cannot capture those
          const bool drafting = std::any_of(seqs.begin(), seqs.end(), [&](const Sequence* q) { return q->id == id; });
          State& o = *entry.second;
          if (!drafting) reset(o, o.h_pos + static_cast<int32_t>(o.h.size() / E));
        }
        if (!kv_.reserve(st.kv, n_h + k[i] - 1)) continue;
      }
    }
    st.fed.assign(s.tokens.begin() + st.h_pos + 1, s.tokens.end());  // token i + 1 of each catch-up entry
    st.n_catchup = n_h;
    act.push_back({&s, &st, k[i], st.kv.n_tokens, {}});
    k_most = std::max(k_most, k[i]);
  }
  if (act.empty()) return;
  for (int32_t j = 0; j < k_most; ++j) {
    batch_.tokens.clear();
    batch_.seqs.clear();
    hin_.clear();
    std::vector<Active*> rows;
    for (Active& a : act) {
      if (a.k <= j) continue;
      const size_t n0 = batch_.tokens.size();
      if (j == 0) {
        batch_.tokens.insert(batch_.tokens.end(), a.st->fed.begin(), a.st->fed.end());
        hin_.insert(hin_.end(), a.st->h.begin(), a.st->h.begin() + static_cast<std::ptrdiff_t>(a.st->n_catchup * E));
      } else {
        batch_.tokens.push_back(a.s->draft.back());
        a.st->fed.push_back(a.s->draft.back());
        hin_.insert(hin_.end(), a.g.begin(), a.g.end());
      }
      const auto n = static_cast<int32_t>(batch_.tokens.size() - n0);
      batch_.seqs.push_back(BatchSeq{a.pos, n, a.st->kv.blocks, 1, -1, {}, {}});
      a.pos += n;
      rows.push_back(&a);
    }
    input_rows(batch_.tokens, hin_.data(), static_cast<int64_t>(batch_.tokens.size()));
    batch_.embd_in = in_.data();
    logits_.resize(rows.size() * V);
    if (!forward_batch(*head_, batch_, store_, logits_, pool_threads_, scratch_)) {  // no drafts this step
      for (Active& a : act) {
        a.s->draft.clear();
        a.s->draft_probs.clear();
        a.st->fed.clear();
        a.st->n_catchup = 0;
        kv_.cancel(a.st->kv);
      }
      return;
    }
    for (size_t r = 0; r < rows.size(); ++r) {
      Active& a = *rows[r];
      Sequence& s = *a.s;
      a.g.assign(scratch_.x_out.begin() + static_cast<std::ptrdiff_t>(r * E),
                 scratch_.x_out.begin() + static_cast<std::ptrdiff_t>((r + 1) * E));
      append_draft_token(s, a.st->sampler, std::span<float>(logits_.data() + r * V, V), hist_, probs_);
    }
  }
}

void MtpDrafter::sync(Sequence& s) {
  const auto it = states_.find(s.id);
  if (it == states_.end()) return;
  State& st = *it->second;
  if (st.kv.n_reserved == 0) return;
  // The catch-up entries are final; the chained ones go (rebuilt from the main model's hidden
  // states once their tokens are accepted).
  const auto E = static_cast<size_t>(target_.config().n_embd);
  kv_.commit(st.kv, std::span(st.fed).first(static_cast<size_t>(st.n_catchup)));
  st.h.erase(st.h.begin(), st.h.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(st.n_catchup) * E));
  st.h_pos += st.n_catchup;
  st.n_catchup = 0;
  st.fed.clear();
}

void MtpDrafter::release(RequestId id) {
  const auto it = states_.find(id);
  if (it == states_.end()) return;
  kv_.free(it->second->kv);
  states_.erase(it);
}

void MtpDrafter::check_invariants() const {
  std::vector<const kv::SeqKv*> live;
  for (const auto& entry : states_) {
    const State& st = *entry.second;
    EDGELM_CHECK(st.base + st.kv.n_tokens == st.h_pos, "MTP entries out of step with their hidden rows");
    if (!st.kv.blocks.empty()) live.push_back(&st.kv);
  }
  kv_.check_invariants(live);
}

}  // namespace edgelm::engine
