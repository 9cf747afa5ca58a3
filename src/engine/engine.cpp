#include "engine/engine.h"

#include <algorithm>

#include "core/check.h"
#include "core/log.h"
#include "core/timer.h"
#include "engine/memory_split.h"
#include "engine/assistant_drafter.h"
#include "engine/mtp_drafter.h"
#include "kv/disk_namespace.h"
#include "kv/prefix_hash.h"
#include "model/deltanet.h"

namespace edgelm::engine {

std::string_view finish_name(Finish f) {
  switch (f) {
    case Finish::none: return "none";
    case Finish::stop: return "stop";
    case Finish::length: return "length";
    case Finish::cancelled: return "cancelled";
    case Finish::deadline: return "deadline";
    case Finish::error: return "error";
  }
  return "?";
}

Status validate(const EngineOptions& o) {
  const SchedulerOptions& s = o.scheduler;
  if (o.block_size < 1 || o.block_size > 1024)
    return make_error("block size must be in [1, 1024], got {}", o.block_size);
  if (o.n_ctx < 0) return make_error("context size must be >= 0, got {}", o.n_ctx);
  if (o.state_snapshot_interval < 0 || o.state_snapshot_interval > (1 << 20))
    return make_error("--state-snapshot-interval must be in [0, {}] blocks, got {}", 1 << 20,
                      o.state_snapshot_interval);
  if (s.max_batch_size < 1) return make_error("--max-batch-size must be >= 1, got {}", s.max_batch_size);
  if (s.max_batch_tokens < s.max_batch_size)
    return make_error("--max-batch-tokens ({}) must be >= --max-batch-size ({}): every running sequence needs a token",
                      s.max_batch_tokens, s.max_batch_size);
  if (!(s.watermark > 0.0 && s.watermark <= 1.0))
    return make_error("the KV watermark must be in (0, 1], got {}", s.watermark);
  if (o.spec.mode != SpecMode::off) EDGELM_TRY_STATUS(validate(o.spec));
  return ok_status();
}

namespace {
// The disk tier's namespace: the server's content name plus everything of this engine that the
// bytes of a block depend on. Hybrid models add the recurrent state's layout (a snapshot's floats
// are only meaningful in it) and the snapshot interval: every snapshot boundary splits the delta
// rule's chunked runs (engine_states.cpp), so states and the K/V computed from them may differ in
// the last bits under another interval, and a hit must continue exactly as a cold run would.
uint64_t disk_namespace(const EngineOptions& o, const model::ModelConfig& c, const kv::KvStore& store,
                        const kv::StateStore& states) {
  kv::DiskNamespace ns;
  ns.add("content", o.kv_disk.content_namespace)
      .add("kv_type", kv::kv_type_name(o.kv_type))
      .add("block_size", static_cast<uint64_t>(o.block_size))
      .add("k_transposed", static_cast<uint64_t>(store.k_transposed()))
      .add("block_bytes", static_cast<uint64_t>(store.saved_block_bytes()))
      .add("n_ctx", static_cast<uint64_t>(o.n_ctx > 0 ? o.n_ctx : c.n_ctx_train))
      .add("arch", c.arch->name)
      .add("rope", fmt::format("{} {} {} {} {} {} {} {} {}", c.rope_base, static_cast<int>(c.rope_scaling.type),
                               c.rope_scaling.factor, c.rope_scaling.original_ctx, c.local_rope_base, c.longrope_orig_ctx,
                               c.rope_scaling.attn_factor, c.rope_scaling.beta_fast, c.rope_scaling.beta_slow));
  if (states.enabled()) {
    const model::DeltaNetConfig& d = c.deltanet;
    ns.add("state_layout", fmt::format("{} {} {} {} {} {} {} {} {} {}", c.n_recurrent_layers(), states.layer_floats(),
                                       states.conv_floats(), d.interval, d.d_conv, d.n_k_heads, d.n_v_heads,
                                       d.head_k_dim, d.head_v_dim, model::kDeltaChunk))
        .add("state_snapshot_interval", static_cast<uint64_t>(o.state_snapshot_interval));
  }
  return ns.value();
}
}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(StepModel& model, const tokenizer::Tokenizer* tok, EngineOptions opts) {
  EDGELM_TRY_STATUS(validate(opts));
  const model::ModelConfig& c = model.config();
  EDGELM_TRY(const MemorySplit split, split_memory(c, opts));
  opts.scheduler.max_batch_size = split.max_batch_size;
  const int32_t n_blocks = kv::KvStore::blocks_for_budget(c, opts.block_size, opts.kv_type, split.kv_bytes);
  if (n_blocks < 2) {
    return make_error(
        "--kv-memory of {} bytes holds {} KV blocks of {} tokens ({} bytes per token with {} KV{}); need at least 2",
        opts.kv_memory_bytes, n_blocks, opts.block_size, kv::kv_bytes_per_token(c, opts.kv_type),
        kv::kv_type_name(opts.kv_type),
        split.state_slot_bytes > 0 ? fmt::format(", after {} recurrent states and {} snapshots of {} bytes",
                                                 split.n_state_slots, split.n_snapshots, split.state_slot_bytes)
                                   : std::string());
  }
  EDGELM_TRY(kv::KvStore store, kv::KvStore::create(c, n_blocks, opts.block_size, opts.kv_type));
  if (opts.prefault_kv) store.prefault();
  std::unique_ptr<Drafter> drafter;
  if (opts.spec.mode == SpecMode::ngram) drafter = std::make_unique<NgramDrafter>(opts.spec.ngram_n);
  if (opts.spec.mode == SpecMode::draft) {
    StepModel& d = *opts.spec.draft_model;
    if (d.config().n_vocab != c.n_vocab)
      return make_error("the draft model's vocabulary has {} tokens, the target's {}: they must be the same",
                        d.config().n_vocab, c.n_vocab);
    EDGELM_TRY(drafter, ModelDrafter::create(d, opts.block_size, opts.kv_type, opts.kv_memory_bytes));
  }
  if (opts.spec.mode == SpecMode::mtp) {
    if (opts.spec.mtp_model == nullptr || opts.spec.mtp_pool == nullptr)
      return make_error("--draft mtp needs the target model and a thread pool for its MTP head");
    if (opts.spec.mtp_model->config().n_vocab != c.n_vocab)
      return make_error("--draft mtp: the MTP head's model is not the engine's (vocabulary {} vs {})",
                        opts.spec.mtp_model->config().n_vocab, c.n_vocab);
    // As many positions as the target's K/V: one layer's worth of memory.
    EDGELM_TRY(drafter, MtpDrafter::create(*opts.spec.mtp_model, *opts.spec.mtp_pool, opts.block_size, opts.kv_type,
                                           n_blocks));
  }
  if (opts.spec.mode == SpecMode::assistant) {
    if (opts.spec.assistant == nullptr || opts.spec.mtp_model == nullptr || opts.spec.mtp_pool == nullptr)
      return make_error("a Gemma 4 assistant draft needs the assistant, the target model and a thread pool");
    if (opts.spec.mtp_model->config().n_vocab != c.n_vocab)
      return make_error("the assistant's target is not the engine's model (vocabulary {} vs {})",
                        opts.spec.mtp_model->config().n_vocab, c.n_vocab);
    EDGELM_TRY(drafter, AssistantDrafter::create(*opts.spec.mtp_model, *opts.spec.assistant, *opts.spec.mtp_pool));
  }
  std::unique_ptr<kv::DiskTier> disk;
  if (!opts.kv_disk.dir.empty()) {
    // Hybrid models persist their recurrent-state snapshots beside the KV blocks (engine_disk.cpp).
    const kv::StateStore states(c);
    EDGELM_TRY(disk, kv::DiskTier::open(kv::DiskTierOptions{opts.kv_disk.dir, opts.kv_disk.max_bytes,
                                                            disk_namespace(opts, c, store, states),
                                                            opts.kv_disk.queue_bytes}));
  }
  return std::unique_ptr<Engine>(
      new Engine(model, tok, opts, std::move(store), std::move(drafter), split.n_snapshots, std::move(disk)));
}

namespace {

// The scheduler's options; hybrid models' prompt chunks end at multiples of the delta rule's chunk.
SchedulerOptions scheduler_options(SchedulerOptions o, const model::ModelConfig& c) {
  o.prompt_align = c.n_recurrent_layers() > 0 ? static_cast<int32_t>(model::kDeltaChunk) : 0;
  return o;
}

}  // namespace

Engine::Engine(StepModel& model, const tokenizer::Tokenizer* tok, EngineOptions opts, kv::KvStore store,
               std::unique_ptr<Drafter> drafter, int32_t n_snapshots, std::unique_ptr<kv::DiskTier> disk)
    : model_(model),
      tok_(tok),
      opts_(opts),
      n_ctx_(opts.n_ctx > 0 ? opts.n_ctx : model.config().n_ctx_train),
      store_(std::move(store)),
      states_(model.config()),
      rollback_(model.config()),
      snapshots_(states_.slot_floats(), states_.enabled() ? n_snapshots : 0),
      pool_(store_.n_blocks(), opts.block_size),
      kv_(pool_, store_),
      scheduler_(kv_, pool_, scheduler_options(opts.scheduler, model.config())),
      drafter_(std::move(drafter)),
      disk_(std::move(disk)) {
  if (drafter_) drafter_->attach_target_kv(store_);
  if (opts.prefault_kv) states_.reserve(opts.scheduler.max_batch_size);  // a live sequence per batch slot
  if (disk_) {
    disk_writer_.engine = this;
    pool_.set_publish_listener(&disk_writer_);
    populate_for_disk();
  }
  if (snapshots_.enabled()) {
    pool_.set_evict_listener(&snapshots_);
    scheduler_.set_prefix_hook([this](Sequence& s, int32_t matched) { return match_snapshot(s, matched); });
  }
}

Result<RequestId> Engine::add_request(Request req) {
  const int32_t n_vocab = model_.config().n_vocab;
  const auto n_prompt = static_cast<int64_t>(req.prompt.size());
  if (n_prompt == 0) return make_error("the prompt is empty");
  for (const int32_t t : req.prompt)
    if (t < 0 || t >= n_vocab) return make_error("prompt token {} is outside the vocabulary [0, {})", t, n_vocab);
  for (const int32_t t : req.stop_tokens)
    if (t < 0 || t >= n_vocab) return make_error("stop token {} is outside the vocabulary [0, {})", t, n_vocab);
  if (req.max_new_tokens < 0) return make_error("max_new_tokens must be >= 0, got {}", req.max_new_tokens);
  EDGELM_TRY_STATUS(sample::validate(req.sampling));
  if (n_prompt > n_ctx_) return make_error("the prompt has {} tokens, more than the context of {}", n_prompt, n_ctx_);
  if (!req.stop_strings.empty() && tok_ == nullptr) return make_error("stop strings need a tokenizer");
  if (req.grammar && tok_ == nullptr) return make_error("constrained decoding needs a tokenizer");
  if (req.reasoning.enabled) {
    const ReasoningOptions& r = req.reasoning;
    if (tok_ == nullptr) return make_error("a reasoning span needs a tokenizer");
    if (r.start_marker.empty() || r.end_marker.empty()) return make_error("reasoning markers must not be empty");
    if (r.budget_tokens < -1)
      return make_error("reasoning budget must be >= 0 tokens (or -1), got {}", r.budget_tokens);
    for (const int32_t t : r.close_tokens)
      if (t < 0 || t >= n_vocab)
        return make_error("reasoning close token {} is outside the vocabulary [0, {})", t, n_vocab);
  }
  EDGELM_TRY_STATUS(validate_images(req));
  // The most positions the request can hold, plus one block of copy-on-write headroom.
  const int64_t positions = std::min<int64_t>(n_ctx_, n_prompt + req.max_new_tokens);
  const int64_t blocks = (positions + opts_.block_size - 1) / opts_.block_size + 1;
  if (blocks > pool_.n_blocks()) {
    return make_error("the request needs up to {} KV blocks ({} tokens), the pool has {} (raise --kv-memory)", blocks,
                      positions, pool_.n_blocks());
  }

  const RequestId id = next_id_++;
  if (req.max_new_tokens == 0) {  // nothing to generate: finish at once, without a forward
    TokenEvent ev{id, -1, {}, Finish::length, {}};
    ev.n_prompt = static_cast<int32_t>(n_prompt);
    pending_.push_back({ev, std::move(req.on_event)});
    return id;
  }
  // A hybrid model's recurrent state exists only for the sequence's own history: without state
  // snapshots no KV prefix of another request can stand in for it.
  if (states_.enabled() && !snapshots_.enabled()) req.cache_prefix = false;
  auto seq = std::make_unique<Sequence>(id, std::move(req), next_arrival_++);
  seq->tokens = seq->req.prompt;
  // Room for everything the request can hold, so that steps do not grow these vectors.
  seq->tokens.reserve(static_cast<size_t>(positions));
  seq->kv.tokens.reserve(static_cast<size_t>(positions));
  seq->kv.blocks.reserve(static_cast<size_t>(blocks));
  seq->n_prompt = static_cast<int32_t>(n_prompt);
  for (PromptImage& im : seq->req.images) {
    if (im.hash == 0) {  // the rows' bits, as a hash chain of 32-bit words
      const auto* words = reinterpret_cast<const int32_t*>(im.embd->data());
      im.hash = kv::prefix_block_hash(kv::prefix_root("image"), std::span<const int32_t>(words, im.embd->size()));
    }
    uint64_t media_hash = im.hash;
    if (model_.config().has_mrope()) {  // the grid decides the K/V's rotation: part of the prefix key
      const int32_t grid[2] = {im.grid_w, im.grid_h};
      media_hash = kv::prefix_block_hash(media_hash, std::span<const int32_t>(grid, 2));
      seq->mrope.push_back({im.pos0, im.n_tokens, im.grid_w, im.grid_h});
    }
    seq->kv.media.push_back({im.pos0, im.n_tokens, media_hash});
  }
  if (drafter_) seq->spec = SpecController(opts_.spec.draft_min, opts_.spec.draft_max);
  if (tok_ != nullptr) seq->text.emplace(*tok_, seq->tokens, seq->req.stop_strings);
  if (seq->req.reasoning.enabled) seq->reasoning.emplace(seq->req.reasoning);
  if (seq->req.grammar) {
    // After a span the prompt opened, the grammar is for the answer that follows it.
    const bool gated = seq->req.reasoning.enabled && seq->req.reasoning.starts_open;
    seq->constraint.emplace(seq->req.grammar, grammar_vocab(), seq->req.grammar_trigger, gated);
  }
  if (disk_ && seq->req.cache_prefix) ask_disk(*seq);
  scheduler_.add(std::move(seq));
  return id;
}

Status Engine::validate_images(const Request& req) const {
  if (req.images.empty()) return ok_status();
  const model::ModelConfig& c = model_.config();
  const auto n_prompt = static_cast<int64_t>(req.prompt.size());
  int64_t prev_end = 0;
  for (size_t i = 0; i < req.images.size(); ++i) {
    const PromptImage& im = req.images[i];
    if (im.n_tokens <= 0) return make_error("image {} has {} tokens; at least 1 is needed", i, im.n_tokens);
    if (im.pos0 < prev_end || int64_t{im.pos0} + im.n_tokens > n_prompt)
      return make_error("image {} at positions [{}, {}) is out of order, overlaps another or leaves the prompt of {}",
                        i, im.pos0, int64_t{im.pos0} + im.n_tokens, n_prompt);
    if (!im.embd || static_cast<int64_t>(im.embd->size()) != int64_t{im.n_tokens} * c.n_embd)
      return make_error("image {} has {} embedding values; {} tokens x {} need {}", i, im.embd ? im.embd->size() : 0,
                        im.n_tokens, c.n_embd, int64_t{im.n_tokens} * c.n_embd);
    if (states_.enabled() && !im.causal)
      return make_error("image {} attends bidirectionally, which {}'s causal recurrent layers cannot (a causal image only)",
                        i, c.arch->name);
    if (c.has_mrope() && (im.grid_w <= 0 || im.grid_h <= 0 || int64_t{im.grid_w} * im.grid_h != im.n_tokens))
      return make_error("image {}: {} takes images with M-RoPE positions, and a {} x {} grid does not hold its {} tokens",
                        i, c.arch->name, im.grid_w, im.grid_h, im.n_tokens);
    if (im.n_tokens > opts_.scheduler.max_batch_tokens)
      return make_error(
          "image {} has {} tokens, more than --max-batch-tokens ({}): an image is computed in one step (raise "
          "--max-batch-tokens)",
          i, im.n_tokens, opts_.scheduler.max_batch_tokens);
    prev_end = int64_t{im.pos0} + im.n_tokens;
  }
  return ok_status();
}

bool Engine::cancel(RequestId id) {
  Sequence* s = scheduler_.find(id);
  if (s == nullptr) return false;
  std::vector<TokenEvent> out;
  finish(id, Finish::cancelled, {}, out);  // frees the blocks now
  return true;
}

bool Engine::has_work() const {
  return !pending_.empty() || !scheduler_.running().empty() || !scheduler_.waiting().empty();
}

void Engine::emit(Sequence& s, TokenEvent ev, std::vector<TokenEvent>& out) {
  if (s.req.on_event) s.req.on_event(ev);
  out.push_back(std::move(ev));
}

void Engine::finish(RequestId id, Finish f, std::string error, std::vector<TokenEvent>& out) {
  std::unique_ptr<Sequence> s = scheduler_.remove(id);
  EDGELM_CHECK(s != nullptr, "finish of unknown request ", id);
  if (s->state_slot >= 0) states_.release(s->state_slot);
  if (drafter_) drafter_->release(id);
  TokenEvent ev{id, -1, {}, f, std::move(error)};
  ev.n_prompt = s->n_prompt;
  ev.n_prompt_cached = s->admitted_once ? s->n_cached : 0;
  ev.n_generated = s->n_generated;
  ev.n_reasoning = s->reasoning ? s->reasoning->tokens() : 0;
  ev.reasoning_cut = s->reasoning_cut;
  if (s->text && f != Finish::cancelled) ev.text = s->text->finish();
  if (f == Finish::cancelled) {  // delivered with the next step, from the caller's thread of control
    pending_.push_back({std::move(ev), std::move(s->req.on_event)});
    return;
  }
  emit(*s, std::move(ev), out);
}

Finish Engine::accept_token(Sequence& s, int32_t token, std::vector<TokenEvent>& out) {
  const bool is_eog = tok_ != nullptr && tok_->vocab().is_eog(token);
  // Under an active grammar an end-of-generation token ends the output even with ignore_eos:
  // the grammar allowed it only because the output is complete.
  const bool grammar_end = is_eog && s.constraint && s.constraint->active() && !s.constraint->broken();
  const bool eog = (s.req.stop_at_eog || grammar_end) && is_eog;
  if (eog || std::find(s.req.stop_tokens.begin(), s.req.stop_tokens.end(), token) != s.req.stop_tokens.end())
    return Finish::stop;
  // A rejected token means the mask and the matcher disagree (an eager grammar) or the text
  // after a lazy grammar's trigger left it (then the output just stays text).
  const bool eager = s.constraint && s.req.grammar_trigger.empty();
  if (s.constraint && !s.constraint->accept(token) && eager) {
    s.error = "the output left its grammar (internal error: the mask allowed a token the grammar rejects)";
    return Finish::error;
  }
  s.tokens.push_back(token);
  ++s.n_generated;
  TokenEvent ev{s.id, token, {}, Finish::none, {}};
  bool stopped = false;
  if (s.text) {
    TextStream::Piece p = s.text->push(token);
    ev.text = std::move(p.text);
    stopped = p.stopped;
  }
  emit(s, std::move(ev), out);
  if (stopped) {
    s.text.reset();  // the stop string and anything held with it are dropped
    return Finish::stop;
  }
  if (s.reasoning)
    if (const Finish f = follow_reasoning(s, token, out); f != Finish::none) return f;
  if (s.constraint && s.constraint->must_end()) return Finish::stop;
  const bool out_of_room = s.n_generated >= s.req.max_new_tokens || static_cast<int32_t>(s.tokens.size()) >= n_ctx_;
  // A constrained output closed in time by its budget is complete: it stops, it is not cut.
  if (out_of_room) return s.constraint && s.constraint->can_end() ? Finish::stop : Finish::length;
  return Finish::none;
}

Finish Engine::follow_reasoning(Sequence& s, int32_t token, std::vector<TokenEvent>& out) {
  std::string piece = tok_->token_to_piece(token);
  if (piece.empty()) piece = tok_->vocab().text(token);  // a control token written as a marker
  if (std::optional<std::string> answer = s.reasoning->push(piece); answer && s.constraint)
    s.constraint->open(*answer);  // a rejected start leaves the answer as plain text (broken)
  if (!s.reasoning->inside()) return Finish::none;
  const ReasoningOptions& r = s.req.reasoning;
  if (r.budget_tokens >= 0 && s.reasoning->tokens() >= r.budget_tokens)
    return close_reasoning(s, ReasoningCut::tokens, out);
  if (r.deadline && Clock::now() >= *r.deadline) return close_reasoning(s, ReasoningCut::time, out);
  return Finish::none;
}

Finish Engine::close_reasoning(Sequence& s, ReasoningCut why, std::vector<TokenEvent>& out) {
  s.reasoning->close();
  s.reasoning_cut = why;
  // The closing tokens are generated tokens (they count toward max_new_tokens); their K/V is
  // computed by the next step, which samples the answer's first token after them.
  for (const int32_t t : s.req.reasoning.close_tokens) {
    if (s.n_generated >= s.req.max_new_tokens || static_cast<int32_t>(s.tokens.size()) >= n_ctx_) return Finish::length;
    s.tokens.push_back(t);
    ++s.n_generated;
    TokenEvent ev{s.id, t, {}, Finish::none, {}};
    if (s.text) ev.text = s.text->push(t).text;
    emit(s, std::move(ev), out);
  }
  if (s.constraint) s.constraint->open({});
  return Finish::none;
}

void MaskTimeStats::observe(double seconds) {
  size_t b = 0;
  while (b < kMaskTimeBounds.size() && seconds > kMaskTimeBounds[b]) ++b;
  ++buckets[b];
  sum_s += seconds;
  ++count;
}

std::shared_ptr<const GrammarVocab> Engine::grammar_vocab() {
  if (grammar_vocab_) return grammar_vocab_;
  EDGELM_CHECK(tok_ != nullptr, "grammar_vocab without a tokenizer");
  const tokenizer::Vocab& v = tok_->vocab();
  const int32_t n = model_.config().n_vocab;
  std::vector<std::string> pieces(static_cast<size_t>(n));
  auto gv = std::make_shared<GrammarVocab>();
  for (int32_t id = 0; id < n && id < v.n_tokens(); ++id) {
    if (v.is_eog(id)) {
      gv->eog.push_back(id);
      continue;  // never text: allowed only where the grammar may end
    }
    pieces[static_cast<size_t>(id)] = tok_->token_to_piece(id);
    if (pieces[static_cast<size_t>(id)].size() == 1) gv->byte_tokens.push_back(id);
  }
  gv->index = std::make_shared<const grammar::TokenIndex>(std::move(pieces));
  grammar_vocab_ = std::move(gv);
  return grammar_vocab_;
}

int64_t Engine::tokens_left_after_next(const Sequence& s) const {
  return std::min<int64_t>(s.req.max_new_tokens - s.n_generated, n_ctx_ - static_cast<int64_t>(s.tokens.size())) - 1;
}

int32_t Engine::sample_token(Sequence& s, std::span<float> logits) {
  if (!s.constraint || !s.constraint->active() || s.constraint->broken())
    return s.sampler.sample(logits, s.tokens, s.n_prompt);
  Stopwatch watch;
  const int64_t left_after = tokens_left_after_next(s);
  if (s.sampler.is_greedy(s.n_prompt)) {
    // Exact shortcut: an allowed unmasked argmax is the masked argmax (lowest id on ties in both).
    greedy_logits_.assign(logits.begin(), logits.end());
    const int32_t t = s.sampler.sample(greedy_logits_, s.tokens, s.n_prompt);
    if (s.constraint->allows(t)) {
      const int32_t closing =
          s.constraint->fits(t, left_after) ? t : s.constraint->closing_token(greedy_logits_, left_after);
      mask_time_.observe(watch.seconds());
      return closing >= 0 ? closing : t;
    }
  }
  const int32_t n_left = s.constraint->mask(logits, mask_buf_);
  mask_time_.observe(watch.seconds());
  if (n_left == 0) return -1;
  const int32_t t = s.sampler.sample(logits, s.tokens, s.n_prompt);
  // logits now hold what the sampler saw (masked, penalized): the closing token comes from them.
  const int32_t closing = s.constraint->fits(t, left_after) ? t : s.constraint->closing_token(logits, left_after);
  return closing >= 0 ? closing : t;
}

void Engine::close_in_budget(Sequence& s, std::span<float> logits, Verdict& v) {
  if (!s.constraint || !s.constraint->active() || s.constraint->broken()) return;
  const auto V = static_cast<size_t>(model_.config().n_vocab);
  Constraint c = s.constraint->fork();
  const int64_t left = tokens_left_after_next(s);
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const int32_t t = v.tokens[i];
    const int64_t left_after = left - static_cast<int64_t>(i);
    if (!c.fits(t, left_after)) {  // as plain decoding would: the closing token from row i
      const int32_t closing = c.closing_token(logits.subspan(i * V, V), left_after);
      if (closing < 0) return;  // no completion fits any more: as plain decoding, keep the token
      v.tokens.resize(i);
      v.tokens.push_back(closing);
      v.n_accepted = std::min<int32_t>(v.n_accepted, static_cast<int32_t>(i));
      return;
    }
    if (tok_ != nullptr && tok_->vocab().is_eog(t)) return;
    c.accept(t);
  }
}

