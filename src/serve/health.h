// What GET /health reports, for load balancers and operators: the HTTP status says whether to
// send traffic, the body says why and how busy.
//
//   200  every model is ready: "status": "ok", "state": "ready" | "profiling" | "saturated"
//        (a ready server stays in rotation while its startup profile runs, which never delays
//        requests, and while its queue is full, which is answered 429 per request)
//   503  a model is loading, failed or stopped, or the server drains: "status" and "state"
//        are "loading" | "failed" | "stopped" | "draining"
//
// "saturated" (some model's queue holds max_queue waiting requests) wins over "profiling".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/served_model.h"

namespace edgelm::serve {

struct ModelHealth {
  std::string name;
  Tier tier = Tier::small;
  std::string state;  // loading | failed | stopped | ready | profiling | saturated
};

struct Health {
  int http_status = 503;
  std::string status;  // ok | loading | failed | stopped | draining
  std::string state;   // ready | profiling | saturated, or the status when not ok
  std::vector<ModelHealth> models;
  bool profiling = false;           // a startup profile is pending or running
  int32_t profile_pieces_done = 0;  // over the models being profiled
  int32_t profile_pieces_planned = 0;
};

Health assess_health(const std::vector<std::unique_ptr<ServedModel>>& models, bool draining);

// status, state, and "profile": {"pieces_done", "pieces_planned"} while profiling; `models`
// (name, tier, state) only when list_models.
nlohmann::json health_json(const Health& h, bool list_models);

}  // namespace edgelm::serve
