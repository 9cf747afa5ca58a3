// Process resource readings for reports (peak RSS) without any platform code elsewhere.
#pragma once

#include <cstdint>

namespace edgelm {

// Peak resident set size of this process in bytes (0 where the platform cannot tell).
uint64_t peak_rss_bytes();

}  // namespace edgelm
