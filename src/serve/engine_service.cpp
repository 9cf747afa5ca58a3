#include "serve/engine_service.h"

#include <fmt/format.h>

#include <utility>

#include "core/log.h"

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

// ---- RequestHandle ----

std::optional<engine::TokenEvent> RequestHandle::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
  engine::TokenEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

void RequestHandle::cancel() {
  if (cancelled_.exchange(true)) return;
  service_.post_cancel(id_);
}

double RequestHandle::first_step_seconds() const {
  std::lock_guard lock(mutex_);
  return first_step_seconds_;
}

void RequestHandle::push(engine::TokenEvent ev, double step_seconds) {
  {
    std::lock_guard lock(mutex_);
    if (!got_first_) {
      got_first_ = true;
      first_step_seconds_ = step_seconds;
    }
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
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

Status EngineService::load() {
  EDGELM_TRY(lm_, engine::load_model(opts_.model_path, opts_.tokenizer_path));
  std::vector<int> cpus;
  if (!opts_.cpu_affinity.empty()) {
    EDGELM_TRY(cpus, ThreadPool::parse_cpu_list(opts_.cpu_affinity));
  }
  const int n_threads = opts_.threads > 0 ? opts_.threads : ThreadPool::hardware_threads();
  pool_ = std::make_unique<ThreadPool>(n_threads, cpus);
  runner_ = std::make_unique<engine::ModelRunner>(*lm_.model, *pool_);
  EDGELM_TRY(engine_, engine::Engine::create(*runner_, lm_.tokenizer.get(), opts_.engine));
  if (opts_.max_queue < 0) return make_error("max_queue must be >= 0, got {}", opts_.max_queue);
  n_ctx_.store(engine_->n_ctx(), std::memory_order_release);
  return ok_status();
}

EngineService::Submitted EngineService::submit(engine::Request req) {
  auto handle = std::make_shared<RequestHandle>(*this, static_cast<int32_t>(req.prompt.size()));
  req.on_event = nullptr;  // events are routed from step()'s return value
  {
    std::lock_guard lock(mutex_);
    if (state() != ServiceState::ready || draining_ || stop_) {
      const char* why = state() == ServiceState::loading ? "the model is still loading" : "the server is shutting down";
      return {nullptr, SubmitError{SubmitErrorKind::unavailable, why}};
    }
    const int64_t waiting = int64_t{stats_.n_waiting} + static_cast<int64_t>(inbox_.size()) + n_in_transit_;
    if (waiting >= opts_.max_queue) {
      return {nullptr, SubmitError{SubmitErrorKind::queue_full,
                                   fmt::format("the queue is full ({} requests waiting)", waiting)}};
    }
    inbox_.push_back({std::move(req), handle});
  }
  wake_.notify_one();
  std::unique_lock lock(handle->mutex_);
  handle->cv_.wait(lock, [&] { return handle->resolved_; });
  if (!handle->refusal_.empty()) return {nullptr, SubmitError{SubmitErrorKind::invalid, handle->refusal_}};
  return {handle, std::nullopt};
}

void EngineService::post_cancel(engine::RequestId id) {
  {
    std::lock_guard lock(mutex_);
    cancels_.push_back(id);
  }
  wake_.notify_one();
}

ServiceStats EngineService::stats() const {
  std::lock_guard lock(mutex_);
  ServiceStats s = stats_;
  s.state = state();
  s.n_waiting += static_cast<int32_t>(inbox_.size()) + n_in_transit_;
  return s;
}

void EngineService::refresh_stats_locked(const engine::EngineStats& es) {
  stats_.n_running = es.n_running;
  stats_.n_waiting = es.n_waiting;
  stats_.batch_cap = es.batch_cap;
  stats_.last_step_tokens = es.last_step_tokens;
  stats_.kv_blocks = es.kv_blocks;
  stats_.kv_blocks_used = es.kv_blocks_used;
  stats_.kv_usage_ratio = es.kv_blocks > 0 ? static_cast<double>(es.kv_blocks_used) / es.kv_blocks : 0.0;
  stats_.prefix_hit_ratio =
      es.prefix_queries > 0 ? static_cast<double>(es.prefix_hits) / static_cast<double>(es.prefix_queries) : 0.0;
}

void EngineService::thread_main() {
  Status st = load();
  {
    std::lock_guard lock(mutex_);
    load_status_ = st;
    if (st.ok()) refresh_stats_locked(engine_->stats());
    state_.store(st.ok() ? ServiceState::ready : ServiceState::failed, std::memory_order_release);
  }
  state_cv_.notify_all();
  if (!st.ok()) {
    // Answer any submit that raced the failure, then wait for shutdown().
    std::unique_lock lock(mutex_);
    for (auto& p : inbox_) p.handle->resolve(make_error("the model failed to load"));
    inbox_.clear();
    wake_.wait(lock, [&] { return stop_; });
    return;
  }

  std::vector<PendingSubmit> submits;
  std::vector<engine::RequestId> cancels;
  for (;;) {
    bool cancel_all = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock,
                 [&] { return !inbox_.empty() || !cancels_.empty() || stop_ || cancel_all_ || engine_->has_work(); });
      if (stop_ && inbox_.empty() && !engine_->has_work() && live_.empty()) break;
      submits.swap(inbox_);
      cancels.swap(cancels_);
      n_in_transit_ = static_cast<int32_t>(submits.size());
      cancel_all = cancel_all_;
      cancel_all_ = false;
    }
    for (auto& p : submits) {
      std::shared_ptr<RequestHandle> h = std::move(p.handle);
      Result<engine::RequestId> id = engine_->add_request(std::move(p.req));
      if (id.ok()) live_[*id] = h;
      h->resolve(std::move(id));
    }
    submits.clear();
    for (const engine::RequestId id : cancels) engine_->cancel(id);  // false when already finished
    cancels.clear();
    if (cancel_all)
      for (auto& [id, h] : live_) engine_->cancel(id);

    if (engine_->has_work()) {
      const auto t0 = engine::Clock::now();
      std::vector<engine::TokenEvent> events = engine_->step();
      const double step_s = std::chrono::duration<double>(engine::Clock::now() - t0).count();
      for (engine::TokenEvent& ev : events) {
        auto it = live_.find(ev.id);
        if (it == live_.end()) continue;
        const bool done = ev.finish != engine::Finish::none;
        it->second->push(std::move(ev), step_s);
        if (done) live_.erase(it);
      }
    }
    {
      std::lock_guard lock(mutex_);
      n_in_transit_ = 0;
      refresh_stats_locked(engine_->stats());
    }
    state_cv_.notify_all();  // shutdown() waits for the drain here
  }
  {
    std::lock_guard lock(mutex_);
    state_.store(ServiceState::stopped, std::memory_order_release);
  }
  state_cv_.notify_all();
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
}

}  // namespace edgelm::serve
