// Measures this machine's memory read bandwidth the way a decode step uses it: several
// threads streaming through a buffer far larger than the caches with the kernels' own F32
// dot product. Benchmarks report their
// achieved GB/s as a fraction of this number.
#pragma once

#include "core/thread_pool.h"

namespace edgelm::tools {

struct MemBandwidth {
  double gb_per_s = 0.0;   // best pass
  double median_gb_per_s = 0.0;
  size_t buffer_bytes = 0;
  int passes = 0;
};

MemBandwidth measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes = size_t{512} << 20, int passes = 7);

}  // namespace edgelm::tools
