#include "serve/routes_dashboard.h"

#include <charconv>
#include <cstdlib>

#include "serve/config_view.h"
#include "serve/dashboard_assets.h"
#include "serve/http_server.h"
#include "serve/stats_sampler.h"

namespace edgelm::serve {

const DashboardAsset* find_dashboard_asset(std::string_view path) {
  if (path == "/" || path == "/dashboard" || path == "/dashboard/") path = "/index.html";
  for (const DashboardAsset& a : dashboard_assets())
    if (a.path == path) return &a;
  return nullptr;
}

bool is_dashboard_path(std::string_view path) {
  return path == "/" || path == "/dashboard" || path == "/dashboard/" || path == "/index.html" ||
         path.starts_with("/assets/") || path.starts_with("/favicon.");
}

namespace {

using nlohmann::json;

bool accepts_gzip(const http::Request& req) {
  // "gzip" listed, unless with q=0 (RFC 9110 12.5.3).
  const std::string ae = req.header("Accept-Encoding");
  const size_t at = ae.find("gzip");
  if (at == std::string::npos) return false;
  const size_t end = ae.find(',', at);
  const std::string item = ae.substr(at, end == std::string::npos ? std::string::npos : end - at);
  const size_t q = item.find("q=");
  return q == std::string::npos || std::strtod(item.c_str() + q + 2, nullptr) > 0.0;
}

void serve_asset(const DashboardAsset& a, const http::Request& req, http::Response& res) {
  const bool page = a.path == "/index.html";
  // Vite names the bundle by its content: it may be kept for a year. The page is revalidated
  // each time (ETag), so a new binary's page is seen at once; the favicon may be kept a day.
  res.set_header("Cache-Control", a.path.starts_with("/assets/") ? "public, max-age=31536000, immutable"
                                  : page                         ? "no-cache"
                                                                 : "public, max-age=86400");
  res.set_header("ETag", std::string(a.etag));
  res.set_header("X-Content-Type-Options", "nosniff");
  if (page) {
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'");
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("Referrer-Policy", "no-referrer");
  }
  if (!a.gzip.empty()) res.set_header("Vary", "Accept-Encoding");
  if (req.header("If-None-Match") == a.etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  const bool gz = !a.gzip.empty() && accepts_gzip(req);
  const auto bytes = gz ? a.gzip : a.data;
  res.set_content(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()), a.content_type);
  if (gz) res.set_header("Content-Encoding", "gzip");
}

void handle_stats(ServerContext& ctx, const StatsSampler& sampler, const http::Request& req, http::Response& res) {
  int64_t since = 0;
  if (std::optional<std::string> s = req.param("since")) {
    const char* end = s->data() + s->size();
    auto [p, ec] = std::from_chars(s->data(), end, since);
    if (ec != std::errc() || p != end || since < 0)
      return ctx.send_error(res, "",
                            {400, "'since' must be a non-negative integer (Unix milliseconds)", "invalid_request_error",
                             "since", "invalid_value"});
  }
  json body = sampler.history().to_json(since, sampler.interval_s());
  const ServeConfig& cfg = ctx.config();
  body["device_id"] = cfg.device_id;
  body["auth"] = {{"api_keys", !cfg.api_keys.empty()}, {"admin", !cfg.admin_token.empty()}};
  res.set_header("Cache-Control", "no-store");
  ctx.send_json(res, 200, body);
}

}  // namespace

void register_dashboard_routes(http::Server& svr, ServerContext& ctx, const StatsSampler& sampler) {
  const size_t max_body = ctx.config().max_body_bytes;
  auto page = [&ctx](const http::Request& req, http::Response& res) {
    const DashboardAsset* a = find_dashboard_asset(req.path);
    if (a == nullptr)
      return ctx.send_error(res, "",
                            {404,
                             "this edgelm was built without the dashboard (EDGELM_DASHBOARD=OFF); see /metrics "
                             "and /stats",
                             "invalid_request_error", "", "not_found"});
    serve_asset(*a, req, res);
  };
  for (const char* p : {"/", "/dashboard", "/dashboard/", "/index.html"})
    svr.add({"GET", p, http::RouteClass::control, http::BodyMode::buffered, max_body, page});
  for (const DashboardAsset& a : dashboard_assets())
    if (a.path != "/index.html")
      svr.add({"GET", std::string(a.path), http::RouteClass::control, http::BodyMode::buffered, max_body,
               [&a](const http::Request& req, http::Response& res) { serve_asset(a, req, res); }});
  svr.add({"GET", kStatsPath, http::RouteClass::control, http::BodyMode::buffered, max_body,
           [&ctx, &sampler](const http::Request& req, http::Response& res) { handle_stats(ctx, sampler, req, res); }});
  svr.add({"GET", "/admin/config", http::RouteClass::control, http::BodyMode::buffered, max_body,
           [&ctx](const http::Request& req, http::Response& res) {
             if (!check_admin_token(ctx, req, res, "/admin/config")) return;
             res.set_header("Cache-Control", "no-store");
             ctx.send_json(res, 200, {{"config", effective_config_json(ctx.config())}});
           }});
}

}  // namespace edgelm::serve
