#include "serve/engine_service.h"

#include <sys/stat.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

#include "core/heap_trim.h"
#include "core/log.h"
#include "kv/disk_namespace.h"
#include "model/kv_cache.h"

namespace edgelm::serve {

std::string_view service_state_name(ServiceState s) {
  switch (s) {
    case ServiceState::loading: return "loading";
    case ServiceState::ready: return "ready";
    case ServiceState::failed: return "failed";
    case ServiceState::stopped: return "stopped";
  }
  return "?";
}

std::string model_name_from_path(const std::string& path) { return std::filesystem::path(path).stem().string(); }

Status self_check_model(const model::Model& m, const tokenizer::Tokenizer& tok, ThreadPool& pool) {
  std::vector<int32_t> tokens = tok.encode("Once upon a time", /*add_special=*/true, /*parse_special=*/false);
  if (tokens.empty()) return make_error("self-check: the tokenizer produced no token");
  if (tokens.size() > 8) tokens.resize(8);
  const int32_t n_vocab = m.config().n_vocab;
  for (const int32_t t : tokens)
    if (t < 0 || t >= n_vocab)
      return make_error("self-check: the tokenizer gave token {} outside the model's vocabulary [0, {})", t, n_vocab);
  model::KvCache cache(m.config(), static_cast<int32_t>(tokens.size()));
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  EDGELM_TRY_STATUS(m.forward(tokens, cache, logits, pool));
  for (size_t i = 0; i < logits.size(); ++i)
    if (!std::isfinite(logits[i])) return make_error("self-check: logit {} is not finite ({})", i, logits[i]);
  return ok_status();
}

Status self_check_encoder(const embed::TextEncoder& enc, embed::Pooling pooling, ThreadPool& pool) {
  const bool rank = pooling == embed::Pooling::rank;
  auto tokens = rank ? enc.tokenize_pair("Once upon a time", "there was a cat") : enc.tokenize("Once upon a time");
  if (!tokens.ok()) return make_error("self-check: {}", tokens.error().message);
  if (tokens->empty()) return make_error("self-check: the tokenizer produced no token");
  const std::vector<std::vector<int32_t>> texts{std::move(*tokens)};
  auto out = enc.encode(texts, pooling, pool);
  if (!out.ok()) return make_error("self-check: {}", out.error().message);
  const size_t want = rank ? 1 : static_cast<size_t>(enc.info().n_embd);
  if (out->size() != 1 || (*out)[0].size() != want)
    return make_error("self-check: encoding one text did not give one {} of {}", rank ? "score" : "vector", want);
  for (const float x : (*out)[0])
    if (!std::isfinite(x)) return make_error("self-check: the {} is not finite ({})", rank ? "score" : "embedding", x);
  return ok_status();
}

namespace {
// The slot pinned on this thread (see EngineService::pin_model).
thread_local const EngineService* t_pin_service = nullptr;
thread_local std::shared_ptr<ModelSlot> t_pin_slot;
}  // namespace

// ---- RequestHandle ----

std::optional<engine::TokenEvent> RequestHandle::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  engine::TokenEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

std::optional<engine::TokenEvent> RequestHandle::try_next() {
  std::lock_guard lock(mutex_);
  if (events_.empty()) return std::nullopt;
  engine::TokenEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

void RequestHandle::set_on_event(std::function<void(RequestHandle&)> fn) {
  std::lock_guard lock(mutex_);
  on_event_ = std::move(fn);
}

void RequestHandle::cancel() {
  if (cancelled_.exchange(true)) return;
  service_.post_cancel(slot_.get(), id_);
}

double RequestHandle::first_step_seconds() const {
  std::lock_guard lock(mutex_);
  return first_step_seconds_;
}

void RequestHandle::push(engine::TokenEvent ev, double step_seconds) {
  std::function<void(RequestHandle&)> on_event;
  {
    std::lock_guard lock(mutex_);
    if (!got_first_) {
      got_first_ = true;
      first_step_seconds_ = step_seconds;
    }
    events_.push_back(std::move(ev));
    on_event = on_event_;
  }
  cv_.notify_all();
  if (on_event) on_event(*this);
}

void RequestHandle::resolve(Result<engine::RequestId> accepted) {
  {
    std::lock_guard lock(mutex_);
    resolved_ = true;
    if (accepted.ok())
      id_ = *accepted;
    else
      refusal_ = accepted.error().message;
  }
  cv_.notify_all();
}

// ---- EngineService ----

EngineService::EngineService(EngineServiceOptions opts) : opts_(std::move(opts)) {
  thread_ = std::thread([this] { thread_main(); });
}

EngineService::~EngineService() { shutdown(std::chrono::seconds(0)); }

Status EngineService::wait_ready() {
  std::unique_lock lock(mutex_);
  state_cv_.wait(lock, [&] { return state() != ServiceState::loading; });
  if (state() == ServiceState::failed) return load_status_;
  return ok_status();
}

Result<std::shared_ptr<ModelSlot>> EngineService::make_slot(const std::string& path, const std::string& tok_path,
                                                            const std::string& name, ThreadPool& load_pool) {
  auto slot = std::make_shared<ModelSlot>();
  slot->path = path;
  slot->tokenizer_path = tok_path;
  slot->name = name.empty() ? model_name_from_path(path) : name;
  // An embedding/reranker model (a GGUF the embed layer takes) has no engine: its requests are
  // jobs (see the top of the header). A file that cannot be read is left to load_model's error.
  if (auto is_encoder = embed::is_text_encoder_file(path); is_encoder.ok() && *is_encoder) {
    auto enc = embed::open_text_encoder(path);
    if (!enc.ok()) return enc.error();
    slot->encoder = std::shared_ptr<const embed::TextEncoder>(std::move(*enc));
    const embed::EncoderInfo& info = slot->encoder->info();
    slot->pooling = info.pooling;
    if (!opts_.pooling.empty()) {
      EDGELM_TRY(slot->pooling, embed::parse_pooling(opts_.pooling));
      if (slot->pooling == embed::Pooling::none || slot->pooling == embed::Pooling::rank)
        return make_error("--pooling {} is not an embedding pooling (mean, cls or last)", opts_.pooling);
    }
    slot->n_ctx = opts_.engine.n_ctx > 0 ? std::min(opts_.engine.n_ctx, info.n_ctx) : info.n_ctx;
    return slot;
  }
  // Serving never quantizes in memory: the vocabulary's metadata copies go once the tokenizer is built.
  const format::LoadOptions load{.no_mmap = opts_.no_mmap, .release_vocabulary = true};
  EDGELM_TRY(slot->lm, engine::load_model(path, tok_path, load));
  {
    Result<ChatFormat> chat = choose_chat_format(slot->lm.model->file().metadata, opts_.chat_template);
    if (!chat.ok()) return make_error("model '{}': {}", slot->name, chat.error().message);
    slot->chat = std::make_shared<const ChatFormat>(std::move(*chat));
  }
  slot->runner = std::make_unique<engine::ModelRunner>(*slot->lm.model, *pool_);
  engine::EngineOptions eo = opts_.engine;
  if (!eo.kv_disk.dir.empty()) {
    // The disk tier's namespace: the model file's content (hashed once, then remembered by the
    // file's identity: kv/disk_namespace.h), the chat template and the mmproj.
    kv::DiskNamespace ns;
    {
      std::error_code ec;  // the tier creates it too (and reports a failure); here for the notes
      if (std::filesystem::create_directories(eo.kv_disk.dir, ec)) ::chmod(eo.kv_disk.dir.c_str(), 0700);
    }
    auto model_hash = kv::file_content_hash(path, eo.kv_disk.dir);
    if (!model_hash.ok()) return make_error("--kv-disk: hashing the model: {}", model_hash.error().message);
    ns.add("model", *model_hash).add("chat_template", slot->chat->source).add("chat_origin", slot->chat->origin);
    if (!tok_path.empty()) {
      auto tok_hash = kv::file_content_hash(tok_path, eo.kv_disk.dir);
      if (!tok_hash.ok()) return make_error("--kv-disk: hashing the tokenizer: {}", tok_hash.error().message);
      ns.add("tokenizer", *tok_hash);
    }
    if (!opts_.mmproj_path.empty()) {
      auto mm_hash = kv::file_content_hash(opts_.mmproj_path, eo.kv_disk.dir);
      if (!mm_hash.ok()) return make_error("--kv-disk: hashing the mmproj: {}", mm_hash.error().message);
      ns.add("mmproj", *mm_hash);
    }
    eo.kv_disk.content_namespace = ns.value();
  }
  const Status spec =
      engine::configure_speculation(opts_.spec, *slot->lm.model, tok_path, load_pool, eo.spec, slot->draft, load);
  if (!spec.ok()) return make_error("speculative decoding for '{}': {}", slot->name, spec.error().message);
  if (slot->draft.runner && &load_pool != pool_.get()) {
    // The draft steps with the target on the engine thread's pool, not the loading one.
    slot->draft.runner = std::make_unique<engine::ModelRunner>(*slot->draft.model, *pool_);
    eo.spec.draft_model = slot->draft.runner.get();
  }
  if (eo.spec.mode == engine::SpecMode::mtp || eo.spec.mode == engine::SpecMode::assistant)
    eo.spec.mtp_pool = pool_.get();  // the head steps with the target
  EDGELM_TRY(slot->engine, engine::Engine::create(*slot->runner, slot->lm.tokenizer.get(), eo));
  slot->n_ctx = slot->engine->n_ctx();
  return slot;
}

Status EngineService::load() {
  if (opts_.max_queue < 0) return make_error("max_queue must be >= 0, got {}", opts_.max_queue);
  std::vector<int> cpus;
  if (!opts_.cpu_affinity.empty()) {
    EDGELM_TRY(cpus, ThreadPool::parse_cpu_list(opts_.cpu_affinity));
  }
  const int n_threads = opts_.threads > 0 ? opts_.threads : ThreadPool::hardware_threads();
  pool_ = std::make_unique<ThreadPool>(n_threads, cpus);
  EDGELM_TRY(auto slot, make_slot(opts_.model_path, opts_.tokenizer_path, opts_.model_name, *pool_));
  if (slot->encoder) {
    Status st = self_check_encoder(*slot->encoder, slot->pooling, *pool_);
    if (!st.ok()) return make_error("model '{}': {}", slot->name, st.error().message);
  }
  slots_.push_back(slot);
  // load_model handed back what loading freed; the set-up since (speculation, the engine's
  // buffers, the encoder's self-check) frees into malloc's arenas too.
  release_free_heap();
  std::lock_guard lock(mutex_);
  current_ = std::move(slot);
  return ok_status();
}

std::shared_ptr<ModelSlot> EngineService::slot_for_thread() const {
  if (t_pin_service == this && t_pin_slot) return t_pin_slot;
  std::lock_guard lock(mutex_);
  return current_;
}

int32_t EngineService::n_ctx() const {
  std::shared_ptr<ModelSlot> s = slot_for_thread();
  return s ? s->n_ctx : 0;
}

std::shared_ptr<const ChatFormat> EngineService::chat_format() const {
  std::shared_ptr<ModelSlot> s = slot_for_thread();
  return s ? s->chat : nullptr;
}

const tokenizer::Tokenizer& EngineService::tokenizer() const {
  std::shared_ptr<ModelSlot> s = slot_for_thread();
  return s->encoder ? s->encoder->tokenizer() : *s->lm.tokenizer;
}

std::shared_ptr<const embed::TextEncoder> EngineService::encoder() const {
  std::shared_ptr<ModelSlot> s = slot_for_thread();
  return s ? s->encoder : nullptr;
}

embed::Pooling EngineService::embed_pooling() const {
  std::shared_ptr<ModelSlot> s = slot_for_thread();
  return s ? s->pooling : embed::Pooling::mean;
}

std::string EngineService::model_name() const {
  std::shared_ptr<ModelSlot> s = slot_for_thread();
  return s ? s->name : std::string();
}

std::string EngineService::model_path() const {
  std::shared_ptr<ModelSlot> s = slot_for_thread();
  return s ? s->path : std::string();
}

std::string EngineService::tokenizer_path() const {
  std::shared_ptr<ModelSlot> s = slot_for_thread();
  return s ? s->tokenizer_path : std::string();
}

EngineService::Pin::Pin(Pin&& o) noexcept
    : active_(std::exchange(o.active_, false)), prev_service_(o.prev_service_), prev_slot_(std::move(o.prev_slot_)) {}

EngineService::Pin::~Pin() {
  if (!active_) return;
  t_pin_service = prev_service_;
  t_pin_slot = std::move(prev_slot_);
}

EngineService::Pin EngineService::pin_model() const {
  Pin p;
  std::shared_ptr<ModelSlot> cur;
  {
    std::lock_guard lock(mutex_);
    cur = current_;
  }
  p.active_ = true;
  p.prev_service_ = t_pin_service;
  p.prev_slot_ = std::move(t_pin_slot);
  t_pin_service = this;
  t_pin_slot = std::move(cur);
  return p;
}

EngineService::Reloaded EngineService::reload(const ReloadOptions& ro) {
  std::unique_lock reload_lock(reload_mutex_, std::try_to_lock);
  if (!reload_lock.owns_lock())
    return {std::nullopt, ReloadError{ReloadErrorKind::busy, "another reload is in progress"}};
  std::string tok_path = ro.tokenizer_path;
  {
    std::lock_guard lock(mutex_);
    if (state() != ServiceState::ready || draining_ || stop_ || !current_)
      return {std::nullopt, ReloadError{ReloadErrorKind::unavailable, "the server is not ready"}};
    // A llama2.c checkpoint without a tokenizer of its own keeps the current one.
    if (tok_path.empty() && std::filesystem::path(ro.model_path).extension() != ".gguf")
      tok_path = current_->tokenizer_path;
  }
  const auto t0 = engine::Clock::now();
  // The serving pool belongs to the engine thread; loading work (quantizing a --draft-quant
  // draft) gets a pool of its own, made only then.
  std::optional<ThreadPool> quant_pool;
  if (!opts_.spec.draft_quant.empty()) quant_pool.emplace(std::max(1, ThreadPool::hardware_threads() / 2));
  Result<std::shared_ptr<ModelSlot>> made =
      make_slot(ro.model_path, tok_path, ro.model_name, quant_pool ? *quant_pool : *pool_);
  if (!made.ok()) return {std::nullopt, ReloadError{ReloadErrorKind::invalid, made.error().message}};
  std::shared_ptr<ModelSlot> slot = std::move(*made);
  {
    // The serving pool belongs to the engine thread; the self-check runs on its own.
    ThreadPool check_pool(1);
    Status st = slot->encoder ? self_check_encoder(*slot->encoder, slot->pooling, check_pool)
                              : self_check_model(*slot->lm.model, *slot->lm.tokenizer, check_pool);
    if (!st.ok()) return {std::nullopt, ReloadError{ReloadErrorKind::invalid, st.error().message}};
  }
  ReloadInfo info;
  info.model_name = slot->name;
  info.load_ms = std::chrono::duration<double, std::milli>(engine::Clock::now() - t0).count();
  {
    std::lock_guard lock(mutex_);
    if (draining_ || stop_)
      return {std::nullopt, ReloadError{ReloadErrorKind::unavailable, "the server is shutting down"}};
    current_ = std::move(slot);
    current_changed_ = true;
  }
  wake_.notify_one();
  EDGELM_LOG_INFO("reloaded model '{}' from {} in {:.0f} ms", info.model_name, ro.model_path, info.load_ms);
  return {info, std::nullopt};
}

Status EngineService::run_exclusive(std::function<Status(ThreadPool& pool)> fn) {
  auto result = std::make_shared<std::promise<Status>>();
  std::future<Status> done = result->get_future();
  {
    std::lock_guard lock(mutex_);
    if (state() != ServiceState::ready || stop_) return make_error("the engine is not running");
    jobs_.push_back({std::move(fn), result});
  }
  wake_.notify_one();
  return done.get();
}

Status EngineService::run_exclusive_model(std::function<Status(engine::StepModel&, ThreadPool&)> fn) {
  return run_exclusive([this, fn = std::move(fn)](ThreadPool& pool) {
    std::shared_ptr<ModelSlot> slot;
    {
      std::lock_guard lock(mutex_);
      slot = current_;
    }
    return fn(*slot->runner, pool);
  });
}

Status EngineService::run_when_idle(std::function<Status(ThreadPool& pool)> fn) {
  auto result = std::make_shared<std::promise<Status>>();
  std::future<Status> done = result->get_future();
  {
    std::lock_guard lock(mutex_);
    if (state() != ServiceState::ready || draining_ || stop_) return make_error("the engine is not running");
    idle_jobs_.push_back({std::move(fn), result});
  }
  wake_.notify_one();
  return done.get();
}

std::shared_ptr<engine::StepModel> EngineService::current_step_model() const {
  std::lock_guard lock(mutex_);
  if (state() != ServiceState::ready || !current_ || !current_->runner) return nullptr;
  return std::shared_ptr<engine::StepModel>(current_, current_->runner.get());  // shares the slot's ownership
}

EngineService::Submitted EngineService::submit(engine::Request req) {
  auto handle = std::make_shared<RequestHandle>(*this, static_cast<int32_t>(req.prompt.size()));
  req.on_event = nullptr;  // events are routed from step()'s return value
  std::shared_ptr<ModelSlot> pinned = t_pin_service == this ? t_pin_slot : nullptr;
  {
    std::lock_guard lock(mutex_);
    if (state() != ServiceState::ready || draining_ || stop_) {
      const char* why = state() == ServiceState::loading ? "the model is still loading" : "the server is shutting down";
      return {nullptr, SubmitError{SubmitErrorKind::unavailable, why}};
    }
    const int64_t waiting = int64_t{stats_.n_waiting} + static_cast<int64_t>(inbox_.size()) + n_in_transit_;
    // The engine holds max_batch_size + max_queue requests however its adaptive batch cap splits
    // them between running and waiting: the same number the HTTP layer admits, so a request the
    // transport let in is not refused here because the cap shrank for a slow step.
    if (stats_.n_running + waiting >= capacity()) {
      return {nullptr, SubmitError{SubmitErrorKind::queue_full,
                                   fmt::format("the queue is full ({} requests running, {} waiting)", stats_.n_running,
                                               waiting)}};
    }
    handle->slot_ = pinned ? std::move(pinned) : current_;
    handle->batch_at_submit_ = static_cast<int32_t>(
        std::min<int64_t>(stats_.n_running + waiting + 1, std::max(1, opts_.engine.scheduler.max_batch_size)));
    inbox_.push_back({std::move(req), handle});
  }
  wake_.notify_one();
  std::unique_lock lock(handle->mutex_);
  handle->cv_.wait(lock, [&] { return handle->resolved_; });
  if (!handle->refusal_.empty()) return {nullptr, SubmitError{SubmitErrorKind::invalid, handle->refusal_}};
  return {handle, std::nullopt};
}

void EngineService::post_cancel(ModelSlot* slot, engine::RequestId id) {
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back({slot, id});
  }
  wake_.notify_one();
}

ServiceStats EngineService::stats() const {
  std::lock_guard lock(mutex_);
  ServiceStats s = stats_;
  s.state = state();
  s.n_waiting += static_cast<int32_t>(inbox_.size()) + n_in_transit_;
  // The disk tier's own counters move on its threads (writes land after the step that queued
  // them): read them live.
  if (current_ && state() == ServiceState::ready && current_->engine)
    if (const kv::DiskTier* disk = current_->engine->disk_tier()) s.disk = disk->stats();
  return s;
}

// Counts of every engine; sizes and ratios of the current one.
void EngineService::refresh_stats_locked() {
  stats_.n_running = 0;
  stats_.n_waiting = 0;
  stats_.waiting_prompt_tokens = 0;
  stats_.running_tokens_left = 0;
  for (const auto& slot : slots_) {
    if (!slot->engine) {  // an embedding model: no engine, no KV
      if (slot == current_) {  // the current model's sizes and ratios are all zero
        ServiceStats fresh;
        fresh.n_running = stats_.n_running;
        fresh.n_waiting = stats_.n_waiting;
        fresh.waiting_prompt_tokens = stats_.waiting_prompt_tokens;
        fresh.running_tokens_left = stats_.running_tokens_left;
        stats_ = fresh;
      }
      continue;
    }
    const engine::EngineStats es = slot->engine->stats();
    stats_.n_running += es.n_running;
    stats_.n_waiting += es.n_waiting;
    stats_.waiting_prompt_tokens += es.waiting_prompt_tokens;
    stats_.running_tokens_left += es.running_tokens_left;
    if (slot != current_) continue;
    stats_.batch_cap = es.batch_cap;
    stats_.last_step_tokens = es.last_step_tokens;
    stats_.kv_blocks = es.kv_blocks;
    stats_.kv_blocks_used = es.kv_blocks_used;
    stats_.kv_usage_ratio = es.kv_blocks > 0 ? static_cast<double>(es.kv_blocks_used) / es.kv_blocks : 0.0;
    stats_.state_slots_live = es.state_slots_live;
    stats_.state_bytes = es.state_bytes;
    stats_.state_bytes_live = es.state_bytes_live;
    stats_.state_snapshots = es.state_snapshots;
    stats_.state_snapshot_bytes = es.state_snapshot_bytes;
    stats_.prefix_hit_ratio =
        es.prefix_queries > 0 ? static_cast<double>(es.prefix_hits) / static_cast<double>(es.prefix_queries) : 0.0;
    stats_.spec_draft_tokens = es.spec_draft_tokens;
    stats_.spec_accepted_tokens = es.spec_accepted_tokens;
    stats_.spec_verify_steps = es.spec_verify_steps;
    stats_.mask_time = es.mask_time;
    stats_.disk_on = es.disk_on;
    stats_.disk = es.disk;
    stats_.tier_ram_blocks = es.tier_ram_blocks;
    stats_.tier_disk_blocks = es.tier_disk_blocks;
    stats_.tier_miss_blocks = es.tier_miss_blocks;
    stats_.disk_fetches = es.disk_fetches;
    stats_.disk_fetch_seconds = es.disk_fetch_seconds;
  }
}

bool EngineService::any_work() const {
  for (const auto& slot : slots_)
    if (slot->engine && slot->engine->has_work()) return true;
  return false;
}

void EngineService::thread_main() {
  Status st = load();
  {
    std::lock_guard lock(mutex_);
    load_status_ = st;
    if (st.ok()) refresh_stats_locked();
    state_.store(st.ok() ? ServiceState::ready : ServiceState::failed, std::memory_order_release);
  }
  state_cv_.notify_all();
  if (!st.ok()) {
    // Answer any submit that raced the failure, then wait for shutdown().
    std::unique_lock lock(mutex_);
    for (auto& p : inbox_) p.handle->resolve(make_error("the model failed to load"));
    inbox_.clear();
    for (auto& j : jobs_) j.result->set_value(make_error("the model failed to load"));
    jobs_.clear();
    for (auto& j : idle_jobs_) j.result->set_value(make_error("the model failed to load"));
    idle_jobs_.clear();
    wake_.wait(lock, [&] { return stop_; });
    return;
  }

  std::vector<PendingSubmit> submits;
  std::vector<PendingCancel> cancels;
  std::vector<Job> jobs;
  std::vector<Job> refused_idle;  // idle jobs left when draining began
  auto has_live = [&] {
    for (const auto& slot : slots_)
      if (!slot->live.empty()) return true;
    return false;
  };
  for (;;) {
    bool cancel_all = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] {
        return !inbox_.empty() || !cancels_.empty() || !jobs_.empty() || !idle_jobs_.empty() || stop_ || cancel_all_ ||
               current_changed_ || any_work();
      });
      if (draining_ || stop_) {
        for (Job& j : idle_jobs_) refused_idle.push_back(std::move(j));
        idle_jobs_.clear();
      }
      if (stop_ && inbox_.empty() && jobs_.empty() && !any_work() && !has_live()) break;
      submits.swap(inbox_);
      cancels.swap(cancels_);
      jobs.swap(jobs_);
      n_in_transit_ = static_cast<int32_t>(submits.size());
      cancel_all = cancel_all_;
      cancel_all_ = false;
      if (current_changed_) {
        current_changed_ = false;
        if (std::find(slots_.begin(), slots_.end(), current_) == slots_.end()) slots_.push_back(current_);
      }
    }
    for (auto& p : submits) {
      std::shared_ptr<RequestHandle> h = std::move(p.handle);
      ModelSlot& slot = *h->slot_;
      // A pinned submit may target a slot that already drained and was dropped: take it back.
      if (std::find(slots_.begin(), slots_.end(), h->slot_) == slots_.end()) slots_.push_back(h->slot_);
      Result<engine::RequestId> id =
          slot.engine ? slot.engine->add_request(std::move(p.req))
                      : Result<engine::RequestId>(
                            make_error("model '{}' is an embedding model: it does not generate text", slot.name));
      if (id.ok()) slot.live[*id] = h;
      h->resolve(std::move(id));
    }
    submits.clear();
    for (const PendingCancel& c : cancels)
      for (const auto& slot : slots_)
        if (slot.get() == c.slot && slot->engine) slot->engine->cancel(c.id);  // false when already finished
    cancels.clear();
    if (cancel_all)
      for (const auto& slot : slots_)
        for (auto& [id, h] : slot->live) slot->engine->cancel(id);  // `live` is empty without an engine
    for (Job& j : jobs) j.result->set_value(j.fn(*pool_));
    jobs.clear();
    for (Job& j : refused_idle) j.result->set_value(make_error("the server is shutting down"));
    refused_idle.clear();
    // One idle job, only when nothing runs or waits: a submit that comes meanwhile waits for it
    // alone, and the next loop takes the submit before any further idle job.
    if (!any_work() && !has_live()) {
      std::optional<Job> idle;
      {
        std::lock_guard lock(mutex_);
        if (!idle_jobs_.empty() && inbox_.empty() && cancels_.empty() && jobs_.empty() && !current_changed_) {
          idle = std::move(idle_jobs_.front());
          idle_jobs_.pop_front();
        }
      }
      if (idle) idle->result->set_value(idle->fn(*pool_));
    }

    for (const auto& slot : slots_) {
      if (!slot->engine || !slot->engine->has_work()) continue;
      const auto t0 = engine::Clock::now();
      std::vector<engine::TokenEvent> events = slot->engine->step();
      const double step_s = std::chrono::duration<double>(engine::Clock::now() - t0).count();
      for (engine::TokenEvent& ev : events) {
        auto it = slot->live.find(ev.id);
        if (it == slot->live.end()) continue;
        const bool done = ev.finish != engine::Finish::none;
        it->second->push(std::move(ev), step_s);
        if (done) slot->live.erase(it);
      }
    }
    std::vector<std::shared_ptr<ModelSlot>> drained;  // freed outside the lock
    {
      std::lock_guard lock(mutex_);
      // A replaced slot leaves once its requests are done; pins and handles may keep it alive.
      for (auto it = slots_.begin(); it != slots_.end();) {
        if (*it != current_ && !((*it)->engine && (*it)->engine->has_work()) && (*it)->live.empty()) {
          drained.push_back(std::move(*it));
          it = slots_.erase(it);
        } else {
          ++it;
        }
      }
      n_in_transit_ = 0;
      refresh_stats_locked();
    }
    if (!drained.empty()) {
      drained.clear();
      // A replaced model's buffers were freed into malloc's arenas; hand them back to the
      // system so that RSS stays flat across reloads rather than keeping the high-water mark.
      release_free_heap();
    }
    state_cv_.notify_all();  // shutdown() waits for the drain here
  }
  {
    std::lock_guard lock(mutex_);
    for (Job& j : idle_jobs_) j.result->set_value(make_error("the server is shutting down"));
    idle_jobs_.clear();
    state_.store(ServiceState::stopped, std::memory_order_release);
  }
  state_cv_.notify_all();
}

