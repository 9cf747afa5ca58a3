// The dashboard's files (web/dashboard, built by Vite), embedded in the binary at build time:
// cmake/embed_assets.cmake turns the build's dist/ folder into a generated source that defines
// dashboard_assets(). With EDGELM_DASHBOARD=OFF the table is empty (dashboard_assets_off.cpp)
// and GET / answers 404 saying so.
#pragma once

#include <span>
#include <string_view>

namespace edgelm::serve {

struct DashboardAsset {
  std::string_view path;          // as requested: "/index.html", "/assets/index-3f2a.js", "/favicon.ico"
  std::string_view content_type;  // from the extension
  std::string_view etag;          // quoted, from the content's SHA-256
  std::span<const unsigned char> data;
  std::span<const unsigned char> gzip;  // the same, gzip-compressed; empty when that is not smaller
};

std::span<const DashboardAsset> dashboard_assets();

// The asset at `path` ("/" and "/dashboard" are /index.html); null if none.
const DashboardAsset* find_dashboard_asset(std::string_view path);

// Paths the dashboard serves without an API key (the page, its assets, the favicon).
bool is_dashboard_path(std::string_view path);

}  // namespace edgelm::serve
