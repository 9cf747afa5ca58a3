#include "tools/membw.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/huge_pages.h"
#include "core/timer.h"
#include "kernels/isa.h"

namespace edgelm::tools {

MemBandwidth measure_read_bandwidth(ThreadPool& pool, size_t buffer_bytes, int passes) {
  // The buffer is read by the active ISA's F32 dot product, i.e. the loads, prefetches and
  // vector width of the kernels themselves: the bandwidth a decode step can reach here. Each
  // 64 KiB chunk is dotted with itself (its second read hits L1), so memory is read once.
  constexpr size_t kChunk = 16384;  // floats
  const size_t n = std::max(kChunk, buffer_bytes / sizeof(float) / kChunk * kChunk);
  // In huge pages, as the packed weights are (core/huge_pages.h): the bus, not the TLB.
  HugePageBuffer mem = HugePageBuffer::allocate(n * sizeof(float)).value();
  float* buf = reinterpret_cast<float*>(mem.data());
  // Touch every page first (and with distinct values) so that no pass measures page faults
  // or the kernel's shared zero page.
  pool.parallel_for(n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) buf[i] = static_cast<float>(i % 1024) * 0.001f;
  });
  const kernels::VecDotFn dot =
      kernels::kernel_or_scalar(*kernels::isa_kernels(kernels::active_isa()), DType::f32).vec_dot;
  std::vector<double> rates;
  std::atomic<uint64_t> sink{0};
  for (int p = 0; p < passes; ++p) {
    Stopwatch watch;
    pool.parallel_for(n / kChunk, [&](size_t b, size_t e) {
      float acc = 0.0f;
      for (size_t c = b; c < e; ++c) acc += dot(static_cast<int64_t>(kChunk), &buf[c * kChunk], &buf[c * kChunk]);
      sink.fetch_add(static_cast<uint64_t>(acc), std::memory_order_relaxed);
    });
    rates.push_back(static_cast<double>(n * sizeof(float)) / watch.seconds() / 1e9);
  }
  MemBandwidth r;
  std::sort(rates.begin(), rates.end());
  r.gb_per_s = rates.back();
  r.median_gb_per_s = rates[rates.size() / 2];
  r.buffer_bytes = n * sizeof(float);
  r.passes = passes;
  volatile uint64_t keep = sink.load();  // keeps the reads observable
  (void)keep;
  return r;
}

}  // namespace edgelm::tools