Result<std::pair<int32_t, int64_t>> EngineService::flush_kv(bool ram, bool disk) {
  std::pair<int32_t, int64_t> dropped{0, 0};
  EDGELM_TRY_STATUS(run_exclusive([&](ThreadPool&) {
    std::shared_ptr<ModelSlot> slot;
    {
      std::lock_guard lock(mutex_);
      slot = current_;
    }
    if (slot->engine) dropped = slot->engine->flush_prefix_cache(ram, disk);
    return ok_status();
  }));
  return dropped;
}

bool EngineService::drain_kv_disk() {
  std::shared_ptr<ModelSlot> slot;
  {
    std::lock_guard lock(mutex_);
    if (state() != ServiceState::ready || !current_) return false;
    slot = current_;  // kept alive while the writes drain
  }
  kv::DiskTier* disk = slot->engine ? slot->engine->disk_tier() : nullptr;
  if (disk == nullptr) return false;
  disk->drain_writes();
  return true;
}

void EngineService::shutdown(std::chrono::duration<double> drain_timeout) {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    draining_ = true;
  }
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::nanoseconds>(drain_timeout);
  {
    std::unique_lock lock(mutex_);
    // Drained: nothing waits or runs. Stats are refreshed after every loop of the engine thread.
    state_cv_.wait_until(lock, until, [&] {
      return state() != ServiceState::ready ||
             (inbox_.empty() && n_in_transit_ == 0 && stats_.n_running == 0 && stats_.n_waiting == 0);
    });
    cancel_all_ = true;
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // Jobs posted after the thread left (none can be: run_exclusive checks stop_ under the lock).
}

}  // namespace edgelm::serve
