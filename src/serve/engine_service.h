// EngineService: the batching engine (engine/engine.h) made safe to use from many HTTP threads.
//
// Job: load the model, then run ONE engine thread that owns the Engine(s) and loops: take the
// submits, cancels and jobs posted to a mutex-protected inbox, run step() on every engine with
// work, and hand each TokenEvent to its request's RequestHandle (a small thread-safe channel).
// The thread sleeps on a condition variable while there is no work.
//
// Hot reload (reload()): the new model is loaded and self-checked on the caller's thread,
// beside the serving one; then it becomes the current ModelSlot. New submits go to the
// current slot; the previous slot keeps stepping until its in-flight requests finish, then the
// engine thread drops it (it is freed once the last pin or handle that refers to it is gone).
// While both live, the KV memory of both engines is allocated.
//
// Pinning: pin_model() makes the calling thread see one slot in model() / tokenizer() /
// n_ctx() / model_name() and submit() to it, so the tokens an HTTP handler encodes always go to
// the engine of the same model, and the references it holds stay valid. ServerContext::route
// pins for the whole handler.
//
// Embedding and reranker models (embed/text_encoder.h): a file embed::is_text_encoder_file()
// takes loads as a TextEncoder instead (ModelSlot::encoder; no Engine, no KV). The engine thread
// then only runs jobs: /v1/embeddings and /v1/rerank encode inside run_exclusive on the
// service's own ThreadPool (--threads), one batch at a time, while /health and /metrics answer
// from other threads. submit() refuses generation on such a slot (the HTTP routes answer 400
// before that: http_server.h).
//
// Invariants:
//  - Only the engine thread touches an Engine; every other thread talks to it through the inbox.
//  - submit() returns only after the engine accepted or refused the request (a refusal carries
//    the engine's validation message), so HTTP can answer 400 before it sends anything.
//  - A handle receives exactly one finishing event (finish != none), then nothing more.
//  - cancel() is applied at the start of the engine thread's next loop, before its next step:
//    the request's KV blocks are free within one step.
//  - Jobs (run_exclusive) run on the engine thread between steps, with the engine's thread pool:
//    they are serialized with the steps of every engine.
//  - Idle jobs (run_when_idle) run only when no request runs or waits in any engine and no
//    submit or job is pending, one per loop: a request that arrives meanwhile waits for at most
//    the one idle job that is running.
//  - At most one reload runs at a time (a second one is refused as busy).
//  - The service outlives every handle it gave out (HTTP handlers finish before shutdown()).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/draft_model.h"
#include "engine/engine.h"
#include "embed/text_encoder.h"
#include "engine/loaded_model.h"
#include "serve/chat_template.h"