void Engine::mask_draft_rows(Sequence& s, std::span<float> logits, std::span<const int32_t> draft) {
  if (!s.constraint || !s.constraint->active() || s.constraint->broken()) return;
  const size_t V = logits.size() / (draft.size() + 1);
  Constraint c = s.constraint->fork();
  for (size_t j = 0; j <= draft.size(); ++j) {
    Stopwatch watch;
    c.mask(logits.subspan(j * V, V), mask_buf_);
    mask_time_.observe(watch.seconds());
    // Rows after a draft the grammar rejects are never used: verification stops at that draft.
    if (j == draft.size() || !c.allows(draft[j]) || (tok_ != nullptr && tok_->vocab().is_eog(draft[j]))) return;
    c.accept(draft[j]);
  }
}

const std::vector<TokenEvent>& Engine::step() {
  std::vector<TokenEvent>& out = events_;
  out.clear();
  for (PendingEvent& p : pending_) {
    if (p.on_event) p.on_event(p.event);
    out.push_back(std::move(p.event));
  }
  pending_.clear();

  const Clock::time_point now = Clock::now();
  expired_.clear();
  for (const auto* list : {&scheduler_.running(), &scheduler_.waiting()})
    for (const auto& s : *list)
      if (s->req.deadline && *s->req.deadline <= now) expired_.push_back(s->id);
  for (const RequestId id : expired_) finish(id, Finish::deadline, {}, out);
  if (disk_) install_disk_reads();

  Stopwatch watch;
  int32_t n_decoding = 0;  // sequences whose next slice is one decode token
  for (const auto& p : scheduler_.running()) n_decoding += p->n_pending() == 1 ? 1 : 0;
  // draft_min > 0 asks for speculation whatever it costs; otherwise the gate decides.
  const bool may_draft = drafter_ && (!opts_.spec.cost_gate || opts_.spec.draft_min > 0 || gate_.allow(n_decoding));
  const std::vector<RequestId> drafted = may_draft ? propose_drafts() : std::vector<RequestId>{};
  const std::vector<ScheduledSlice>& plan = scheduler_.schedule();
  if (plan.empty()) return out;
  const size_t n_events_before = out.size();

  batch_.tokens.clear();
  batch_.seqs.clear();
  batch_.spans.clear();
  batch_.n_ctx = n_ctx_;
  batch_.states = states_.enabled() ? &states_ : nullptr;
  int32_t n_logits = 0;
  for (const ScheduledSlice& sl : plan) {
    Sequence& s = *sl.seq;
    const int32_t n_own = sl.n_tokens - sl.n_draft;
    const auto begin = s.tokens.begin() + s.kv.n_tokens;
    batch_.tokens.insert(batch_.tokens.end(), begin, begin + n_own);
    batch_.tokens.insert(batch_.tokens.end(), s.draft.begin(), s.draft.begin() + sl.n_draft);
    const int32_t rows = sl.logits ? 1 + sl.n_draft : 0;
    batch_.seqs.push_back(BatchSeq{s.kv.n_tokens, sl.n_tokens, s.kv.blocks, rows, s.state_slot, {}, s.mrope});
    for (const PromptImage& im : s.req.images)  // the images this slice computes (whole, by the scheduler)
      if (im.pos0 < s.kv.n_tokens + n_own && im.pos0 + im.n_tokens > s.kv.n_tokens)
        batch_.spans.push_back({static_cast<int32_t>(batch_.seqs.size() - 1),
                                model::EmbdSpan{im.pos0, im.n_tokens, im.embd->data(), im.causal}});
    n_logits += rows;
  }
  if (states_.enabled()) prepare_hybrid(plan);  // sets the slices' state slots and captures
  for (size_t i = 0; i < plan.size(); ++i) batch_.seqs[i].state_slot = plan[i].seq->state_slot;
  const auto n_vocab = static_cast<size_t>(model_.config().n_vocab);
  logits_.resize(static_cast<size_t>(n_logits) * n_vocab);
  batch_.want_hidden = drafter_ && drafter_->wants_hidden();
  const Status st = model_.forward(batch_, store_, logits_);
  const std::span<const float> hidden = st && batch_.want_hidden ? model_.hidden() : std::span<const float>();
  const auto n_embd = static_cast<size_t>(model_.config().n_embd);
  size_t tok0 = 0;  // the slice's first token in the batch

  std::vector<std::pair<RequestId, Finish>>& done = done_;
  done.clear();
  size_t row = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const ScheduledSlice& sl = plan[i];
    Sequence& s = *sl.seq;
    const int32_t pos0 = s.kv.n_tokens;
    // The hidden states of the slice's positions that the step commits, to the drafter.
    auto observe = [&, pos0, tok0]() {
      if (hidden.empty() || s.kv.n_tokens <= pos0) return;
      drafter_->observe(s, pos0, hidden.subspan(tok0 * n_embd, static_cast<size_t>(s.kv.n_tokens - pos0) * n_embd));
    };
    tok0 += static_cast<size_t>(sl.n_tokens);
    if (!st) {
      kv_.cancel(s.kv);
      if (states_.enabled()) finish_captures(i, s, false);
      continue;
    }
    if (sl.n_draft > 0) {
      const std::span<float> lg(logits_.data() + row * n_vocab, (1 + static_cast<size_t>(sl.n_draft)) * n_vocab);
      row += 1 + static_cast<size_t>(sl.n_draft);
      const Finish f = verify_slice(sl, lg, out, states_.enabled() ? slice_caps_[i].rollback : -1);
      observe();
      if (states_.enabled()) finish_captures(i, s, true);
      if (f != Finish::none) done.emplace_back(s.id, f);
      continue;
    }
    kv_.commit(s.kv, std::span(s.tokens).subspan(static_cast<size_t>(s.kv.n_tokens), static_cast<size_t>(sl.n_tokens)));
    observe();
    if (states_.enabled()) finish_captures(i, s, true);
    if (!sl.logits) continue;
    const std::span<float> lg(logits_.data() + row++ * n_vocab, n_vocab);
    const int32_t token = sample_token(s, lg);
    if (token < 0) s.error = "no token can continue the output within its grammar";
    const Finish f = token < 0 ? Finish::error : accept_token(s, token, out);
    if (f != Finish::none) done.emplace_back(s.id, f);
  }
  if (!st) {
    for (const ScheduledSlice& sl : plan) done.emplace_back(sl.seq->id, Finish::error);
  }
  for (const auto& [id, f] : done) {
    std::string error;
    if (f == Finish::error) error = !st ? st.error().message : scheduler_.find(id)->error;
    finish(id, f, std::move(error), out);
  }
  for (const RequestId id : drafted) {  // roll the draft state back to what the step kept
    Sequence* s = scheduler_.find(id);
    if (s == nullptr) continue;
    drafter_->sync(*s);
    s->draft.clear();
    s->draft_probs.clear();
  }

  last_step_tokens_ = static_cast<int32_t>(batch_.tokens.size());
  last_step_ms_ = watch.millis();
  if (drafter_ && st) {
    // Only decode-only steps of the same sequences compare (a prompt chunk changes the cost).
    bool decode_only = static_cast<int32_t>(plan.size()) == n_decoding;
    for (const ScheduledSlice& sl : plan) decode_only = decode_only && sl.n_tokens - sl.n_draft == 1;
    int32_t n_emitted = 0;
    for (size_t i = n_events_before; i < out.size(); ++i) n_emitted += out[i].token >= 0 ? 1 : 0;
    if (decode_only) gate_.observe(n_decoding, !drafted.empty(), n_emitted, last_step_ms_);
  }
  scheduler_.observe_step(last_step_ms_);
  if (opts_.check_invariants) {
    held_buf_.clear();
    for (const auto& d : disk_dest_) held_buf_.insert(held_buf_.end(), d.second.begin(), d.second.end());
    kv_.check_invariants(scheduler_.live_kv(), held_buf_);
    snapshots_.check_invariants(&pool_);
    if (drafter_) drafter_->check_invariants();
  }
  return out;
}

