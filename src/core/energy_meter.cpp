// Energy readings from sysfs: RAPL counters or a power supply (see energy_meter.h).
#include "core/energy_meter.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

namespace edgelm {
namespace {

namespace fs = std::filesystem;

std::optional<double> read_number(const fs::path& path) {
  std::ifstream in(path);
  double v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

std::string read_word(const fs::path& path) {
  std::ifstream in(path);
  std::string s;
  in >> s;
  return s;
}

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// "intel-rapl:0" is a package; "intel-rapl:0:1" is a part of one.
bool is_rapl_package(const std::string& name) {
  return name.rfind("intel-rapl:", 0) == 0 && std::count(name.begin(), name.end(), ':') == 1;
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string default_sysfs_root() {
  const char* env = std::getenv("EDGELM_SYSFS_ROOT");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string("/sys");
}

std::unique_ptr<EnergyMeter> EnergyMeter::open(const std::string& sysfs_root, double now_s) {
  std::unique_ptr<EnergyMeter> m(new EnergyMeter());
  const fs::path root(sysfs_root);
  std::string unreadable;
  for (const fs::path& zone : sorted_entries(root / "class" / "powercap")) {
    const std::string name = zone.filename().string();
    if (!is_rapl_package(name)) continue;
    const auto now = read_number(zone / "energy_uj");
    if (!now) {
      unreadable = (zone / "energy_uj").string();
      continue;
    }
    Zone z;
    z.energy_path = (zone / "energy_uj").string();
    z.max_range_uj = static_cast<uint64_t>(read_number(zone / "max_energy_range_uj").value_or(0));
    z.last_uj = static_cast<uint64_t>(*now);
    const std::string label = read_word(zone / "name");
    m->source_ += (m->zones_.empty() ? "rapl: " : ", ") + name + (label.empty() ? "" : " (" + label + ")");
    m->zones_.push_back(std::move(z));
  }
  if (!m->zones_.empty()) {
    m->kind_ = Kind::rapl;
    return m;
  }
  for (const fs::path& supply : sorted_entries(root / "class" / "power_supply")) {
    for (const char* file : {"power_now", "energy_now"}) {
      const auto v = read_number(supply / file);
      if (!v) continue;
      m->kind_ = std::string(file) == "power_now" ? Kind::power_now : Kind::energy_now;
      m->supply_path_ = (supply / file).string();
      m->last_value_ = *v;
      m->last_time_s_ = now_s >= 0 ? now_s : steady_seconds();
      m->source_ = "power_supply: " + supply.filename().string() + " " + file;
      return m;
    }
  }
  m->absent_reason_ = unreadable.empty()
                          ? "no " + (root / "class/powercap/intel-rapl:*").string() + " and no " +
                                (root / "class/power_supply/*").string() + " with power_now or energy_now"
                          : unreadable + " is not readable (RAPL counters are root-only on recent kernels)";
  return m;
}

double EnergyMeter::joules() { return joules_at(steady_seconds()); }

double EnergyMeter::joules_at(double now_s) {
  std::lock_guard lock(mutex_);
  switch (kind_) {
    case Kind::none: break;
    case Kind::rapl:
      for (Zone& z : zones_) {
        const auto v = read_number(z.energy_path);
        if (!v) continue;  // a transient read failure: the next read catches up
        const auto now = static_cast<uint64_t>(*v);
        uint64_t delta = 0;
        if (now >= z.last_uj)
          delta = now - z.last_uj;
        else if (z.max_range_uj >= z.last_uj)
          delta = z.max_range_uj - z.last_uj + now;
        total_j_ += static_cast<double>(delta) * 1e-6;
        z.last_uj = now;
      }
      break;
    case Kind::power_now: {
      const auto v = read_number(supply_path_);
      if (!v) break;
      const double dt = std::max(0.0, now_s - last_time_s_);
      total_j_ += 0.5 * (last_value_ + *v) * 1e-6 * dt;  // µW * s
      last_value_ = *v;
      last_time_s_ = now_s;
      break;
    }
    case Kind::energy_now: {
      const auto v = read_number(supply_path_);
      if (!v) break;
      if (*v < last_value_) total_j_ += (last_value_ - *v) * 3.6e-3;  // µWh -> J
      last_value_ = *v;
      last_time_s_ = now_s;
      break;
    }
  }
  return total_j_;
}

}  // namespace edgelm
