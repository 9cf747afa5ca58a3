// `edgelm serve`: the HTTP server (serve/http_server.h) on the batching engine.
//
// Startup: settings from defaults < --config YAML < EDGELM_* environment < flags (a flag counts
// only when given), printed (secrets masked) to stderr; the listener comes up at
// once (/health answers 503 while the model loads); a load error exits 1. SIGTERM or SIGINT:
// stop taking inference requests, let in-flight ones finish for up to --drain-timeout seconds,
// then exit 0. Signals are taken by one thread with sigwait, so no handler runs async code.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

#include "serve/config.h"
#include "serve/engine_service.h"
#include "serve/http_server.h"
#include "serve/routes_cache.h"
#include "serve/metrics.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

struct ServeOptions {
  serve::ServeConfig flags;  // what the flags say; applied only where a flag was given
  EngineFlags engine;
  SpecFlags spec;
  std::string config_path, api_key_file;
  std::string upload_dir;  // POST /reload uploads; empty: the model's folder
  // Each flag's option and how it sets its field.
  std::vector<std::pair<const CLI::Option*, std::function<void(serve::ServeConfig&)>>> bindings;
};

Result<serve::ServeConfig> effective_config(const ServeOptions& o) {
  serve::ServeConfig cfg;
  if (!o.config_path.empty()) {
    EDGELM_TRY(cfg, serve::load_config_file(o.config_path, cfg));
  }
  EDGELM_TRY_STATUS(serve::apply_env(cfg, [](const char* name) { return std::getenv(name); }));
  for (const auto& [opt, apply] : o.bindings)
    if (opt->count() > 0) apply(cfg);
  if (!o.api_key_file.empty()) EDGELM_TRY_STATUS(serve::load_api_key_file(cfg, o.api_key_file));
  serve::fill_derived_defaults(cfg);
  EDGELM_TRY_STATUS(serve::validate(cfg));
  return cfg;
}

// Adds a flag whose value lands in o.flags.*field and remembers how to copy it to the config.
template <typename T>
CLI::Option* bind_flag(ServeOptions& o, CLI::App* cmd, const std::string& name, T serve::ServeConfig::*field,
                       const std::string& help) {
  CLI::Option* opt = cmd->add_option(name, o.flags.*field, help);
  o.bindings.emplace_back(opt, [&o, field](serve::ServeConfig& cfg) { cfg.*field = o.flags.*field; });
  return opt;
}

int run_serve(ServeOptions& o) {
  auto cfg_or = effective_config(o);
  if (!cfg_or.ok()) return report_error(cfg_or.error());
  serve::ServeConfig& cfg = *cfg_or;
  auto eo = engine_options(
      EngineFlags{cfg.kv_type, cfg.kv_memory, cfg.max_batch_tokens, cfg.max_batch_size, cfg.target_step_ms});
  if (!eo.ok()) return report_error(eo.error());
  eo->n_ctx = cfg.n_ctx;
  std::fprintf(stderr, "edgelm serve settings:\n%s\n", serve::describe(cfg).c_str());

  // Block the signals before any thread starts, so they all inherit the mask and only the
  // waiter below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server

  serve::EngineServiceOptions so;
  so.model_path = cfg.model_path;
  so.tokenizer_path = cfg.tokenizer_path;
  so.model_name = cfg.model_name;
  so.threads = cfg.threads;
  so.cpu_affinity = cfg.cpu_affinity;
  so.engine = *eo;
  so.spec = engine::DraftSpec{cfg.spec, cfg.draft_model, cfg.draft_quant, cfg.draft_max, cfg.draft_min};
  so.max_queue = cfg.max_queue;
  serve::EngineService service(so);
  serve::ServerMetrics metrics(cfg.device_id);
  serve::HttpServer server(cfg, service, metrics);
  server.context().set_upload_dir(o.upload_dir);
  {
    std::vector<std::string> warnings;
    auto cache = serve::make_response_cache(cfg, service, warnings);
    for (const std::string& w : warnings) std::fprintf(stderr, "edgelm serve: warning: %s\n", w.c_str());
    if (!cache.ok()) return report_error(cache.error());
    server.context().set_cache(*cache);
  }
  auto port = server.bind();
  if (!port.ok()) return report_error(port.error());
  std::fprintf(stderr, "edgelm serve: listening on http://%s:%d (model loading)\n", cfg.host.c_str(), *port);

  std::thread http([&] { server.run(); });
  std::thread load_watch([&] {
    Status st = service.wait_ready();
    if (!st.ok()) {
      report_error(st.error());
      kill(getpid(), SIGTERM);  // takes the normal shutdown path, exit code below
      return;
    }
    std::fprintf(stderr, "edgelm serve: model '%s' ready (n_ctx %d)\n", cfg.model_name.c_str(), service.n_ctx());
  });

  int sig = 0;
  sigwait(&signals, &sig);
  std::fprintf(stderr, "edgelm serve: %s received, draining for up to %.0f s\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               cfg.drain_timeout_s);
  const auto t0 = std::chrono::steady_clock::now();
  server.shutdown(std::chrono::duration<double>(cfg.drain_timeout_s));
  http.join();
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  service.shutdown(std::chrono::duration<double>(std::max(0.0, cfg.drain_timeout_s - spent)));
  load_watch.join();
  const bool failed = service.state() == serve::ServiceState::failed;
  std::fprintf(stderr, "edgelm serve: stopped\n");
  return failed ? 1 : 0;
}

}  // namespace

