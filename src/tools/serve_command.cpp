// `edgelm serve`: the HTTP server (serve/http_server.h) on the batching engine.
//
// Startup: settings from defaults < --config YAML < EDGELM_* environment < flags (a flag counts
// only when given), printed (secrets masked) to stderr; the listener comes up at
// once (/health answers 503 while the model loads); a load error exits 1. SIGTERM or SIGINT:
// stop taking inference requests, let in-flight ones finish for up to --drain-timeout seconds,
// then exit 0. SIGHUP: read the settings again (config file, environment, flags) and hot-reload
// each configured model from its path (as POST /reload does; systemd's ExecReload); a bad
// file or config is logged and the current model keeps serving. Signals are taken by one
// thread with sigwait, so no handler runs async code. An embedding/reranker file as -m
// (embed::is_text_encoder_file) is served alone, without --mmproj: /v1/embeddings and
// /v1/rerank (serve/engine_service.h, serve/http_server.h); --pooling overrides its pooling.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <thread>

#include "core/byte_size.h"
#include "embed/text_encoder.h"
#include "serve/config.h"
#include "serve/engine_service.h"
#include "serve/http_server.h"
#include "serve/image_input.h"
#include "serve/routes_cache.h"
#include "serve/metrics.h"
#include "serve/model_profiles.h"
#include "serve/model_spec.h"
#include "serve/upload_dir.h"
#include "serve/router_api.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

struct ServeOptions {
  serve::ServeConfig flags;  // what the flags say; applied only where a flag was given
  EngineFlags engine;
  SpecFlags spec;
  format::LoadOptions load;  // --no-mmap, copied to the config's no_mmap when given
  std::string config_path, api_key_file;
  std::string upload_dir;  // POST /reload uploads; empty: the model's folder
  std::vector<std::string> model_args;  // -m: one path, or NAME=PATH,tier=... specs
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

// The KV budget of each model: kv_memory, shrunk so that every model's weights (file size)
// and KV fit memory_budget when one is set. Errors: the weights alone (with 16 MiB of KV per
// model) do not fit.
Result<size_t> kv_bytes_within_budget(const serve::ServeConfig& cfg, const std::vector<serve::ModelSpec>& specs,
                                      size_t kv_per_model) {
  EDGELM_TRY(const size_t budget, serve::memory_budget_bytes(cfg));
  if (budget == 0) return kv_per_model;
  size_t weights = 0;
  for (const serve::ModelSpec& m : specs) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(m.path, ec);
    if (!ec) weights += static_cast<size_t>(size);
  }
  const size_t n = specs.size();
  const size_t min_kv = size_t{16} << 20;
  if (weights + n * min_kv > budget)
    return make_error("memory_budget {} MiB cannot hold the models' weights ({} MiB) and 16 MiB of KV each",
                      budget >> 20, weights >> 20);
  const size_t kv = std::min(kv_per_model, (budget - weights) / n);
  if (kv < kv_per_model)
    std::fprintf(stderr, "edgelm serve: memory_budget: KV per model %zu MiB (weights %zu MiB, %zu models)\n", kv >> 20,
                 weights >> 20, n);
  return kv;
}

// SIGHUP: every model reloaded from the path the settings name now (serve/engine_service.h
// reload(): the old model serves until the new one is ready; a failure keeps it).
void reload_configured_models(const ServeOptions& o, serve::HttpServer& server) {
  auto cfg = effective_config(o);
  if (!cfg.ok()) {
    std::fprintf(stderr, "edgelm serve: SIGHUP: the settings do not load (the current model keeps serving): %s\n",
                 cfg.error().message.c_str());
    return;
  }
  auto specs = serve::model_specs(*cfg);
  const auto& models = server.context().models();
  if (!specs.ok() || specs->size() != models.size()) {
    std::fprintf(stderr, "edgelm serve: SIGHUP: %s; nothing reloaded\n",
                 specs.ok() ? "the number of models changed (that needs a restart)" : specs.error().message.c_str());
    return;
  }
  for (size_t i = 0; i < models.size(); ++i) {
    const serve::ModelSpec& spec = (*specs)[i];
    std::fprintf(stderr, "edgelm serve: SIGHUP: reloading '%s' from %s\n", spec.name.c_str(), spec.path.c_str());
    const auto r = models[i]->service->reload(serve::ReloadOptions{spec.path, spec.tokenizer_path, spec.name});
    if (r.error)
      std::fprintf(stderr, "edgelm serve: SIGHUP: reload failed (the current model keeps serving): %s\n",
                   r.error->message.c_str());
    else
      std::fprintf(stderr, "edgelm serve: SIGHUP: model '%s' reloaded in %.0f ms\n", r.info->model_name.c_str(),
                   r.info->load_ms);
  }
}

