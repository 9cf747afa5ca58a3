// The router's vocabulary (src/router: latency model and profiler, complexity, routing policy,
// upstream client and breaker) as serve speaks it. serve is the router's one client: its
// routes, config and served models name these types on every other line, so they are visible
// here unqualified rather than spelled router:: throughout.
#pragma once

#include "router/complexity.h"
#include "router/latency_model.h"
#include "router/latency_profiler.h"
#include "router/router.h"
#include "router/upstream.h"

namespace edgelm::serve {
using namespace edgelm::router;  // NOLINT(google-build-using-namespace): see above
}  // namespace edgelm::serve
