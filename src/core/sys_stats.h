// Process resource readings for reports (peak RSS) without any platform code elsewhere.
#pragma once

#include <cstdint>

namespace edgelm {

// Peak resident set size of this process in bytes (0 where the platform cannot tell).
uint64_t peak_rss_bytes();

// User + system CPU seconds of process `pid` (0: this process) from /proc/PID/stat; 0 where it
// cannot be read (no such process, not Linux).
double process_cpu_seconds(int pid = 0);

}  // namespace edgelm
