#include "serve/model_profiles.h"

#include <algorithm>
#include <filesystem>

#include "serve/latency_profiler.h"

namespace edgelm::serve {

Status prepare_latency_profile(ServedModel& m, const StartupProfileOptions& opts) {
  auto log = [&](const std::string& line) {
    if (opts.log) opts.log(line);
  };
  const std::string& path = m.spec.profile_path;
  if (!path.empty() && std::filesystem::exists(path)) {
    EDGELM_TRY(LatencyModel lm, load_latency_model(path));
    m.set_latency(std::move(lm));
    log(fmt::format("model '{}': latency profile loaded from {}", m.spec.name, path));
    return ok_status();
  }
  if (!opts.measure) return ok_status();
  const int32_t decode_tokens = 16;
  const int32_t max_input = std::min(opts.max_input, m.service->n_ctx() - decode_tokens - 2);
  if (max_input < 16) return make_error("model '{}': context {} is too short to profile", m.spec.name, m.service->n_ctx());
  ProfileOptions po = profile_plan(max_input, 12, 6, decode_tokens, 1);
  po.engine = opts.engine;
  po.engine.n_ctx = m.service->n_ctx();
  po.engine.spec = {};  // time the plain path; speculation adapts on its own
  // The profile's own KV: a few sequences of the longest length, not the server's whole pool.
  po.engine.kv_memory_bytes = std::min(opts.engine.kv_memory_bytes, size_t{64} << 20);
  m.profiling = true;
  Result<ProfileRun> run = make_error("not run");
  const Status st = m.service->run_exclusive_model([&](engine::StepModel& model, ThreadPool&) -> Status {
    run = run_latency_profile(model, po);
    // A fast model is timed again with medians of 5: single runs of millisecond steps are noise.
    if (run.ok() && run->seconds < 2.0) {
      po.reps = 5;
      run = run_latency_profile(model, po);
    }
    return ok_status();
  });
  m.profiling = false;
  EDGELM_TRY_STATUS(st);
  if (!run.ok()) return make_error("model '{}': startup profile: {}", m.spec.name, run.error().message);
  LatencyModel lm = run->model;
  lm.source = fmt::format("edgelm serve startup profile of {}", m.spec.path);
  log(fmt::format("model '{}': profiled in {:.1f} s: prefill(128) {:.1f} ms, decode {:.2f} ms/token, held-out error "
                  "prefill {:.1f}% decode {:.1f}%",
                  m.spec.name, run->seconds, lm.prefill_ms(128), lm.decode_ms(0), 100 * lm.held_out_prefill_error,
                  100 * lm.held_out_decode_error));
  if (!path.empty()) {
    if (Status saved = save_latency_model(lm, path); !saved.ok())
      log(fmt::format("model '{}': cannot save the profile: {}", m.spec.name, saved.error().message));
  }
  m.set_latency(std::move(lm));
  return ok_status();
}

}  // namespace edgelm::serve