std::vector<RequestId> Engine::propose_drafts() {
  std::vector<Sequence*> seqs;
  std::vector<int32_t> ks;
  for (const auto& p : scheduler_.running()) {
    Sequence& s = *p;
    s.draft.clear();
    s.draft_probs.clear();
    if (s.n_pending() != 1) continue;  // prefilling: nothing to speculate on yet
    // A lazy grammar's trigger may start inside a draft, whose later rows would go unmasked; a
    // reasoning span may be closed after any token, which a verified run of drafts would pass.
    if (s.constraint && !s.constraint->active()) continue;
    if (s.reasoning && s.reasoning->phase() != ReasoningTracker::Phase::after) continue;
    // The verification emits up to k + 1 tokens: stay within max_new_tokens and the context.
    const int32_t room =
        std::min(s.req.max_new_tokens - s.n_generated, n_ctx_ - static_cast<int32_t>(s.tokens.size())) - 1;
    const int32_t k = std::min(s.spec.next_k(), room);
    if (k <= 0) continue;
    seqs.push_back(&s);
    ks.push_back(k);
  }
  std::vector<RequestId> ids;
  if (seqs.empty()) return ids;
  drafter_->propose(seqs, ks);
  for (Sequence* s : seqs) ids.push_back(s->id);
  return ids;
}