namespace edgelm::serve {

struct EngineServiceOptions {
  std::string model_path;
  std::string model_name;        // reported name; empty: the file stem of model_path
  std::string tokenizer_path;    // llama2.c checkpoints only
  std::string chat_template;     // --chat-template: a built-in name or a Jinja file; empty: the model's
  int threads = 0;               // 0: all hardware threads
  std::string cpu_affinity;      // e.g. "0-3"; empty: no pinning
  engine::EngineOptions engine;  // engine.spec is filled per slot from `spec`
  engine::DraftSpec spec;        // speculative decoding; each slot loads its own draft model
  bool no_mmap = false;          // read model files (initial, reloaded, draft) into memory, not mmap
  // submit() says queue_full once max_batch_size (engine.scheduler) + max_queue requests are
  // running or waiting: while the adaptive batch cap runs fewer, more may wait.
  int max_queue = 64;
  // The vision encoder served beside the model (--mmproj): its content names the disk tier's
  // namespace too (engine.kv_disk), as image blocks depend on it.
  std::string mmproj_path;
  // An embedding model's pooling instead of its file's (--pooling: "mean", "cls" or "last";
  // empty: the file's). Checked at load by encoding a text with it.
  std::string pooling;
};

enum class ServiceState { loading, ready, failed, stopped };

struct ServiceStats {
  ServiceState state = ServiceState::loading;
  int32_t n_running = 0;
  int32_t n_waiting = 0;  // waiting in the engine plus submits not yet handed to it
  int32_t batch_cap = 0;
  int64_t waiting_prompt_tokens = 0;  // of the requests waiting in the engines
  int64_t running_tokens_left = 0;    // tokens the running requests may still generate
  int32_t last_step_tokens = 0;
  int32_t kv_blocks = 0;
  int32_t kv_blocks_used = 0;
  double kv_usage_ratio = 0.0;       // kv_blocks_used / kv_blocks
  int32_t state_slots_live = 0;      // hybrid models' recurrent-state slots held by sequences
  int64_t state_bytes = 0;           // and the memory of all their slots (reserved: live or kept for reuse)
  int64_t state_bytes_live = 0;      // the memory of the slots held by sequences (in use)
  int32_t state_snapshots = 0;       // hybrid models' recurrent-state snapshots (prefix reuse)
  int64_t state_snapshot_bytes = 0;  // and their memory
  double prefix_hit_ratio = 0.0;     // prefix hits / prefix queries since start
  // Speculative decoding totals of the current slot's engine (0 with speculation off).
  int64_t spec_draft_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  int64_t spec_verify_steps = 0;
  engine::MaskTimeStats mask_time;  // constrained decoding, current slot's engine
  // The KV disk tier of the current slot's engine (engine::EngineStats): on, its stats, prompt
  // blocks by tier and the prefix reads from disk.
  bool disk_on = false;
  kv::DiskTierStats disk;
  int64_t tier_ram_blocks = 0, tier_disk_blocks = 0, tier_miss_blocks = 0;
  int64_t disk_fetches = 0;
  double disk_fetch_seconds = 0.0;
};

enum class ReloadErrorKind { busy, invalid, unavailable };

struct ReloadError {
  ReloadErrorKind kind;
  std::string message;
};

struct ReloadOptions {
  std::string model_path;
  std::string tokenizer_path;  // llama2.c checkpoints; empty: none for GGUF, else the current one
  std::string model_name;      // empty: the file stem of model_path
};

struct ReloadInfo {
  std::string model_name;
  double load_ms = 0.0;  // load + self-check + engine creation
};

// The file stem of a path ("/m/stories260K.bin" -> "stories260K").
std::string model_name_from_path(const std::string& path);

// A short self-check of a freshly loaded model: tokenizes a text and runs one forward step on a
// private cache; errors unless every logit is finite.
Status self_check_model(const model::Model& m, const tokenizer::Tokenizer& tok, ThreadPool& pool);
// The same for an embedding model: encodes a text with `pooling` (rank: scores a pair); errors
// unless it gives one finite vector of n_embd (one score), so an unsupported pooling is the
// encoder's error, naming it.
Status self_check_encoder(const embed::TextEncoder& enc, embed::Pooling pooling, ThreadPool& pool);

enum class SubmitErrorKind { invalid, queue_full, unavailable };

struct SubmitError {
  SubmitErrorKind kind;
  std::string message;
};

class EngineService;
class RequestHandle;

// One loaded model with its engine. Engine, runner and `live` belong to the engine thread.
// An embedding/reranker slot has `encoder` set and lm, runner, draft, engine and chat empty.
struct ModelSlot {
  std::string name, path, tokenizer_path;
  std::shared_ptr<const embed::TextEncoder> encoder;
  // Encoder slots: the pooling /v1/embeddings uses (--pooling, else the file's; rank: a reranker
  // file, which embeds only with --pooling).
  embed::Pooling pooling = embed::Pooling::mean;
  engine::LoadedModel lm;
  std::unique_ptr<engine::ModelRunner> runner;
  engine::DraftModel draft;  // before `engine`: the engine (destroyed first) drafts with it
  std::unique_ptr<engine::Engine> engine;
  int32_t n_ctx = 0;
  std::shared_ptr<const ChatFormat> chat;                                      // chosen at load (chat_template.h)
  std::unordered_map<engine::RequestId, std::shared_ptr<RequestHandle>> live;  // engine thread only
};

// One request's stream of events. next() is called by one consumer thread; cancel() from any.
class RequestHandle {
 public:
  RequestHandle(EngineService& service, int32_t n_prompt) : service_(service), n_prompt_(n_prompt) {}

