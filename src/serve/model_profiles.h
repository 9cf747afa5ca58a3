// Gives each served model the latency profile the router predicts with (router.h): the
// model's profile file when it exists, else, when routing needs one, a startup profile measured
// on its own engine thread, saved to the profile path when one is given. Live timings refine
// it afterwards (ServedModel::latency, OnlineLatencyModel).
//
// The startup profile never delays a request: it runs as pieces of one measurement each
// (LatencyProfileSession), each an idle job of the model's engine (EngineService::run_when_idle:
// only when no request runs or waits there), so a request that arrives waits for at most the
// one piece in progress. It is time-boxed: the models to measure share one wall-clock budget;
// each model's plan shrinks to fit its share (estimated from the warm-up), and a model whose
// share runs out (requests kept its engine busy) is fitted on what was measured, or left
// unprofiled when that is too little. Until its profile is installed (at the end), the router
// treats a model as it does any model without a profile (it fits any budget).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "engine/engine.h"
#include "serve/served_model.h"

namespace edgelm::serve {

struct StartupProfileOptions {
  bool measure = true;           // false: only profile files are used ("startup_profile: off")
  engine::EngineOptions engine;  // as the server runs the model (kv type, chunking)
  int32_t max_input = 256;       // longest prompt timed (capped by the model's context)
  double budget_s = 20;          // wall time of all models' measurements together; 0: none
  std::function<void(std::string_view)> log;  // one line per outcome (may be empty)
  std::function<bool()> stop;                 // true: end now (the server drains); may be empty
  // Called on the model's engine thread as each of its pieces starts (tests). May be empty.
  std::function<void(const ServedModel&)> on_piece;
};

// Whether routing needs measured profiles: the router has a choice only between several local
// models or a local model and an upstream. One model and no upstream: nothing to route.
bool startup_profile_needed(size_t n_models, bool has_upstream);

// Every model's profile file is loaded; then, when opts.measure and routing needs it, the
// models without one are measured one after another within opts.budget_s (each `profiling`
// meanwhile). Call once every model is ready, on a thread of its own: it returns when the
// profiles are done, the budget is spent, opts.stop says so or a service drains. Problems
// (unreadable profile file, failed or too short measurement) go to opts.log as warnings; the
// model then stays unprofiled.
void prepare_latency_profiles(const std::vector<ServedModel*>& models, bool has_upstream,
                              const StartupProfileOptions& opts);

}  // namespace edgelm::serve
