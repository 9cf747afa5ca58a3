#include "tools/membw.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "core/timer.h"

namespace edgelm::tools {

MemBandwidth measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes, int passes) {
  const size_t n = buffer_bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  // Touch every page first (and with distinct values) so that no pass measures page faults
  // or the kernel's shared zero page.
  pool.parallel_for(n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) buf[i] = i * 0x9e3779b97f4a7c15ull;
  });
  std::vector<double> rates;
  std::atomic<uint64_t> sink{0};
  for (int p = 0; p < passes; ++p) {
    Stopwatch watch;
    pool.parallel_for(n, [&](size_t b, size_t e) {
      // Four independent accumulators keep the adds off the critical path; XOR cannot be
      // optimized away because the result is stored.
      uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      size_t i = b;
      for (; i + 4 <= e; i += 4) {
        a0 ^= buf[i];
        a1 ^= buf[i + 1];
        a2 ^= buf[i + 2];
        a3 ^= buf[i + 3];
      }
      for (; i < e; ++i) a0 ^= buf[i];
      sink.fetch_xor(a0 ^ a1 ^ a2 ^ a3, std::memory_order_relaxed);
    });
    rates.push_back(static_cast<double>(n * sizeof(uint64_t)) / watch.seconds() / 1e9);
  }
  MemBandwidth r;
  std::sort(rates.begin(), rates.end());
  r.gb_per_s = rates.back();
  r.median_gb_per_s = rates[rates.size() / 2];
  r.buffer_bytes = n * sizeof(uint64_t);
  r.passes = passes;
  volatile uint64_t keep = sink.load();  // keeps the reads observable
  (void)keep;
  return r;
}

}  // namespace edgelm::tools
