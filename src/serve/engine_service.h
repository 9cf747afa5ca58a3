// EngineService: the batching engine (engine/engine.h) made safe to use from many HTTP threads.
//
// Job: load the model, then run ONE engine thread that owns the Engine and loops: take the
// submits and cancels posted to a mutex-protected inbox, run engine.step(), and hand each
// TokenEvent to its request's RequestHandle (a small thread-safe channel). The thread sleeps on
// a condition variable while there is no work.
//
// Invariants:
//  - Only the engine thread touches the Engine; every other thread talks to it through the inbox.
//  - submit() returns only after the engine accepted or refused the request (a refusal carries
//    the engine's validation message), so HTTP can answer 400 before it sends anything.
//  - A handle receives exactly one finishing event (finish != none), then nothing more.
//  - cancel() is applied at the start of the engine thread's next loop, before its next step:
//    the request's KV blocks are free within one step.
//  - The service outlives every handle it gave out (HTTP handlers finish before shutdown()).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine/loaded_model.h"

namespace edgelm::serve {

struct EngineServiceOptions {
  std::string model_path;
  std::string tokenizer_path;  // llama2.c checkpoints only
  int threads = 0;             // 0: all hardware threads
  std::string cpu_affinity;    // e.g. "0-3"; empty: no pinning
  engine::EngineOptions engine;
  int max_queue = 64;  // waiting requests (not yet running) beyond which submit() says queue_full
};

enum class ServiceState { loading, ready, failed, stopped };

struct ServiceStats {
  ServiceState state = ServiceState::loading;
  int32_t n_running = 0;
  int32_t n_waiting = 0;  // waiting in the engine plus submits not yet handed to it
  int32_t batch_cap = 0;
  int32_t last_step_tokens = 0;
  int32_t kv_blocks = 0;
  int32_t kv_blocks_used = 0;
  double kv_usage_ratio = 0.0;    // kv_blocks_used / kv_blocks
  double prefix_hit_ratio = 0.0;  // prefix hits / prefix queries since start
};

enum class SubmitErrorKind { invalid, queue_full, unavailable };

struct SubmitError {
  SubmitErrorKind kind;
  std::string message;
};

class EngineService;

// One request's stream of events. next() is called by one consumer thread; cancel() from any.
class RequestHandle {
 public:
  RequestHandle(EngineService& service, int32_t n_prompt) : service_(service), n_prompt_(n_prompt) {}

  // The next event, or nullopt when none came within `timeout`.
  std::optional<engine::TokenEvent> next(std::chrono::milliseconds timeout);
  // Ends the request (its finishing event, Finish::cancelled, still arrives). Idempotent.
  void cancel();

  engine::RequestId id() const { return id_; }
  int32_t n_prompt() const { return n_prompt_; }
  engine::Clock::time_point submitted_at() const { return submitted_at_; }
  // Duration of the engine step that produced the first event (0 before it): TTFT minus this
  // approximates the time the request queued before its prefill completed.
  double first_step_seconds() const;

 private:
  friend class EngineService;
  void push(engine::TokenEvent ev, double step_seconds);
  void resolve(Result<engine::RequestId> accepted);  // the engine's answer to the submit

  EngineService& service_;
  const int32_t n_prompt_;
  engine::Clock::time_point submitted_at_ = engine::Clock::now();
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<engine::TokenEvent> events_;
  bool resolved_ = false;
  std::string refusal_;  // the engine's error when it refused the request
  engine::RequestId id_ = 0;
  double first_step_seconds_ = 0.0;
  bool got_first_ = false;
  std::atomic<bool> cancelled_{false};
};

class EngineService {
 public:
  // Starts the engine thread, which loads the model (state() is `loading` meanwhile).
  explicit EngineService(EngineServiceOptions opts);
  ~EngineService();  // shutdown(0) if still running
  EngineService(const EngineService&) = delete;
  EngineService& operator=(const EngineService&) = delete;

  // Blocks until the model is loaded or failed; the load error on failure.
  Status wait_ready();
  ServiceState state() const { return state_.load(std::memory_order_acquire); }

  // Errors: unavailable (loading, failed, shutting down), queue_full (max_queue requests
  // already wait), invalid (the engine's add_request validation, e.g. prompt beyond the context).
  struct Submitted {
    std::shared_ptr<RequestHandle> handle;  // set on success
    std::optional<SubmitError> error;
  };
  Submitted submit(engine::Request req);

  ServiceStats stats() const;

  // Only valid once state() is ready (or stopped after being ready).
  const engine::LoadedModel& model() const { return lm_; }
  const tokenizer::Tokenizer& tokenizer() const { return *lm_.tokenizer; }
  int32_t n_ctx() const { return n_ctx_.load(std::memory_order_acquire); }

  // Refuses new submits, lets running and waiting requests finish for up to drain_timeout,
  // cancels what is left, delivers the finishing events and joins the engine thread.
  void shutdown(std::chrono::duration<double> drain_timeout);

 private:
  friend class RequestHandle;
  struct PendingSubmit {
    engine::Request req;
    std::shared_ptr<RequestHandle> handle;
  };
  void post_cancel(engine::RequestId id);
  void thread_main();
  Status load();
  void refresh_stats_locked(const engine::EngineStats& es);

  EngineServiceOptions opts_;
  std::atomic<ServiceState> state_{ServiceState::loading};
  std::atomic<int32_t> n_ctx_{0};
  Status load_status_;

  // Owned by the engine thread once loaded; read-only for others after `ready`.
  engine::LoadedModel lm_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<engine::ModelRunner> runner_;
  std::unique_ptr<engine::Engine> engine_;
  std::unordered_map<engine::RequestId, std::shared_ptr<RequestHandle>> live_;  // engine thread only

  mutable std::mutex mutex_;          // guards everything below
  std::condition_variable wake_;      // the engine thread sleeps here
  std::condition_variable state_cv_;  // wait_ready() sleeps here
  std::vector<PendingSubmit> inbox_;
  std::vector<engine::RequestId> cancels_;
  int32_t n_in_transit_ = 0;  // submits taken from the inbox, not yet added
  bool draining_ = false;
  bool stop_ = false;
  bool cancel_all_ = false;
  ServiceStats stats_;

  std::thread thread_;
};

std::string_view service_state_name(ServiceState s);

}  // namespace edgelm::serve
