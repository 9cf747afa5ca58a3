// Taking one node out of a balancer's rotation and back, for rolling fleet updates
// (`edgelm fleet reload`, tools/fleet_rollout.h):
//
//   POST /admin/drain    the node refuses new inference requests with 503 + Retry-After
//                        (counted in edge_requests_total under their path; balancers retry
//                        them on another node) and /health answers 503
//                        "draining"; in-flight requests finish. 200 {"drained": true,
//                        "state": "draining", "in_flight", "model", "model_path",
//                        "tokenizer_path"} (what an updater reloads to roll back).
//   POST /admin/undrain  back in rotation: 200 {"drained": false, "state": <health state>}.
//   POST /admin/smoke    {"prompt"?: string, "max_tokens"?: 1..64 (default 8)}: one greedy
//                        generation on the current model that passes a drain (so an updater can
//                        check a freshly reloaded model before undraining); 200 {"model",
//                        "text", "completion_tokens", "finish_reason", "latency_ms"}; 503 not
//                        ready, 429 queue full, 500 the engine failed.
//
// All three take the admin token (403 without one configured, 401 none sent, 403 wrong), run
// on the control pool, and accept an empty body or a JSON object (an unknown field is a 400
// naming it). While the server shuts down (SIGTERM) drain and undrain answer 503. POST /reload
// works while drained. A drain lasts until undrain or a restart.
#pragma once

#include <nlohmann/json.hpp>

namespace edgelm::serve {

class ServerContext;

// The /health fields of this concept: "drained" (by /admin/drain), "in_flight" (work requests
// the transport holds: running, waiting, streaming), "model_state" (the state /health would
// report without the drain, so an updater can see a drained node's model is ready), and
// "upstream": {"name", "breaker"} when a cloud tier is configured.
void add_drain_fields(const ServerContext& ctx, nlohmann::json& health_body);

}  // namespace edgelm::serve
