// `edgelm fleet reload`: a rolling model update over edgelm nodes behind a load balancer, one
// node at a time, so the fleet never stops serving:
//
//   for each node: POST /admin/drain (it leaves the balancer's rotation: /health and new work
//   answer 503, which balancers retry elsewhere) -> wait until its in-flight requests finished
//   -> POST /reload (a server-side path, or the local file uploaded) -> wait for /health's
//   model_state ready on the new model -> POST /admin/smoke -> POST /admin/undrain -> wait for
//   /health 200 -> let the balancer's health checks see it back (settle_s).
//
// Before any change every node must answer /health with its model ready. On the first failure
// the rollout stops: the failing node gets its previous model back (when its reload had
// succeeded) and is undrained, then every node already updated is rolled back the same way
// (drain, wait, reload the model path it served before, smoke, undrain), newest first. The
// error names the node, the step and the node's answer, and says what was rolled back.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "core/result.h"

namespace edgelm::tools {

struct FleetReloadOptions {
  std::vector<std::string> nodes;  // base URLs, updated in this order
  std::string model_path;          // on the nodes (POST /reload {"path"}), or
  std::string upload_path;         // a local file uploaded to each node (exactly one of the two)
  std::string model_name;          // the name to serve it under; empty: the file's stem
  std::string token;               // the admin token
  double drain_timeout_s = 120;    // in-flight requests must finish within this
  double ready_timeout_s = 300;    // the reloaded model must be ready within this
  double settle_s = 2;             // after undrain, before the next node (balancer health checks)
  double poll_s = 0.1;
};

struct FleetReloadReport {
  std::vector<std::string> updated;      // nodes now on the new model
  std::vector<std::string> rolled_back;  // nodes put back on their previous model after a failure
  std::string model;                     // the new model's name as the nodes report it
};

// Runs the rollout; progress lines ("node 1/3 http://...: drained, 2 in flight") go to `log`.
// Errors: bad options, a node not ready before the start, or the first failing step (after
// the rollback; its outcome is in the message).
Result<FleetReloadReport> run_fleet_reload(const FleetReloadOptions& o, std::FILE* log);

}  // namespace edgelm::tools
