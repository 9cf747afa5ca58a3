// ServerMetrics series fed from elsewhere at scrape time: edge_cache_store_errors_total.
#include <gtest/gtest.h>

#include <atomic>

#include "serve/metrics.h"

namespace edgelm::serve {
namespace {

TEST(ServerMetrics, CacheStoreErrorsAreReadAtEachScrape) {
  ServerMetrics m("dev-1");
  const std::string before = m.scrape(ServiceStats{}, "tiny");
  EXPECT_NE(before.find("# TYPE edge_cache_store_errors_total counter\n"), std::string::npos) << before;
  EXPECT_EQ(before.find("edge_cache_store_errors_total{"), std::string::npos) << before;  // no source: no series
  std::atomic<uint64_t> errors{0};
  m.set_cache_store_errors_source([&errors] { return errors.load(); });
  EXPECT_NE(m.scrape(ServiceStats{}, "tiny")
                .find("edge_cache_store_errors_total{model_name=\"tiny\",device_id=\"dev-1\"} 0\n"),
            std::string::npos);
  errors = 7;
  const std::string after = m.scrape(ServiceStats{}, "tiny");
  EXPECT_NE(after.find("edge_cache_store_errors_total{model_name=\"tiny\",device_id=\"dev-1\"} 7\n"), std::string::npos)
      << after;
}

}  // namespace
}  // namespace edgelm::serve
