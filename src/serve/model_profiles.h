// Gives each served model the latency profile the router predicts with (router.h): the
// model's profile file when it exists, else a quick profile measured at startup on its own
// engine thread (between serving steps), saved to the profile path when one is given. Live
// timings refine it afterwards (ServedModel::latency, OnlineLatencyModel).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "engine/engine.h"
#include "serve/served_model.h"

namespace edgelm::serve {

struct StartupProfileOptions {
  bool measure = true;           // false: only profile files are used ("startup_profile: off")
  engine::EngineOptions engine;  // as the server runs the model (kv type, chunking)
  int32_t max_input = 256;       // longest prompt timed (capped by the model's context)
  std::function<void(std::string_view)> log;  // one line per outcome (may be empty)
};

// Call once the model is ready. Errors: an unreadable or invalid profile file, a measurement
// that failed; the model then stays unprofiled (the router assumes it fits any budget).
Status prepare_latency_profile(ServedModel& m, const StartupProfileOptions& opts);

}  // namespace edgelm::serve