Finish Engine::verify_slice(const ScheduledSlice& sl, std::span<float> logits, std::vector<TokenEvent>& out,
                            int32_t rollback) {
  Sequence& s = *sl.seq;
  const auto draft = std::span<const int32_t>(s.draft).first(static_cast<size_t>(sl.n_draft));
  mask_draft_rows(s, logits, draft);
  Verdict v = verify(s.sampler, logits, s.tokens, s.n_prompt, draft, s.draft_probs);
  close_in_budget(s, logits, v);
  // KV: the pending token and the accepted drafts stay; the rejected drafts' positions go.
  commit_buf_.assign(s.tokens.begin() + s.kv.n_tokens, s.tokens.end());
  if (states_.enabled() && v.n_accepted < sl.n_draft) {
    // The recurrent state has absorbed every draft, rejected ones too, and cannot be rewound:
    // back to the state captured after the pending token; the accepted drafts (now tokens of
    // s) are computed again by the next step, exactly as plain decoding would have.
    states_.load(s.state_slot, rollback_.data(rollback), s.kv.n_tokens + 1);
  } else {
    commit_buf_.insert(commit_buf_.end(), draft.begin(), draft.begin() + v.n_accepted);
  }
  kv_.commit(s.kv, commit_buf_);
  spec_draft_tokens_ += sl.n_draft;
  spec_accepted_tokens_ += v.n_accepted;
  ++spec_verify_steps_;
  s.spec.observe(sl.n_draft, v.n_accepted);
  for (const int32_t t : v.tokens) {
    const Finish f = accept_token(s, t, out);
    if (f != Finish::none) return f;
  }
  return Finish::none;
}

