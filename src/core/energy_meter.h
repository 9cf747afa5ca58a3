// Energy used by this machine, where its sysfs can tell: RAPL package counters
// (<root>/class/powercap/intel-rapl:N/energy_uj, as on Intel and AMD x86) or a power supply's
// reading (<root>/class/power_supply/*/power_now in µW, else energy_now in µWh, as on laptops
// and battery-powered boards). <root> is $EDGELM_SYSFS_ROOT when set, else /sys, so the reader
// can be pointed at a fixture tree.
//
// Invariants: joules() is monotone (a RAPL counter that wrapped since the previous read adds
// max_energy_range_uj - last + now; more than one wrap between reads, hours at package power,
// is undercounted); only top-level RAPL zones (intel-rapl:N, not the sub-zones intel-rapl:N:M
// that are parts of a package) are summed, so nothing is counted twice. A power_now source is
// integrated between reads (trapezoid), so a caller that wants a fine figure reads often; an
// energy_now source counts only the drops of the stored energy (while discharging). RAPL
// counts the whole package, not one process: per-process figures are an upper bound on a busy
// machine. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace edgelm {

// $EDGELM_SYSFS_ROOT when set and not empty, else "/sys".
std::string default_sysfs_root();

class EnergyMeter {
 public:
  // The first source found under `sysfs_root`: RAPL, else a power supply. Never fails: an
  // absent or unreadable source gives a meter with available() false and a reason.
  // `now_s`: the start time on the clock of joules_at() (negative: the steady clock's now).
  static std::unique_ptr<EnergyMeter> open(const std::string& sysfs_root = default_sysfs_root(), double now_s = -1);

  bool available() const { return kind_ != Kind::none; }
  // "rapl: intel-rapl:0 (package-0)" / "power_supply: BAT0 power_now"; empty when absent.
  const std::string& source() const { return source_; }
  // Why there is no source ("no /sys/class/powercap/intel-rapl:* and no power_supply with
  // power_now or energy_now"), empty when available.
  const std::string& absent_reason() const { return absent_reason_; }

  // Joules used since open(); 0 when not available.
  double joules();
  // The same with the caller's clock (seconds on any fixed origin; the tests' clock).
  double joules_at(double now_s);

 private:
  enum class Kind { none, rapl, power_now, energy_now };
  struct Zone {
    std::string energy_path;
    uint64_t max_range_uj = 0;  // 0: unknown (a decrease is then ignored)
    uint64_t last_uj = 0;
  };
  EnergyMeter() = default;

  std::mutex mutex_;
  Kind kind_ = Kind::none;
  std::string source_, absent_reason_;
  std::vector<Zone> zones_;  // rapl
  std::string supply_path_;  // power_now / energy_now file
  double last_value_ = 0;    // power_now: µW; energy_now: µWh
  double last_time_s_ = 0;
  double total_j_ = 0;
};

}  // namespace edgelm
