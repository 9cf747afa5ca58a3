// The dashboard's routes (routes_dashboard.cpp):
//   GET /, /dashboard, /index.html    the single-page app (Cache-Control: no-cache, ETag)
//   GET /assets/*, /favicon.*          its files; content-hashed /assets/ names are immutable
//                                      (max-age one year); gzip when the client accepts it;
//                                      If-None-Match answers 304
//   GET /stats[?since=MS]              the JSON stats and 15-minute history (stats_history.h);
//                                      an API key only where /metrics needs one (auth_metrics)
//   GET /admin/config                  the effective configuration, secrets masked (admin token)
#pragma once

#include "http/server.h"

namespace edgelm::serve {

class ServerContext;
class StatsSampler;

inline constexpr const char* kStatsPath = "/stats";

void register_dashboard_routes(http::Server& svr, ServerContext& ctx, const StatsSampler& sampler);

}  // namespace edgelm::serve