EngineStats Engine::stats() const {
  EngineStats s;
  s.n_running = static_cast<int32_t>(scheduler_.running().size());
  s.n_waiting = static_cast<int32_t>(scheduler_.waiting().size());
  s.batch_cap = scheduler_.batch_cap();
  for (const auto& seq : scheduler_.waiting()) s.waiting_prompt_tokens += seq->n_prompt - seq->n_cached;
  for (const auto& seq : scheduler_.running())
    s.running_tokens_left += std::max(0, seq->req.max_new_tokens - seq->n_generated);
  s.kv_blocks = pool_.n_blocks();
  s.kv_blocks_used = pool_.n_used();
  s.state_slots_live = states_.n_live();
  s.state_bytes = static_cast<int64_t>(states_.n_bytes() + rollback_.n_bytes());
  s.state_bytes_live = static_cast<int64_t>(static_cast<size_t>(states_.n_live()) * states_.slot_bytes() +
                                            static_cast<size_t>(rollback_.n_live()) * rollback_.slot_bytes());
  s.state_snapshots = snapshots_.n_snapshots();
  s.state_snapshot_bytes = static_cast<int64_t>(snapshots_.n_bytes());
  s.state_snapshot_capacity = snapshots_.capacity();
  s.state_snapshot_evictions = snapshots_.n_evictions();
  s.prefix_tokens_hit = kv_.n_prompt_tokens_hit();
  s.kv_blocks_cached = pool_.n_cached();
  s.prefix_queries = pool_.prefix_queries();
  s.prefix_hits = pool_.prefix_hits();
  s.n_preemptions = scheduler_.n_preemptions();
  s.last_step_tokens = last_step_tokens_;
  s.last_step_ms = last_step_ms_;
  s.spec_draft_tokens = spec_draft_tokens_;
  s.spec_accepted_tokens = spec_accepted_tokens_;
  s.spec_verify_steps = spec_verify_steps_;
  s.spec_draft_kv_blocks_used = drafter_ ? drafter_->kv_blocks_used() : 0;
  s.mask_time = mask_time_;
  if (disk_) {
    s.disk_on = true;
    s.disk = disk_->stats();
    s.tier_ram_blocks = tier_ram_blocks_;
    s.tier_disk_blocks = tier_disk_blocks_;
    s.tier_miss_blocks = tier_miss_blocks_;
    s.disk_fetches = disk_fetches_;
    s.disk_fetch_seconds = disk_fetch_seconds_;
  }
  return s;
}

}  // namespace edgelm::engine
