// The server side of routing: turns an HTTP request into the router's input (router.h: budget,
// complexity, each tier's refined latency model and queue, the upstream's breaker), runs the
// policy, and selects the chosen model for the rest of the handler.
//
// The router runs when the server has several models or an upstream, or when the request
// states a latency budget (`latency_budget_ms` or the header `x-latency-budget-ms`). Otherwise
// the one model serves as before, and `model` may be empty, "auto" or its name.
//
// Invariants: while a Routed lives on a thread, ServerContext::service() on that thread is the
// chosen model's service, pinned (EngineService::pin_model), so a reload during the request
// changes nothing it sees; destroying it restores the previous selection (Routed nest).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "serve/engine_service.h"
#include "serve/router_api.h"
#include "serve/served_model.h"

namespace edgelm::serve {

class ServerContext;

struct RouteRequest {
  std::string endpoint;
  std::string prompt_text;   // the user-visible text (complexity, token counts per model)
  int32_t prompt_ids = 0;    // > 0: the prompt came as this many token ids
  std::optional<int32_t> max_tokens;  // the request's own limit
  bool upstream_ok = false;  // the endpoint can be served by the upstream (chat completions)
};

class Routed {
 public:
  Routed() = default;
  ~Routed();
  Routed(const Routed&) = delete;
  Routed& operator=(const Routed&) = delete;

  ServedModel* model = nullptr;           // the local model chosen (null: the upstream)
  std::optional<RouteDecision> decision;  // set when the router ran
  RouteInput input;                       // what it decided on (kept to re-route on fallback)
  bool upstream() const { return decision && decision->upstream; }

 private:
  friend class ServerContext;
  void select(const ServerContext* ctx, ServedModel* m);

  std::optional<EngineService::Pin> pin_;
  bool selected_ = false;
  const ServerContext* prev_ctx_ = nullptr;
  EngineService* prev_service_ = nullptr;
};

// The service Routed selected on this thread for `ctx`, or null.
EngineService* selected_service(const ServerContext* ctx);

}  // namespace edgelm::serve