  // The next event, or nullopt when none came within `timeout`.
  std::optional<engine::TokenEvent> next(std::chrono::milliseconds timeout);
  // The next event if one is there, without waiting.
  std::optional<engine::TokenEvent> try_next();
  // From now on, `fn(*this)` runs after each event arrives (on the engine thread, no lock of
  // this handle held): a consumer that does not block in next() (an SSE stream) learns when
  // to try_next(). `fn` must not own this handle (it would never be freed).
  void set_on_event(std::function<void(RequestHandle&)> fn);
  // Ends the request (its finishing event, Finish::cancelled, still arrives). Idempotent.
  void cancel();

  engine::RequestId id() const { return id_; }
  int32_t n_prompt() const { return n_prompt_; }
  engine::Clock::time_point submitted_at() const { return submitted_at_; }
  // Duration of the engine step that produced the first event (0 before it): TTFT minus this
  // approximates the time the request queued before its prefill completed.
  double first_step_seconds() const;
  // The sequences it was expected to decode beside, itself included (running + waiting + 1 at
  // submit, at most the batch limit): the batch its latency is observed under (routing.h).
  int32_t batch_at_submit() const { return batch_at_submit_; }

 private:
  friend class EngineService;
  void push(engine::TokenEvent ev, double step_seconds);
  void resolve(Result<engine::RequestId> accepted);  // the engine's answer to the submit

  EngineService& service_;
  std::shared_ptr<ModelSlot> slot_;  // the engine it was submitted to (keeps it alive)
  const int32_t n_prompt_;
  int32_t batch_at_submit_ = 1;
  engine::Clock::time_point submitted_at_ = engine::Clock::now();
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<engine::TokenEvent> events_;
  std::function<void(RequestHandle&)> on_event_;
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

  // Only valid once state() is ready (or stopped after being ready). They answer for the slot
  // pinned on this thread, else the current one (whose references a later reload may free:
  // unpinned callers must not keep them across a reload).
  // model().model is null for an embedding/reranker model (encoder() is set instead).
  const engine::LoadedModel& model() const { return slot_for_thread()->lm; }
  const tokenizer::Tokenizer& tokenizer() const;
  // The embedding/reranker model served (ModelSlot::encoder); null for a generative model.
  std::shared_ptr<const embed::TextEncoder> encoder() const;
  // The pooling /v1/embeddings uses for encoder(): --pooling, else the file's (rank: none).
  embed::Pooling embed_pooling() const;
  int32_t n_ctx() const;
  std::string model_name() const;
  // How the current model renders chats (never null once a generative model is loaded; null
  // for an embedding model).
  std::shared_ptr<const ChatFormat> chat_format() const;
  std::string model_path() const;
  std::string tokenizer_path() const;  // the llama2.c tokenizer of model_path(); empty for a GGUF

  // Pins the current model for the calling thread until the guard is destroyed (nests).
  class Pin {
   public:
    Pin(Pin&& o) noexcept;
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin();

   private:
    friend class EngineService;
    Pin() = default;
    bool active_ = false;
    const EngineService* prev_service_ = nullptr;
    std::shared_ptr<ModelSlot> prev_slot_;
  };
  [[nodiscard]] Pin pin_model() const;

  // Loads a new model beside the current one, self-checks it, then makes it current (see the
  // top). Errors: busy (another reload runs), unavailable (not ready / shutting down), invalid
  // (the file cannot be loaded or fails the self-check; the old model keeps serving).
  struct Reloaded {
    std::optional<ReloadInfo> info;
    std::optional<ReloadError> error;
  };
  Reloaded reload(const ReloadOptions& ro);

