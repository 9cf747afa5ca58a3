#include "engine/speculative.h"

#include <algorithm>
#include <charconv>

#include "core/check.h"
#include "engine/draft_sampling.h"
#include "engine/scheduler.h"

namespace edgelm::engine {

Status validate(const SpecOptions& o) {
  if (o.draft_max < 1 || o.draft_max > 64) return make_error("--draft-max must be in [1, 64], got {}", o.draft_max);
  if (o.draft_min < 0 || o.draft_min > o.draft_max)
    return make_error("--draft-min must be in [0, --draft-max = {}], got {}", o.draft_max, o.draft_min);
  if (o.ngram_n < 1 || o.ngram_n > 32) return make_error("--spec ngram:N needs N in [1, 32], got {}", o.ngram_n);
  if (o.mode == SpecMode::draft && o.draft_model == nullptr)
    return make_error("draft speculation needs a draft model (--draft-model or --draft-quant)");
  if (o.mode == SpecMode::mtp && o.mtp_model != nullptr && !o.mtp_model->weights().mtp.present)
    return make_error(
        "--draft mtp: the model file has no MTP layer ({}.nextn_predict_layers is 0 or absent; a qwen35 file "
        "converted with its MTP weights has one)",
        o.mtp_model->config().arch->name);
  return ok_status();
}

Status parse_spec_mode(std::string_view text, SpecOptions& o) {
  if (text == "off" || text.empty()) {
    o.mode = SpecMode::off;
    return ok_status();
  }
  if (text == "mtp") {
    o.mode = SpecMode::mtp;
    return ok_status();
  }
  if (text.substr(0, 5) != "ngram") return make_error("--spec: '{}' is not off, ngram, ngram:N or mtp", text);
  o.mode = SpecMode::ngram;
  if (text.size() == 5) return ok_status();
  if (text[5] != ':') return make_error("--spec: '{}' is not off, ngram, ngram:N or mtp", text);
  const std::string_view num = text.substr(6);
  int32_t n = 0;
  const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), n);
  if (ec != std::errc() || end != num.data() + num.size() || n < 1 || n > 32)
    return make_error("--spec ngram:N needs N in [1, 32], got '{}'", num);
  o.ngram_n = n;
  return ok_status();
}

// ---- adaptive k ----

namespace {
constexpr double kPayThreshold = 0.25;  // below this acceptance rate speculation is turned off
constexpr double kRateWeight = 0.3;     // weight of the newest step in the moving average
constexpr int32_t kMaxBackoff = 128;
}  // namespace

SpecController::SpecController(int32_t k_min, int32_t k_max)
    : k_min_(k_min), k_max_(k_max), k_(std::clamp(4, std::max(1, k_min), std::max(1, k_max))) {}

int32_t SpecController::next_k() {
  if (k_max_ <= 0) return 0;
  if (k_ == 0) {
    if (cooldown_ > 0) {
      --cooldown_;
      return 0;
    }
    k_ = std::max(1, k_min_);  // probe again
    rate_ = 0.5;
  }
  return k_;
}

void SpecController::observe(int32_t proposed, int32_t accepted) {
  if (proposed <= 0) return;
  rate_ = (1.0 - kRateWeight) * rate_ + kRateWeight * static_cast<double>(accepted) / proposed;
  if (accepted == proposed)
    k_ = std::min(k_ + 1, k_max_);
  else
    k_ = std::clamp(accepted + 1, std::max(1, k_min_), k_max_);
  if (rate_ > 0.6) backoff_ = 8;
  if (k_min_ == 0 && rate_ < kPayThreshold) {
    k_ = 0;
    cooldown_ = backoff_;
    backoff_ = std::min(kMaxBackoff, backoff_ * 2);
  }
}

// ---- cost gate ----

namespace {
constexpr double kGateWeight = 0.25;  // weight of the newest step in the tokens-per-ms averages
constexpr double kGateMargin = 0.97;  // speculation must not be more than 3% slower to go on
}  // namespace

bool SpecGate::allow(int32_t n_decoding) const {
  const auto it = by_batch_.find(n_decoding);
  return it == by_batch_.end() || it->second.pause == 0;
}

double SpecGate::plain_rate(int32_t n_decoding) const {
  const auto it = by_batch_.find(n_decoding);
  return it == by_batch_.end() ? -1.0 : it->second.plain;
}

double SpecGate::spec_rate(int32_t n_decoding) const {
  const auto it = by_batch_.find(n_decoding);
  return it == by_batch_.end() ? -1.0 : it->second.spec;
}

