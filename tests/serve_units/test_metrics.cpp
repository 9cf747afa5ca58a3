// ServerMetrics series fed from elsewhere at scrape time: edge_cache_store_errors_total,
// edge_energy_joules_total (a fixture RAPL tree), process_cpu_seconds_total; the recurrent
// state and snapshot gauges from the service stats.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>

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

TEST(ServerMetrics, RecurrentStatesAndSnapshots) {
  ServerMetrics m("dev-1");
  ServiceStats st;
  st.state_bytes = 4096;
  st.state_slots_live = 2;
  st.state_snapshot_bytes = 12288;
  st.state_snapshots = 3;
  const std::string text = m.scrape(st, "q");
  for (const char* line : {"edge_recurrent_state_bytes{model_name=\"q\",device_id=\"dev-1\"} 4096\n",
                           "edge_recurrent_state_slots{model_name=\"q\",device_id=\"dev-1\"} 2\n",
                           "edge_recurrent_snapshot_bytes{model_name=\"q\",device_id=\"dev-1\"} 12288\n",
                           "edge_recurrent_snapshot_count{model_name=\"q\",device_id=\"dev-1\"} 3\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
}

TEST(ServerMetrics, EnergyFromRaplFixtureAndAbsentWithoutSource) {
  char tmpl[] = "/tmp/edgelm-metrics-sysfs-XXXXXX";
  const std::string root = mkdtemp(tmpl);
  const std::string zone = root + "/class/powercap/intel-rapl:0";
  std::filesystem::create_directories(zone);
  std::ofstream(zone + "/energy_uj") << "1000000\n";
  std::ofstream(zone + "/max_energy_range_uj") << "262143328850\n";
  ServerMetrics m("dev-1", EnergyMeter::open(root));
  std::ofstream(zone + "/energy_uj") << "3500000\n";  // 2.5 J since start
  const std::string text = m.scrape(ServiceStats{}, "tiny");
  EXPECT_NE(text.find("edge_energy_joules_total{model_name=\"tiny\",device_id=\"dev-1\"} 2.5\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("process_cpu_seconds_total{model_name=\"tiny\",device_id=\"dev-1\"} "), std::string::npos);
  std::filesystem::remove_all(root);

  ServerMetrics none("dev-1", EnergyMeter::open("/nonexistent-sysfs"));
  const std::string absent = none.scrape(ServiceStats{}, "tiny");
  EXPECT_NE(absent.find("# TYPE edge_energy_joules_total counter\n"), std::string::npos);
  EXPECT_EQ(absent.find("edge_energy_joules_total{"), std::string::npos) << absent;
}

}  // namespace
}  // namespace edgelm::serve