CommandRunner add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  serve::ServeConfig& c = o->flags;
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over HTTP (OpenAI-compatible API, metrics, health)");
  cmd->add_option("--config", o->config_path, "YAML settings file (see deploy/README.md)");
  bind_flag(*o, cmd, "-m,--model", &serve::ServeConfig::model_path,
            "Model file: GGUF, or a llama2.c checkpoint (.bin)");
  bind_flag(*o, cmd, "--tokenizer", &serve::ServeConfig::tokenizer_path,
            "llama2.c tokenizer.bin (for .bin checkpoints)");
  bind_flag(*o, cmd, "--host", &serve::ServeConfig::host, "Address to listen on")->capture_default_str();
  bind_flag(*o, cmd, "--port", &serve::ServeConfig::port, "Port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  add_thread_options(cmd, c.threads, c.cpu_affinity);
  o->bindings.emplace_back(cmd->get_option("--threads"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.threads = p->flags.threads; });
  o->bindings.emplace_back(cmd->get_option("--cpu-affinity"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.cpu_affinity = p->flags.cpu_affinity; });
  add_engine_options(cmd, o->engine);
  o->bindings.emplace_back(cmd->get_option("--kv-type"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.kv_type = p->engine.kv_type; });
  o->bindings.emplace_back(cmd->get_option("--kv-memory"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.kv_memory = p->engine.kv_memory; });
  o->bindings.emplace_back(cmd->get_option("--max-batch-tokens"), [p = o.get()](serve::ServeConfig& cfg) {
    cfg.max_batch_tokens = p->engine.max_batch_tokens;
  });
  o->bindings.emplace_back(cmd->get_option("--max-batch-size"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.max_batch_size = p->engine.max_batch_size; });
  o->bindings.emplace_back(cmd->get_option("--target-step-ms"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.target_step_ms = p->engine.target_step_ms; });
  add_spec_options(cmd, o->spec);
  o->bindings.emplace_back(cmd->get_option("--spec"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.spec = p->spec.spec; });
  o->bindings.emplace_back(cmd->get_option("--draft-model"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.draft_model = p->spec.draft_model; });
  o->bindings.emplace_back(cmd->get_option("--draft-quant"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.draft_quant = p->spec.draft_quant; });
  o->bindings.emplace_back(cmd->get_option("--draft-max"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.draft_max = p->spec.draft_max; });
  o->bindings.emplace_back(cmd->get_option("--draft-min"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.draft_min = p->spec.draft_min; });
  bind_flag(*o, cmd, "-c,--ctx-size", &serve::ServeConfig::n_ctx, "Context per sequence (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  bind_flag(*o, cmd, "--max-queue", &serve::ServeConfig::max_queue, "Waiting requests beyond which new ones get 429")
      ->capture_default_str();
  bind_flag(*o, cmd, "--max-connections", &serve::ServeConfig::max_connections,
            "Concurrent HTTP connections (worker threads)")
      ->capture_default_str();
  bind_flag(*o, cmd, "--api-key", &serve::ServeConfig::api_keys, "Accepted API key (repeatable); none: no auth");
  cmd->add_option("--api-key-file", o->api_key_file, "File of accepted API keys, one per line (# comments)");
  bind_flag(*o, cmd, "--admin-token", &serve::ServeConfig::admin_token,
            "Token for admin endpoints (or EDGELM_ADMIN_TOKEN)");
  cmd->add_option("--upload-dir", o->upload_dir,
                  "Folder for models uploaded to POST /reload (default: the model's folder)");
  bind_flag(*o, cmd, "--model-name", &serve::ServeConfig::model_name,
            "Model id in the API and metrics (default: file stem)");
  bind_flag(*o, cmd, "--device-id", &serve::ServeConfig::device_id,
            "device_id label of every metric (default: host name)");
  bind_flag(*o, cmd, "--drain-timeout", &serve::ServeConfig::drain_timeout_s,
            "Seconds to let requests finish on SIGTERM")
      ->capture_default_str();
  bind_flag(*o, cmd, "--cache", &serve::ServeConfig::cache,
            "Response cache: off | exact | semantic (semantic includes exact)")
      ->capture_default_str()
      ->check(CLI::IsMember({"off", "exact", "semantic"}));
  bind_flag(*o, cmd, "--cache-threshold", &serve::ServeConfig::cache_threshold,
            "Cosine similarity of a semantic cache hit")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  bind_flag(*o, cmd, "--cache-capacity", &serve::ServeConfig::cache_capacity, "Cached answers (LRU beyond)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  bind_flag(*o, cmd, "--cache-ttl", &serve::ServeConfig::cache_ttl_s, "Seconds a cached answer lives (0: forever)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  bind_flag(*o, cmd, "--cache-db", &serve::ServeConfig::cache_db,
            "SQLite file that keeps the cache across restarts (default: memory only)");
  bind_flag(*o, cmd, "--embedding-model", &serve::ServeConfig::embedding_model,
            "Semantic cache embeddings: lexical | self | PATH of a BERT GGUF")
      ->capture_default_str();
  bind_flag(*o, cmd, "--cache-guards", &serve::ServeConfig::cache_guards,
            "on|off: negation/number/entity checks on semantic hits")
      ->capture_default_str();
  return [o] { return run_serve(*o); };
}

}  // namespace edgelm::tools
