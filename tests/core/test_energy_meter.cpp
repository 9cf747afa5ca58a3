// EnergyMeter on fixture sysfs trees written here: RAPL packages (sub-zones ignored, counter
// wrap), power_supply power_now (integrated) and energy_now (drops), unreadable and absent
// sources, and EDGELM_SYSFS_ROOT.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/energy_meter.h"

namespace edgelm {
namespace {

namespace fs = std::filesystem;

class Tree {
 public:
  Tree() {
    char tmpl[] = "/tmp/edgelm-sysfs-XXXXXX";
    root_ = mkdtemp(tmpl);
  }
  ~Tree() { fs::remove_all(root_); }
  void write(const std::string& rel, const std::string& text) {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text << "\n";
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(EnergyMeter, RaplSumsPackagesOnlyAndHandlesWrap) {
  Tree t;
  t.write("class/powercap/intel-rapl:0/name", "package-0");
  t.write("class/powercap/intel-rapl:0/energy_uj", "1000000");
  t.write("class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850");
  t.write("class/powercap/intel-rapl:0:0/energy_uj", "500");  // core sub-zone: part of package 0
  t.write("class/powercap/intel-rapl:1/name", "package-1");
  t.write("class/powercap/intel-rapl:1/energy_uj", "262143000000");
  t.write("class/powercap/intel-rapl:1/max_energy_range_uj", "262143328850");
  auto m = EnergyMeter::open(t.root());
  ASSERT_TRUE(m->available()) << m->absent_reason();
  EXPECT_EQ(m->source(), "rapl: intel-rapl:0 (package-0), intel-rapl:1 (package-1)");
  EXPECT_DOUBLE_EQ(m->joules(), 0.0);
  t.write("class/powercap/intel-rapl:0/energy_uj", "3500000");     // +2.5 J
  t.write("class/powercap/intel-rapl:0:0/energy_uj", "99999999");  // ignored
  t.write("class/powercap/intel-rapl:1/energy_uj", "671150");      // wrapped: +328850 + 671150 uJ = 1 J
  EXPECT_NEAR(m->joules(), 3.5, 1e-9);
  EXPECT_NEAR(m->joules(), 3.5, 1e-9);  // no change, no energy
  t.write("class/powercap/intel-rapl:0/energy_uj", "4500000");
  EXPECT_NEAR(m->joules(), 4.5, 1e-9);
}

TEST(EnergyMeter, PowerNowIsIntegratedBetweenReads) {
  Tree t;
  t.write("class/power_supply/AC/online", "1");
  t.write("class/power_supply/BAT0/power_now", "5000000");  // 5 W
  t.write("class/power_supply/BAT0/energy_now", "40000000");
  auto m = EnergyMeter::open(t.root(), 100.0);
  ASSERT_TRUE(m->available());
  EXPECT_EQ(m->source(), "power_supply: BAT0 power_now");
  EXPECT_NEAR(m->joules_at(102.0), 10.0, 1e-9);  // 5 W for 2 s
  t.write("class/power_supply/BAT0/power_now", "7000000");
  EXPECT_NEAR(m->joules_at(104.0), 22.0, 1e-9);  // + (5 + 7) / 2 W for 2 s
}

TEST(EnergyMeter, EnergyNowCountsDropsOnly) {
  Tree t;
  t.write("class/power_supply/BAT1/energy_now", "40000000");  // µWh
  auto m = EnergyMeter::open(t.root());
  ASSERT_TRUE(m->available());
  EXPECT_EQ(m->source(), "power_supply: BAT1 energy_now");
  t.write("class/power_supply/BAT1/energy_now", "39999000");  // -1000 µWh = 3.6 J
  EXPECT_NEAR(m->joules(), 3.6, 1e-9);
  t.write("class/power_supply/BAT1/energy_now", "40005000");  // charging: not energy used
  EXPECT_NEAR(m->joules(), 3.6, 1e-9);
}

TEST(EnergyMeter, AbsentAndUnreadableSourcesSaySo) {
  Tree t;
  auto none = EnergyMeter::open(t.root());
  EXPECT_FALSE(none->available());
  EXPECT_NE(none->absent_reason().find("powercap/intel-rapl"), std::string::npos) << none->absent_reason();
  EXPECT_DOUBLE_EQ(none->joules(), 0.0);

  t.write("class/powercap/intel-rapl:0/energy_uj", "1");
  chmod((t.root() + "/class/powercap/intel-rapl:0/energy_uj").c_str(), 0);
  if (geteuid() != 0) {  // root reads a mode-0 file anyway
    auto unreadable = EnergyMeter::open(t.root());
    EXPECT_FALSE(unreadable->available());
    EXPECT_NE(unreadable->absent_reason().find("not readable"), std::string::npos) << unreadable->absent_reason();
  }
}

TEST(EnergyMeter, SysfsRootFromEnvironment) {
  Tree t;
  t.write("class/powercap/intel-rapl:0/energy_uj", "7");
  setenv("EDGELM_SYSFS_ROOT", t.root().c_str(), 1);
  EXPECT_EQ(default_sysfs_root(), t.root());
  EXPECT_TRUE(EnergyMeter::open()->available());
  unsetenv("EDGELM_SYSFS_ROOT");
  EXPECT_EQ(default_sysfs_root(), "/sys");
}

}  // namespace
}  // namespace edgelm
