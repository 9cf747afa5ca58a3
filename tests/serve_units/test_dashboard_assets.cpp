// The embedded dashboard table (serve/dashboard_assets.h): what cmake/embed_assets.cmake
// generated from web/dashboard's build, and the paths served without an API key.
#include "serve/dashboard_assets.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace edgelm::serve {
namespace {

TEST(DashboardAssets, TheTableHoldsThePageItsBundleAndTheFavicon) {
  if (dashboard_assets().empty()) GTEST_SKIP() << "built with EDGELM_DASHBOARD=OFF";
  std::set<std::string> paths;
  bool script = false, style = false;
  for (const DashboardAsset& a : dashboard_assets()) {
    EXPECT_TRUE(paths.insert(std::string(a.path)).second) << "twice: " << a.path;
    EXPECT_EQ(a.path.front(), '/');
    EXPECT_FALSE(a.content_type.empty()) << a.path;
    ASSERT_GE(a.etag.size(), 3u) << a.path;
    EXPECT_EQ(a.etag.front(), '"');
    EXPECT_EQ(a.etag.back(), '"');
    EXPECT_FALSE(a.data.empty()) << a.path;
    if (!a.gzip.empty()) {
      EXPECT_LT(a.gzip.size(), a.data.size()) << a.path;
      EXPECT_EQ(a.gzip[0], 0x1f);
      EXPECT_EQ(a.gzip[1], 0x8b);
    }
    script |= a.path.starts_with("/assets/") && a.content_type == "text/javascript; charset=utf-8";
    style |= a.path.starts_with("/assets/") && a.content_type == "text/css; charset=utf-8";
    EXPECT_TRUE(is_dashboard_path(a.path)) << a.path;
  }
  EXPECT_TRUE(paths.count("/index.html"));
  EXPECT_TRUE(paths.count("/favicon.ico"));
  EXPECT_TRUE(script);
  EXPECT_TRUE(style);
  // The page is small: a few hundred KB at most, all files together.
  size_t total = 0;
  for (const DashboardAsset& a : dashboard_assets()) total += a.data.size();
  EXPECT_LT(total, size_t{400} << 10);
}

TEST(DashboardAssets, TheRootAndDashboardAreThePage) {
  if (dashboard_assets().empty()) GTEST_SKIP() << "built with EDGELM_DASHBOARD=OFF";
  const DashboardAsset* page = find_dashboard_asset("/index.html");
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  for (const char* p : {"/", "/dashboard", "/dashboard/"}) EXPECT_EQ(find_dashboard_asset(p), page) << p;
  EXPECT_EQ(find_dashboard_asset("/assets/none.js"), nullptr);
  EXPECT_EQ(find_dashboard_asset("/v1/models"), nullptr);
}

TEST(DashboardAssets, OnlyThePageAndItsFilesArePublic) {
  for (const char* p : {"/", "/dashboard", "/index.html", "/assets/index-x.js", "/favicon.ico", "/favicon.svg"})
    EXPECT_TRUE(is_dashboard_path(p)) << p;
  for (const char* p : {"/stats", "/v1/models", "/v1/chat/completions", "/admin/config", "/reload", "/assets",
                        "/dashboardx", "/predict"})
    EXPECT_FALSE(is_dashboard_path(p)) << p;
}

}  // namespace
}  // namespace edgelm::serve