int run_serve(ServeOptions& o) {
  auto cfg_or = effective_config(o);
  if (!cfg_or.ok()) return report_error(cfg_or.error());
  serve::ServeConfig& cfg = *cfg_or;
  auto eo = engine_options(EngineFlags{cfg.kv_type, cfg.kv_memory, cfg.max_batch_tokens, cfg.max_batch_size,
                                       cfg.target_step_ms, cfg.state_snapshot_interval});
  if (!eo.ok()) return report_error(eo.error());
  eo->n_ctx = cfg.n_ctx;
  if (!cfg.kv_disk.empty()) {
    auto disk_size = parse_byte_size(cfg.kv_disk_size);
    if (!disk_size.ok()) return report_error(disk_size.error());
    eo->kv_disk.dir = cfg.kv_disk;
    eo->kv_disk.max_bytes = *disk_size;
  }
  std::fprintf(stderr, "edgelm serve settings:\n%s\n", serve::describe(cfg).c_str());

  // Block the signals before any thread starts, so they all inherit the mask and only the
  // waiter below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that hangs up must not kill the server

  auto specs = serve::model_specs(cfg);
  if (!specs.ok()) return report_error(specs.error());
  // An embedding/reranker model (embed/text_encoder.h) is served alone: it has no generation
  // for the router to route, and --mmproj feeds a generative model.
  for (const serve::ModelSpec& spec : *specs) {
    auto is_encoder = embed::is_text_encoder_file(spec.path);
    if (!is_encoder.ok() || !*is_encoder) continue;  // a generative model (or a load error, reported at load)
    if (specs->size() > 1)
      return report_error(make_error("'{}' ({}) is an embedding/reranker model: serve it alone (one -m), not "
                                     "beside other models",
                                     spec.name, spec.path));
    if (!cfg.mmproj.empty())
      return report_error(
          make_error("--mmproj needs a generative model; {} is an embedding/reranker model", spec.path));
    std::fprintf(stderr,
                 "edgelm serve: %s is an embedding/reranker model: it serves /v1/embeddings and, when it can rank, "
                 "/v1/rerank; the generation routes answer 400\n",
                 spec.path.c_str());
  }
  auto kv_bytes = kv_bytes_within_budget(cfg, *specs, eo->kv_memory_bytes);
  if (!kv_bytes.ok()) return report_error(kv_bytes.error());
  eo->kv_memory_bytes = *kv_bytes;
  {
    // A server killed mid-upload left its temporary upload behind (serve/upload_dir.h).
    std::vector<std::string> model_paths;
    for (const serve::ModelSpec& spec : *specs) model_paths.push_back(spec.path);
    for (const std::string& dir : serve::upload_dirs(o.upload_dir, model_paths)) {
      auto removed = serve::remove_stale_uploads(dir);
      if (!removed.ok()) std::fprintf(stderr, "edgelm serve: warning: %s\n", removed.error().message.c_str());
    }
  }
  std::unique_ptr<serve::UpstreamClient> upstream;
  if (!cfg.upstream.empty()) {
    auto up_cfg = serve::parse_upstream_flag(cfg.upstream);
    if (!up_cfg.ok()) return report_error(up_cfg.error());
    auto client = serve::UpstreamClient::create(*up_cfg);
    if (!client.ok()) return report_error(client.error());
    std::fprintf(stderr, "edgelm serve: upstream %s\n", router::describe(*up_cfg).c_str());
    upstream = std::move(client).value();
  }

  std::vector<std::unique_ptr<serve::EngineService>> services;
  std::vector<std::unique_ptr<serve::ServedModel>> models;
  for (const serve::ModelSpec& spec : *specs) {
    serve::EngineServiceOptions so;
    so.model_path = spec.path;
    so.tokenizer_path = spec.tokenizer_path;
    so.model_name = spec.name;
    so.chat_template = cfg.chat_template;
    so.threads = cfg.threads;
    so.cpu_affinity = cfg.cpu_affinity;
    so.engine = *eo;
    so.spec = engine::DraftSpec{cfg.spec, cfg.draft_model, cfg.draft_quant, cfg.draft_max, cfg.draft_min, cfg.draft};
    so.max_queue = cfg.max_queue;
    so.no_mmap = cfg.no_mmap;
    so.mmproj_path = cfg.mmproj;
    so.pooling = cfg.pooling;
    services.push_back(std::make_unique<serve::EngineService>(so));
    models.push_back(std::make_unique<serve::ServedModel>());
    models.back()->spec = spec;
    models.back()->service = services.back().get();
  }
  serve::EngineService& service = *services.front();
  serve::ServerMetrics metrics(cfg.device_id);
  serve::HttpServer server(cfg, std::move(models), metrics);
  server.context().set_upload_dir(o.upload_dir);
  server.context().set_upstream(std::move(upstream));
  {
    std::vector<std::string> warnings;
    auto cache = serve::make_response_cache(cfg, service, warnings);
    for (const std::string& w : warnings) std::fprintf(stderr, "edgelm serve: warning: %s\n", w.c_str());
    if (!cache.ok()) return report_error(cache.error());
    server.context().set_cache(*cache);
    if (*cache) metrics.set_cache_store_errors_source([c = *cache] { return c->stats().store_errors; });
  }
  std::shared_ptr<serve::ImageInput> images;
  if (!cfg.mmproj.empty()) {
    serve::ImageInputOptions io;
    io.mmproj_path = cfg.mmproj;
    io.max_pixels = cfg.image_max_pixels;
    io.max_images = cfg.max_images_per_request;
    io.cache_entries = cfg.image_cache;
    io.max_image_tokens = cfg.max_batch_tokens;  // an image is computed in one step
    io.source.media_path = cfg.media_path;
    io.source.allow_urls = cfg.allow_image_urls;
    io.source.url_timeout_s = cfg.image_url_timeout_s;
    io.source.allow_cidrs = cfg.image_url_allow_cidr;
    io.source.max_bytes = cfg.image_max_bytes;
    io.threads = cfg.threads > 0 ? cfg.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    auto in = serve::ImageInput::open(io);
    if (!in.ok()) return report_error(in.error());
    images = std::move(in).value();
    server.context().set_images(images);
  }
  auto port = server.bind();
  if (!port.ok()) return report_error(port.error());
  std::fprintf(stderr, "edgelm serve: listening on http://%s:%d (model loading)\n", cfg.host.c_str(), *port);

  std::thread http([&] { server.run(); });
  std::atomic<bool> startup_failed{false};  // a check after loading (the --mmproj fit) failed
  std::thread load_watch([&] {
    for (const auto& m : server.context().models()) {
      Status st = m->service->wait_ready();
      // The vision encoder must fit the (first) model: its architecture and width.
      if (st.ok() && images && m.get() == server.context().models().front().get()) {
        st = images->check_model(m->service->model().model->config());
        if (!st.ok()) startup_failed.store(true);
      }
      if (!st.ok()) {
        report_error(st.error());
        kill(getpid(), SIGTERM);  // takes the normal shutdown path, exit code below
        return;
      }
      std::fprintf(stderr, "edgelm serve: model '%s' (%s) ready (n_ctx %d)\n", m->spec.name.c_str(),
                   std::string(serve::tier_name(m->spec.tier)).c_str(), m->service->n_ctx());
    }
    // Only when routing needs it, time-boxed, and in idle pieces that requests never wait
    // behind for more than one measurement (serve/model_profiles.h).
    serve::StartupProfileOptions po;
    po.measure = cfg.startup_profile == "quick";
    po.budget_s = cfg.startup_profile_budget_s;
    po.engine = *eo;
    po.log = [](std::string_view line) {
      std::fprintf(stderr, "edgelm serve: %.*s\n", static_cast<int>(line.size()), line.data());
    };
    po.stop = [&] { return server.context().draining.load(); };
    std::vector<serve::ServedModel*> models;
    for (const auto& m : server.context().models()) models.push_back(m.get());
    serve::prepare_latency_profiles(models, server.context().upstream() != nullptr, po);
  });

  int sig = 0;
  std::thread reloader;  // one SIGHUP reload at a time; the waiter stays free for SIGTERM
  std::atomic<bool> reloading{false};
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    if (reloading.exchange(true)) {
      std::fprintf(stderr, "edgelm serve: SIGHUP: a reload is already running; ignored\n");
      continue;
    }
    if (reloader.joinable()) reloader.join();
    reloader = std::thread([&] {
      reload_configured_models(o, server);
      reloading.store(false);
    });
  }
  if (reloader.joinable()) reloader.join();
  std::fprintf(stderr, "edgelm serve: %s received, draining for up to %.0f s\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               cfg.drain_timeout_s);
  const auto t0 = std::chrono::steady_clock::now();
  server.shutdown(std::chrono::duration<double>(cfg.drain_timeout_s));
  http.join();
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bool failed = false;
  for (auto& svc : services) {
    svc->shutdown(std::chrono::duration<double>(std::max(0.0, cfg.drain_timeout_s - spent)));
    failed |= svc->state() == serve::ServiceState::failed;
  }
  load_watch.join();
  std::fprintf(stderr, "edgelm serve: stopped\n");
  return failed || startup_failed.load() ? 1 : 0;
}

}  // namespace