  // Runs fn(pool) on the engine thread between steps and returns its status. Errors: the
  // service is not running.
  Status run_exclusive(std::function<Status(ThreadPool& pool)> fn);
  // The same with the current model's step model (e.g. the latency profile at startup).
  Status run_exclusive_model(std::function<Status(engine::StepModel& model, ThreadPool& pool)> fn);
  // Runs fn(pool) on the engine thread once it is idle (see the top) and returns its status:
  // background work cut into short pieces, one piece per call (the startup latency profile).
  // Errors: the service is not running, or it began draining or stopped before fn ran.
  Status run_when_idle(std::function<Status(ThreadPool& pool)> fn);
  // The current model's step model, keeping its slot alive (a reload cannot free it); null
  // unless ready. Use it only inside run_exclusive / run_when_idle jobs.
  std::shared_ptr<engine::StepModel> current_step_model() const;
  // The waiting requests beyond which submit() says queue_full.
  int max_queue() const { return opts_.max_queue; }
  // Requests it holds at most, running and waiting (submit() refuses beyond).
  int capacity() const { return std::max(1, opts_.engine.scheduler.max_batch_size) + opts_.max_queue; }

  // The KV prefix cache of the current model (engine::Engine::flush_prefix_cache), on the engine
  // thread between steps: cached RAM blocks and/or disk-tier files dropped. Errors: not running.
  Result<std::pair<int32_t, int64_t>> flush_kv(bool ram, bool disk);
  // Waits, on the caller's thread, until the current model's disk-tier writes queued so far are
  // on disk; false when it has no disk tier.
  bool drain_kv_disk();

  // Refuses new submits, lets running and waiting requests finish for up to drain_timeout,
  // cancels what is left, delivers the finishing events and joins the engine thread.
  void shutdown(std::chrono::duration<double> drain_timeout);

 private:
  friend class RequestHandle;
  struct PendingSubmit {
    engine::Request req;
    std::shared_ptr<RequestHandle> handle;
  };
  struct PendingCancel {
    ModelSlot* slot;
    engine::RequestId id;
  };
  struct Job {
    std::function<Status(ThreadPool&)> fn;
    std::shared_ptr<std::promise<Status>> result;
  };
  void post_cancel(ModelSlot* slot, engine::RequestId id);
  void thread_main();
  Status load();
  // Loads a model, its draft (opts_.spec) and its engine. `load_pool` does the loading work
  // (quantizing a --draft-quant draft); the runners step on pool_.
  Result<std::shared_ptr<ModelSlot>> make_slot(const std::string& path, const std::string& tok_path,
                                               const std::string& name, ThreadPool& load_pool);
  void refresh_stats_locked();
  std::shared_ptr<ModelSlot> slot_for_thread() const;
  bool any_work() const;  // engine thread

  EngineServiceOptions opts_;
  std::atomic<ServiceState> state_{ServiceState::loading};
  Status load_status_;

  std::unique_ptr<ThreadPool> pool_;               // engine thread (steps and jobs)
  std::vector<std::shared_ptr<ModelSlot>> slots_;  // engine thread: every slot that may have work
  std::mutex reload_mutex_;                        // held by the one reload in progress

  mutable std::mutex mutex_;            // guards everything below
  std::condition_variable wake_;        // the engine thread sleeps here
  std::condition_variable state_cv_;    // wait_ready() sleeps here
  std::shared_ptr<ModelSlot> current_;  // where unpinned submits go
  bool current_changed_ = false;        // the engine thread has not yet seen current_
  std::vector<PendingSubmit> inbox_;
  std::vector<PendingCancel> cancels_;
  std::vector<Job> jobs_;
  std::deque<Job> idle_jobs_;  // run_when_idle, oldest first
  int32_t n_in_transit_ = 0;   // submits taken from the inbox, not yet added
  bool draining_ = false;
  bool stop_ = false;
  bool cancel_all_ = false;
  ServiceStats stats_;

  std::thread thread_;
};

std::string_view service_state_name(ServiceState s);

}  // namespace edgelm::serve
