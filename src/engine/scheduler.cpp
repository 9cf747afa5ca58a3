#include "engine/scheduler.h"

#include <algorithm>

#include "core/check.h"

namespace edgelm::engine {
namespace {

// Priority first (higher first), then arrival (earlier first).
bool runs_before(const Sequence& a, const Sequence& b) {
  if (a.req.priority != b.req.priority) return a.req.priority > b.req.priority;
  return a.arrival < b.arrival;
}

void insert_ordered(std::vector<std::unique_ptr<Sequence>>& v, std::unique_ptr<Sequence> seq) {
  auto at = std::upper_bound(v.begin(), v.end(), seq, [](const auto& a, const auto& b) { return runs_before(*a, *b); });
  v.insert(at, std::move(seq));
}

// The tokens of a slice of s from its next position, at most n, that do not cut an image
// (Request::images): an image is computed whole in one step (its tokens attend to each other),
// so a slice that would end inside one ends before it, or is empty when it starts at or in it.
int32_t fit_images(const Sequence& s, int32_t n) {
  const int32_t start = s.kv.n_tokens, end = start + n;
  for (const PromptImage& im : s.req.images) {
    if (im.pos0 >= end) break;
    if (im.pos0 + im.n_tokens > end) return std::max(0, im.pos0 - start);
  }
  return n;
}

// n pending tokens of s cut to end at a multiple of `align` when n does not finish the prompt and
// such a multiple lies after the chunk's start (else n).
int32_t align_chunk(const Sequence& s, int32_t n, int32_t align) {
  if (align <= 0 || n >= s.n_pending()) return n;
  const int32_t start = s.kv.n_tokens, end = (start + n) / align * align;
  return end > start ? end - start : n;
}

// The next slice of s within n tokens: aligned (align_chunk) and not cutting an image; when the
// alignment would leave no room for an image that starts the slice (an image across an alignment
// boundary), the slice is not aligned, so that the image is computed whole rather than never.
int32_t slice_tokens(const Sequence& s, int32_t n, int32_t align) {
  const int32_t aligned = fit_images(s, align_chunk(s, n, align));
  return aligned > 0 ? aligned : fit_images(s, n);
}

}  // namespace

Scheduler::Scheduler(kv::KvManager& kv, kv::BlockPool& pool, SchedulerOptions opts)
    : kv_(kv), pool_(pool), opts_(opts), cap_(opts.max_batch_size) {
  EDGELM_CHECK(opts_.max_batch_size >= 1 && opts_.max_batch_tokens >= opts_.max_batch_size,
               "scheduler options must be validated by the engine");
}

void Scheduler::add(std::unique_ptr<Sequence> seq) { insert_waiting(std::move(seq)); }

void Scheduler::insert_waiting(std::unique_ptr<Sequence> seq) { insert_ordered(waiting_, std::move(seq)); }

Sequence* Scheduler::find(RequestId id) {
  for (auto* list : {&running_, &waiting_})
    for (auto& s : *list)
      if (s->id == id) return s.get();
  return nullptr;
}

std::unique_ptr<Sequence> Scheduler::remove(RequestId id) {
  for (auto* list : {&running_, &waiting_}) {
    auto it = std::find_if(list->begin(), list->end(), [&](const auto& s) { return s->id == id; });
    if (it == list->end()) continue;
    std::unique_ptr<Sequence> seq = std::move(*it);
    list->erase(it);
    kv_.free(seq->kv);
    return seq;
  }
  return nullptr;
}

void Scheduler::preempt(size_t running_index) {
  std::unique_ptr<Sequence> seq = std::move(running_[running_index]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(running_index));
  kv_.free(seq->kv);  // recompute later from seq->tokens
  ++seq->n_preemptions;
  ++n_preemptions_;
  insert_waiting(std::move(seq));
}

const std::vector<ScheduledSlice>& Scheduler::schedule() {
  std::vector<ScheduledSlice>& plan = plan_;
  plan.clear();
  int32_t budget = opts_.max_batch_tokens;

  // Running sequences first: a decode token each, or the next chunk of their prompt.
  for (size_t i = 0; i < running_.size();) {
    Sequence& s = *running_[i];
    const int32_t n = slice_tokens(s, std::min(s.n_pending(), budget), opts_.prompt_align);
    if (n <= 0) {
      ++i;
      continue;
    }
    if (!s.draft.empty()) {
      const auto n_draft = static_cast<int32_t>(s.draft.size());
      const auto after = static_cast<int32_t>(running_.size() - i - 1);  // a token each, still to come
      if (s.n_pending() == 1 && budget - 1 - n_draft >= after && kv_.reserve(s.kv, 1 + n_draft)) {
        plan.push_back({&s, 1 + n_draft, true, n_draft});
        budget -= 1 + n_draft;
        ++i;
        continue;
      }
      s.draft.clear();
      s.draft_probs.clear();
    }
    bool ok = kv_.reserve(s.kv, n);
    // Out of blocks: preempt the newest sequence not yet scheduled in this step.
    while (!ok && running_.size() - 1 > i) {
      preempt(running_.size() - 1);
      ok = kv_.reserve(s.kv, n);
    }
    if (!ok) {
      preempt(i);  // the newest itself; the next sequence moves into slot i
      continue;
    }
    plan.push_back({&s, n, n == s.n_pending(), 0});
    budget -= n;
    ++i;
  }

  // Then admissions, while the cap, the budget and the watermark allow.
  bool capped = false;
  while (budget > 0) {
    size_t w = 0;  // the first waiting sequence not held by a disk read
    while (w < waiting_.size() && waiting_[w]->disk_wait) ++w;
    if (w == waiting_.size()) break;
    if (static_cast<int32_t>(running_.size()) >= cap_) {
      capped = true;
      break;
    }
    Sequence& s = *waiting_[w];
    if (s.kv.blocks.empty()) {
      s.kv.cache_prefix = s.req.cache_prefix;
      s.kv.root = kv::prefix_root(s.req.cache_salt);
      int32_t cached = kv_.match_prefix(s.kv, s.tokens);
      if (prefix_hook_ && cached > 0) cached = prefix_hook_(s, cached);
      if (!s.admitted_once) s.n_cached = cached;
    }
    const int32_t n = slice_tokens(s, std::min(s.n_pending(), budget), opts_.prompt_align);
    if (n == 0) {  // an image that needs more of this step's budget than is left: next step
      kv_.free(s.kv);
      break;
    }
    const int32_t need = kv_.blocks_needed(s.kv, n);
    const bool over_watermark =
        !running_.empty() && static_cast<double>(pool_.n_used() + need) > opts_.watermark * pool_.n_blocks();
    if (over_watermark || !kv_.reserve(s.kv, n)) {
      kv_.free(s.kv);  // its matched prefix blocks go back to the cache
      break;
    }
    s.admitted_once = true;
    std::unique_ptr<Sequence> seq = std::move(waiting_[w]);
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
    Sequence* p = seq.get();
    insert_ordered(running_, std::move(seq));
    plan.push_back({p, n, n == p->n_pending(), 0});
    budget -= n;
  }
  capped_last_step_ = capped;
  return plan;
}

void Scheduler::observe_step(double step_ms) {
  if (opts_.target_step_ms <= 0) {
    cap_ = opts_.max_batch_size;
    return;
  }
  if (step_ms > opts_.target_step_ms && cap_ > 1) {
    cap_ = std::max(1, cap_ - std::max(1, cap_ / 4));
  } else if (step_ms < opts_.target_step_ms / 2 && capped_last_step_ && cap_ < opts_.max_batch_size) {
    ++cap_;
  }
}

std::vector<const kv::SeqKv*> Scheduler::live_kv() const {
  std::vector<const kv::SeqKv*> out;
  for (const auto* list : {&running_, &waiting_})
    for (const auto& s : *list)
      if (!s->kv.blocks.empty()) out.push_back(&s->kv);
  return out;
}

}  // namespace edgelm::engine