CommandRunner add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  serve::ServeConfig& c = o->flags;
  CLI::App* cmd = app.add_subcommand("serve", "Serve a model over HTTP (OpenAI-compatible API, metrics, health)");
  cmd->add_option("--config", o->config_path, "YAML settings file (see deploy/README.md)");
  o->bindings.emplace_back(
      cmd->add_option("-m,--model", o->model_args,
                      "Model file (GGUF or llama2.c .bin), or repeated NAME=PATH,tier=small|medium|large"
                      "[,tokenizer=P][,profile=P][,dyn_temp=MIN:START:FULL] to serve several behind the router"),
      [p = o.get()](serve::ServeConfig& cfg) {
        if (p->model_args.size() == 1 && !serve::looks_like_model_spec(p->model_args[0])) {
          cfg.model_path = p->model_args[0];
          cfg.models.clear();
        } else {
          cfg.models = p->model_args;
          cfg.model_path.clear();
        }
      });
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
  o->bindings.emplace_back(cmd->get_option("--state-snapshot-interval"), [p = o.get()](serve::ServeConfig& cfg) {
    cfg.state_snapshot_interval = p->engine.state_snapshot_interval;
  });
  add_spec_options(cmd, o->spec);
  o->bindings.emplace_back(cmd->get_option("--spec"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.spec = p->spec.spec; });
  o->bindings.emplace_back(cmd->get_option("--draft"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.draft = p->spec.draft; });
  o->bindings.emplace_back(cmd->get_option("--draft-model"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.draft_model = p->spec.draft_model; });
  o->bindings.emplace_back(cmd->get_option("--draft-quant"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.draft_quant = p->spec.draft_quant; });
  o->bindings.emplace_back(cmd->get_option("--draft-max"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.draft_max = p->spec.draft_max; });
  o->bindings.emplace_back(cmd->get_option("--draft-min"),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.draft_min = p->spec.draft_min; });
  o->bindings.emplace_back(add_model_load_options(cmd, o->load),
                           [p = o.get()](serve::ServeConfig& cfg) { cfg.no_mmap = p->load.no_mmap; });
  bind_flag(*o, cmd, "-c,--ctx-size", &serve::ServeConfig::n_ctx, "Context per sequence (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  bind_flag(*o, cmd, "--max-queue", &serve::ServeConfig::max_queue, "Waiting requests beyond which new ones get 429")
      ->capture_default_str();
  bind_flag(*o, cmd, "--mmproj", &serve::ServeConfig::mmproj,
            "Vision encoder (mmproj GGUF) of the model: chat requests may carry image_url parts");
  bind_flag(*o, cmd, "--image-max-pixels", &serve::ServeConfig::image_max_pixels,
            "Largest decoded image (width * height); larger ones get 400 before decoding")
      ->capture_default_str();
  bind_flag(*o, cmd, "--max-images-per-request", &serve::ServeConfig::max_images_per_request,
            "Images one chat request may carry")
      ->capture_default_str();
  bind_flag(*o, cmd, "--image-cache", &serve::ServeConfig::image_cache,
            "Encoded images kept by SHA-256 of their bytes (LRU; 0: none)")
      ->capture_default_str();
  bind_flag(*o, cmd, "--image-max-bytes", &serve::ServeConfig::image_max_bytes,
            "Largest image file, URL body or decoded data: URL, in bytes")
      ->capture_default_str();
  bind_flag(*o, cmd, "--media-path", &serve::ServeConfig::media_path,
            "Folder whose files image parts may name as file:///PATH (off when unset)");
  o->bindings.emplace_back(
      cmd->add_flag("--allow-image-urls", c.allow_image_urls,
                    "Fetch http(s):// image URLs (public addresses only, unless --image-url-allow-cidr)"),
      [p = o.get()](serve::ServeConfig& cfg) { cfg.allow_image_urls = p->flags.allow_image_urls; });
  bind_flag(*o, cmd, "--image-url-timeout", &serve::ServeConfig::image_url_timeout_s,
            "Seconds one image URL fetch may take, redirects included")
      ->capture_default_str();
  bind_flag(*o, cmd, "--image-url-allow-cidr", &serve::ServeConfig::image_url_allow_cidr,
            "Address range (CIDR) image URLs may reach although private or loopback, e.g. a LAN camera; repeatable")
      ->allow_extra_args(false);
  bind_flag(*o, cmd, "--max-connections", &serve::ServeConfig::max_connections,
            "Open HTTP connections; beyond them a new one gets 503 at once")
      ->capture_default_str();
  bind_flag(*o, cmd, "--header-timeout", &serve::ServeConfig::header_timeout_s,
            "Seconds a request's headers may take to arrive (slowloris)")
      ->capture_default_str();
  bind_flag(*o, cmd, "--body-timeout", &serve::ServeConfig::body_timeout_s,
            "Seconds a request body may stall")
      ->capture_default_str();
  bind_flag(*o, cmd, "--idle-timeout", &serve::ServeConfig::idle_timeout_s,
            "Seconds an idle keep-alive connection stays open")
      ->capture_default_str();
  bind_flag(*o, cmd, "--write-timeout", &serve::ServeConfig::write_timeout_s,
            "Seconds a response write may stall before the connection is cut")
      ->capture_default_str();
  bind_flag(*o, cmd, "--stream-buffer", &serve::ServeConfig::stream_buffer_bytes,
            "Bytes of SSE output a slow reader may leave unread before its stream is cancelled")
      ->capture_default_str();
  bind_flag(*o, cmd, "--prefix-cache-scope", &serve::ServeConfig::prefix_cache_scope,
            "key | global: who shares cached prompt prefixes and answers (default: key with API keys)")
      ->check(CLI::IsMember({"key", "global"}));
  bind_flag(*o, cmd, "--api-key", &serve::ServeConfig::api_keys, "Accepted API key (repeatable); none: no auth");
  cmd->add_option("--api-key-file", o->api_key_file, "File of accepted API keys, one per line (# comments)");
  bind_flag(*o, cmd, "--admin-token", &serve::ServeConfig::admin_token,
            "Token for admin endpoints (or EDGELM_ADMIN_TOKEN)");
  cmd->add_option("--upload-dir", o->upload_dir,
                  "Folder for models uploaded to POST /reload (default: the model's folder)");
  bind_flag(*o, cmd, "--model-name", &serve::ServeConfig::model_name,
            "Model id in the API and metrics (default: file stem)");
  bind_flag(*o, cmd, "--chat-template", &serve::ServeConfig::chat_template,
            "Chat template: llama2 | llama3 | chatml | zephyr | phi3, or a Jinja file (default: the GGUF's "
            "tokenizer.chat_template, else the family of its architecture)");
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
            "Semantic cache embeddings: lexical | lexical-plain | self | PATH of an embedding GGUF")
      ->capture_default_str();
  bind_flag(*o, cmd, "--embedding-prefix", &serve::ServeConfig::embedding_prefix,
            "Instruction prepended to cache queries for an embedding GGUF: auto (the model card's) | none | TEXT")
      ->capture_default_str();
  bind_flag(*o, cmd, "--cache-calibration", &serve::ServeConfig::cache_calibration,
            "JSON from `edgelm eval-cache --calibrate-out`: threshold and prior slope tuned for the embedder");
  bind_flag(*o, cmd, "--cache-guards", &serve::ServeConfig::cache_guards,
            "Guards on semantic hits: all | none | a list of negation,numbers,entities,opposites")
      ->capture_default_str();
  bind_flag(*o, cmd, "--cache-max-error-rate", &serve::ServeConfig::cache_max_error_rate,
            "Per-entry error bound of semantic hits (feedback: POST /v1/cache/feedback)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  bind_flag(*o, cmd, "--cache-wordnet-dir", &serve::ServeConfig::cache_wordnet_dir,
            "WordNet 3.0 database for the lexical embedder and the opposites guard (Debian: wordnet-base)")
      ->capture_default_str();
  bind_flag(*o, cmd, "--upstream", &serve::ServeConfig::upstream,
            "Cloud tier: NAME=URL[,api_key_env=VAR][,model=M][,connect_timeout_s=S][,read_timeout_s=S]"
            "[,breaker_failures=N][,breaker_open_s=S]");
  bind_flag(*o, cmd, "--default-budget-ms", &serve::ServeConfig::default_budget_ms,
            "Latency budget of routed requests that state none")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  bind_flag(*o, cmd, "--startup-profile", &serve::ServeConfig::startup_profile,
            "quick: profile models without a profile file at startup when routing needs it; off: never")
      ->capture_default_str()
      ->check(CLI::IsMember({"quick", "off"}));
  bind_flag(*o, cmd, "--startup-profile-budget", &serve::ServeConfig::startup_profile_budget_s,
            "Seconds the startup profile of all models may take (its plan shrinks to fit; 0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  bind_flag(*o, cmd, "--kv-disk", &serve::ServeConfig::kv_disk,
            "Directory of the prefix KV cache's disk tier (crash-safe block files; warm restarts); empty: off");
  bind_flag(*o, cmd, "--kv-disk-size", &serve::ServeConfig::kv_disk_size,
            "Most bytes of KV block files under --kv-disk (LRU), e.g. 2G")
      ->capture_default_str();
  bind_flag(*o, cmd, "--memory-budget", &serve::ServeConfig::memory_budget,
            "Weights + KV of all models (e.g. 4G); KV per model shrinks to fit; 0: no limit")
      ->capture_default_str();
  bind_flag(*o, cmd, "--pooling", &serve::ServeConfig::pooling,
            "Embedding model served with -m: mean | cls | last instead of the file's pooling_type")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  bind_flag(*o, cmd, "--embed-batch-tokens", &serve::ServeConfig::embed_batch_tokens,
            "Embedding/reranker model: most tokens one batched encode takes (a request above it takes several)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  return [o] { return run_serve(*o); };
}

}  // namespace edgelm::tools
