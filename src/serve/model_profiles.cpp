#include "serve/model_profiles.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>

#include "serve/router_api.h"

namespace edgelm::serve {
namespace {

using SteadyClock = std::chrono::steady_clock;

void log_line(const StartupProfileOptions& opts, const std::string& line) {
  if (opts.log) opts.log(line);
}

// Result: whether a profile file was there (and is now the model's).
Result<bool> load_profile_file(ServedModel& m, const StartupProfileOptions& opts) {
  const std::string& path = m.spec.profile_path;
  if (path.empty() || !std::filesystem::exists(path)) return false;
  EDGELM_TRY(LatencyModel lm, load_latency_model(path));
  m.set_latency(std::move(lm));
  log_line(opts, fmt::format("model '{}': latency profile loaded from {}", m.spec.name, path));
  return true;
}

Status measure_profile(ServedModel& m, const StartupProfileOptions& opts, SteadyClock::time_point deadline) {
  const int32_t decode_tokens = 16;
  const int32_t max_input = std::min(opts.max_input, m.service->n_ctx() - decode_tokens - 2);
  if (max_input < 16) return make_error("model '{}': context {} is too short to profile", m.spec.name, m.service->n_ctx());
  const std::shared_ptr<engine::StepModel> model = m.service->current_step_model();
  if (!model) return make_error("model '{}' is not ready", m.spec.name);
  // Sized for the largest plan; the warm-up then tells how much of it fits the budget.
  ProfileOptions po = profile_plan(max_input, 12, 6, decode_tokens, 5);
  po.engine = opts.engine;
  po.engine.n_ctx = m.service->n_ctx();
  po.engine.spec = {};  // time the plain path; speculation adapts on its own
  // The profile's own KV: a few sequences of the longest length, not the server's whole pool.
  po.engine.kv_memory_bytes = std::min(opts.engine.kv_memory_bytes, size_t{64} << 20);

  std::unique_ptr<LatencyProfileSession> session;
  // One piece: an idle job of the model's engine thread.
  auto piece = [&](const std::function<Status()>& body) {
    return m.service->run_when_idle([&](ThreadPool&) -> Status {
      if (opts.on_piece) opts.on_piece(m);
      if (m.service->current_step_model() != model) return make_error("the model was reloaded");
      return body();
    });
  };
  Status st = piece([&]() -> Status {
    EDGELM_TRY(session, LatencyProfileSession::create(*model, po));
    return session->step();  // the cold warm-up request
  });
  for (int32_t i = 1; st.ok() && i < LatencyProfileSession::kWarmupSteps; ++i)
    st = piece([&] { return session->step(); });
  if (!st.ok()) return make_error("model '{}': startup profile: {}", m.spec.name, st.error().message);
  const double left_ms = std::chrono::duration<double, std::milli>(deadline - SteadyClock::now()).count();
  ProfileOptions plan = startup_profile_plan(max_input, decode_tokens, std::max(0.0, left_ms),
                                             session->warmup_prefill_ms_per_token(), session->warmup_decode_ms());
  plan.engine = po.engine;
  if (Status re = session->replan(plan); !re.ok())
    return make_error("model '{}': startup profile: {}", m.spec.name, re.error().message);
  m.profile_pieces_done = session->n_done();
  m.profile_pieces_planned = session->n_steps();

  bool cut = false;
  while (!session->done()) {
    if (opts.stop && opts.stop()) return make_error("model '{}': startup profile stopped", m.spec.name);
    if (SteadyClock::now() >= deadline) {
      cut = true;
      break;
    }
    st = piece([&] { return session->step(); });
    if (!st.ok()) return make_error("model '{}': startup profile: {}", m.spec.name, st.error().message);
    m.profile_pieces_done = session->n_done();
  }
  Result<ProfileRun> run = session->finish();
  const int32_t done = session->n_done(), planned = session->n_steps();
  session.reset();
  if (!run.ok())
    return make_error("model '{}': startup profile{}: {}", m.spec.name,
                      cut ? fmt::format(" cut by its budget after {} of {} measurements", done, planned) : "",
                      run.error().message);
  LatencyModel lm = run->model;
  lm.source = fmt::format("edgelm serve startup profile of {}", m.spec.path);
  log_line(opts,
           fmt::format("model '{}': profiled in {:.1f} s ({} of {} measurements{}, inputs up to {}): prefill(128) "
                       "{:.1f} ms, decode {:.2f} ms/token, held-out error prefill {:.1f}% decode {:.1f}%",
                       m.spec.name, run->seconds, done, planned, cut ? ", cut by the budget" : "",
                       plan.prefill_lengths.back(), lm.prefill_ms(128), lm.decode_ms(0),
                       100 * lm.held_out_prefill_error, 100 * lm.held_out_decode_error));
  // A profile cut short is used for this run but not kept: the next start measures again.
  if (!m.spec.profile_path.empty() && !cut) {
    if (Status saved = save_latency_model(lm, m.spec.profile_path); !saved.ok())
      log_line(opts, fmt::format("model '{}': cannot save the profile: {}", m.spec.name, saved.error().message));
  }
  m.set_latency(std::move(lm));
  return ok_status();
}

}  // namespace

bool startup_profile_needed(size_t n_models, bool has_upstream) { return n_models > 1 || has_upstream; }

void prepare_latency_profiles(const std::vector<ServedModel*>& models, bool has_upstream,
                              const StartupProfileOptions& opts) {
  auto warn = [&](const std::string& message) {
    log_line(opts, fmt::format("warning: {} (the router assumes it fits any budget)", message));
  };
  std::vector<ServedModel*> to_measure;
  for (ServedModel* m : models) {
    Result<bool> loaded = load_profile_file(*m, opts);
    if (!loaded.ok())
      warn(loaded.error().message);
    else if (!*loaded)
      to_measure.push_back(m);
  }
  if (to_measure.empty() || !opts.measure || !(opts.budget_s > 0)) return;
  if (!startup_profile_needed(models.size(), has_upstream)) {
    log_line(opts, "no startup profile: one model and no upstream, nothing to route");
    return;
  }
  for (ServedModel* m : to_measure) m->profiling = true;
  const auto until = SteadyClock::now() +
                     std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(opts.budget_s));
  for (size_t i = 0; i < to_measure.size(); ++i) {
    ServedModel& m = *to_measure[i];
    // Each model gets an equal share of what is left; time another one did not use carries over.
    const auto share = (until - SteadyClock::now()) / static_cast<int64_t>(to_measure.size() - i);
    const bool stopped = opts.stop && opts.stop();
    if (!stopped && share > SteadyClock::duration::zero()) {
      if (Status st = measure_profile(m, opts, SteadyClock::now() + share); !st.ok()) warn(st.error().message);
    }
    m.profiling = false;
  }
}

}  // namespace edgelm::serve