void SpecGate::observe(int32_t n_decoding, bool speculative, int32_t n_emitted, double step_ms) {
  if (n_decoding <= 0 || step_ms <= 0.0) return;
  Rates& r = by_batch_[n_decoding];
  const double rate = n_emitted / step_ms;
  double& avg = speculative ? r.spec : r.plain;
  avg = avg < 0 ? rate : (1.0 - kGateWeight) * avg + kGateWeight * rate;
  if (!speculative) {
    if (r.pause > 0) --r.pause;
    return;
  }
  if (++r.n_spec < kProbeSteps) return;
  r.n_spec = 0;
  if (r.plain < 0) {
    r.pause = 2;  // no plain baseline at this batch size yet: take one
    return;
  }
  if (r.spec < kGateMargin * r.plain) {
    r.pause = r.next_pause;
    r.next_pause = std::min(kMaxPause, r.next_pause * 2);
    r.spec = -1.0;  // the next probe measures afresh
  } else {
    r.next_pause = kFirstPause;
  }
}

// ---- verification ----

Verdict verify(sample::Sampler& sampler, std::span<float> logits, std::span<const int32_t> history, int32_t n_prompt,
               std::span<const int32_t> draft, std::span<const float> draft_probs) {
  const size_t n_draft = draft.size();
  EDGELM_CHECK(!logits.empty() && logits.size() % (n_draft + 1) == 0, "verify: logits of ", logits.size(),
               " entries for ", n_draft, " drafts");
  const size_t V = logits.size() / (n_draft + 1);
  EDGELM_CHECK(draft_probs.empty() || draft_probs.size() == n_draft * V, "verify: draft_probs of wrong size");
  Verdict v;
  std::vector<int32_t> hist(history.begin(), history.end());
  const bool greedy = sampler.is_greedy(n_prompt);
  std::vector<float> p;
  for (size_t j = 0; j <= n_draft; ++j) {
    const std::span<float> row = logits.subspan(j * V, V);
    if (greedy) {  // exactly plain decoding: argmax after penalties, no random number
      const int32_t t = sampler.sample(row, hist, n_prompt);
      v.tokens.push_back(t);
      if (j == n_draft || t != draft[j]) break;
      ++v.n_accepted;
      hist.push_back(t);
      continue;
    }
    sampler.distribution(row, hist, n_prompt, p);
    if (j == n_draft) {  // every draft accepted: one more token from the target
      v.tokens.push_back(sampler.draw(p));
      break;
    }
    const auto x = static_cast<size_t>(draft[j]);
    const float qx = draft_probs.empty() ? 1.0f : draft_probs[j * V + x];
    const double r = qx > 0.0f ? static_cast<double>(p[x]) / qx : 1.0;
    const bool accept = r >= 1.0 || (r > 0.0 && sampler.uniform() < r);
    if (accept) {
      v.tokens.push_back(draft[j]);
      ++v.n_accepted;
      hist.push_back(draft[j]);
      continue;
    }
    // Rejected: draw from norm(max(0, p - q)).
    bool any = false;
    for (size_t i = 0; i < V; ++i) {
      const float q = draft_probs.empty() ? (i == x ? 1.0f : 0.0f) : draft_probs[j * V + i];
      const float d = p[i] - q;
      if (d > 0.0f) any = true;
      p[i] = d > 0.0f ? d : 0.0f;
    }
    if (!any) sampler.distribution(row, hist, n_prompt, p);  // p == q up to rounding: p itself
    v.tokens.push_back(sampler.draw(p));
    break;
  }
  return v;
}

// ---- prompt lookup ----

std::vector<int32_t> NgramDrafter::lookup(std::span<const int32_t> tokens, int32_t n, int32_t k) {
  const auto len = static_cast<int64_t>(tokens.size());
  for (int64_t m = std::min<int64_t>(n, len - 1); m >= 1; --m) {
    const auto suffix = tokens.subspan(static_cast<size_t>(len - m));
    // Latest start i < len - m with tokens[i, i + m) == suffix; the continuation starts at i + m.
    for (int64_t i = len - m - 1; i >= 0; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const int64_t from = i + m;
      const int64_t cnt = std::min<int64_t>(k, len - from);
      return {tokens.begin() + from, tokens.begin() + from + cnt};
    }
  }
  return {};
}

void NgramDrafter::propose(std::span<Sequence* const> seqs, std::span<const int32_t> k) {
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (k[i] <= 0) continue;
    seqs[i]->draft = lookup(seqs[i]->tokens, n_, k[i]);
    seqs[i]->draft_probs.clear();
  }
}

// ---- draft model ----

Result<std::unique_ptr<ModelDrafter>> ModelDrafter::create(StepModel& draft, int32_t block_size, kv::KvType kv_type,
                                                           size_t kv_memory_bytes) {
  if (draft.config().n_recurrent_layers() > 0 && draft.config().deltanet.interval > 0)
    return make_error(
        "a hybrid recurrent draft model ({}) is not supported: its drafts would need recurrent state "
        "slots of their own",
        draft.config().arch->name);
  const int32_t n_blocks = kv::KvStore::blocks_for_budget(draft.config(), block_size, kv_type, kv_memory_bytes);
  if (n_blocks < 2)
    return make_error("the draft model's KV budget of {} bytes holds fewer than 2 blocks", kv_memory_bytes);
  EDGELM_TRY(kv::KvStore store, kv::KvStore::create(draft.config(), n_blocks, block_size, kv_type));
  return std::unique_ptr<ModelDrafter>(new ModelDrafter(draft, std::move(store), block_size));
}

