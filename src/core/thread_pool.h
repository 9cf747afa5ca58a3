// A fixed pool of worker threads for data-parallel loops inside one forward pass.
//
// parallel_for splits [0, n) into a few contiguous chunks per thread (in order, of equal item
// counts) that the threads, the caller's included, claim one at a time as they finish the last,
// so a thread that falls behind (descheduled, or its chunk costs more) does not hold the
// others. Which thread runs a chunk is not fixed: fn must not depend on it, and results must
// depend only on the items (every caller computes each item independently). Workers spin (with a pause
// instruction) for up to 300 us on the next job before sleeping, and the caller spins on the
// workers' last chunks: the serial parts between two matmuls of a step last microseconds, and a
// futex wake plus two context switches per matmul would cost more than the spin. Not reentrant: one parallel_for at a time per pool. Dispatch never
// allocates: the job is a FunctionRef (core/function_ref.h) to the caller's callable, which
// lives on the caller's stack until parallel_for returns.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>
#include <string_view>
#include <vector>

#include "core/function_ref.h"
#include "core/result.h"

namespace edgelm {

class ThreadPool {
 public:
  // n_threads counts the caller: 1 means no worker threads at all. With `cpus` non-empty,
  // thread i (0 = the caller) is pinned to cpus[i % cpus.size()]: on a busy edge box, keeping
  // the decode threads on isolated cores removes the latency spikes of migrations.
  explicit ThreadPool(int n_threads, const std::vector<int>& cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n); returns when all are done.
  void parallel_for(size_t n, FunctionRef<void(size_t begin, size_t end)> fn);

  // The calling thread's index in the pool whose job it is running: i for worker i (1..), 0 for
  // any other thread (the one that calls parallel_for). For per-thread scratch that the caller
  // sizes before the loop.
  static int thread_index();

  // Number of hardware threads, at least 1.
  static int hardware_threads();

  // Parses a CPU list such as "0,2-3" (error on bad syntax or CPUs this machine lacks).
  static Result<std::vector<int>> parse_cpu_list(std::string_view spec);

 private:
  void worker_loop(int index);
  void run_chunks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  bool stop_ = false;
  // Current job; written by the caller before generation_ is bumped.
  const FunctionRef<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0;
  size_t job_chunks_ = 0;
  std::atomic<size_t> next_chunk_{0};
};

}  // namespace edgelm