ModelDrafter::ModelDrafter(StepModel& draft, kv::KvStore store, int32_t block_size)
    : model_(draft), store_(std::move(store)), pool_(store_.n_blocks(), block_size), kv_(pool_, store_) {}

ModelDrafter::State& ModelDrafter::state(const Sequence& s) {
  return draft_state(states_, s, 0x9e3779b97f4a7c15ull);  // a stream of its own (draft_sampling.h)
}

void ModelDrafter::propose(std::span<Sequence* const> seqs, std::span<const int32_t> k) {
  struct Active {
    Sequence* s;
    State* st;
    int32_t k;
    int32_t pos;  // next position to feed
  };
  std::vector<Active> act;
  int32_t k_most = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    Sequence& s = *seqs[i];
    if (k[i] <= 0) continue;
    State& st = state(s);
    const auto len = static_cast<int32_t>(s.tokens.size());
    EDGELM_CHECK(st.kv.n_tokens < len && st.kv.n_reserved == 0, "draft KV out of step with its sequence");
    if (!kv_.reserve(st.kv, len - st.kv.n_tokens + k[i] - 1)) {
      // Start over from nothing, after evicting the draft KV of sequences not drafting now
      // (waiting or cooling down; they re-prefill when they draft again). If even that does not
      // fit, no draft this step.
      kv_.free(st.kv);
      if (!kv_.reserve(st.kv, len + k[i] - 1)) {
        for (auto& entry : states_) {
          const auto id = entry.first;  // not a structured binding: clang 14 cannot capture those
          const bool drafting = std::any_of(seqs.begin(), seqs.end(), [&](const Sequence* q) { return q->id == id; });
          if (!drafting) kv_.free(entry.second->kv);
        }
        if (!kv_.reserve(st.kv, len + k[i] - 1)) continue;
      }
    }
    st.fed.clear();
    act.push_back({&s, &st, k[i], st.kv.n_tokens});
    k_most = std::max(k_most, k[i]);
  }
  const auto V = static_cast<size_t>(model_.config().n_vocab);
  for (int32_t j = 0; j < k_most; ++j) {
    batch_.tokens.clear();
    batch_.seqs.clear();
    std::vector<Active*> rows;
    for (Active& a : act) {
      if (a.k <= j) continue;
      Sequence& s = *a.s;
      const size_t n0 = batch_.tokens.size();
      if (j == 0)
        batch_.tokens.insert(batch_.tokens.end(), s.tokens.begin() + a.pos, s.tokens.end());
      else
        batch_.tokens.push_back(s.draft.back());
      const auto n = static_cast<int32_t>(batch_.tokens.size() - n0);
      a.st->fed.insert(a.st->fed.end(), batch_.tokens.begin() + static_cast<std::ptrdiff_t>(n0), batch_.tokens.end());
      batch_.seqs.push_back(BatchSeq{a.pos, n, a.st->kv.blocks, 1, -1, {}, {}});
      a.pos += n;
      rows.push_back(&a);
    }
    logits_.resize(rows.size() * V);
    if (!model_.forward(batch_, store_, logits_)) {  // no drafts this step, nothing of it kept
      for (Active& a : act) {
        a.s->draft.clear();
        a.s->draft_probs.clear();
        a.st->fed.clear();
        kv_.cancel(a.st->kv);
      }
      return;
    }
    for (size_t r = 0; r < rows.size(); ++r) {
      Sequence& s = *rows[r]->s;
      append_draft_token(s, rows[r]->st->sampler, std::span<float>(logits_.data() + r * V, V), hist_, probs_);
    }
  }
}

void ModelDrafter::sync(Sequence& s) {
  const auto it = states_.find(s.id);
  if (it == states_.end()) return;
  State& st = *it->second;
  if (st.kv.n_reserved == 0) return;
  // Keep the fed tokens that are still the sequence's (never its last token: that one is fed next
  // step, so that every proposal starts from at least one pending token).
  const auto limit = static_cast<int32_t>(s.tokens.size()) - 1 - st.kv.n_tokens;
  int32_t m = 0;
  while (m < static_cast<int32_t>(st.fed.size()) && m < limit &&
         st.fed[static_cast<size_t>(m)] == s.tokens[static_cast<size_t>(st.kv.n_tokens + m)])
    ++m;
  kv_.commit(st.kv, std::span(st.fed).first(static_cast<size_t>(m)));  // also releases the rest
  st.fed.clear();
}

void ModelDrafter::release(RequestId id) {
  const auto it = states_.find(id);
  if (it == states_.end()) return;
  kv_.free(it->second->kv);
  states_.erase(it);
}

void ModelDrafter::check_invariants() const {
  std::vector<const kv::SeqKv*> live;
  for (const auto& [id, st] : states_)
    if (!st->kv.blocks.empty()) live.push_back(&st->kv);
  kv_.check_invariants(live);
}

}  // namespace edgelm::engine
