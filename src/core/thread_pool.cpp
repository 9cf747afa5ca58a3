#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace edgelm {
namespace {
// How long a worker spins on the next job before it sleeps, and how long the caller spins on the
// workers' last chunks before it yields. The serial parts between two matmuls of a step (norms,
// RoPE, the attention merge, sampling at the end of a token) take up to tens of microseconds;
// a worker asleep by then costs a futex wake and a context switch on both sides (measured: 8% of
// a 2-thread decode step in the scheduler). An idle pool sleeps after this long.
constexpr auto kSpinTime = std::chrono::microseconds(300);

// One iteration of a spin-wait: tells the core (and an SMT sibling) that this is a wait loop.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Spins until done() or kSpinTime has passed (the clock is read every 64 iterations); true if done.
template <typename Done>
bool spin_until(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}
// Chunks per thread that parallel_for deals out on demand: a thread that is descheduled (a
// busy edge box, a shared VM) or slower on its share leaves its remaining chunks to the others
// instead of holding every thread at the end of the loop. Measured with decode on 2 threads.
constexpr size_t kChunksPerThread = 4;
thread_local int t_thread_index = 0;
}

namespace {

// Best effort: a CPU that cannot be used (cgroup limits) leaves the thread unpinned.
void pin_to_cpu(std::thread::native_handle_type thread, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(thread, sizeof set, &set);
}

}  // namespace

ThreadPool::ThreadPool(int n_threads, const std::vector<int>& cpus) {
  const int n_workers = std::max(0, n_threads - 1);
  workers_.reserve(static_cast<size_t>(n_workers));
  for (int i = 0; i < n_workers; ++i) workers_.emplace_back([this, i] { worker_loop(i + 1); });
  if (!cpus.empty()) {
    pin_to_cpu(pthread_self(), cpus[0]);
    for (size_t i = 0; i < workers_.size(); ++i) pin_to_cpu(workers_[i].native_handle(), cpus[(i + 1) % cpus.size()]);
  }
}

Result<std::vector<int>> ThreadPool::parse_cpu_list(std::string_view spec) {
  std::vector<int> cpus;
  const int n_cpus = static_cast<int>(std::thread::hardware_concurrency());
  size_t pos = 0;
  while (pos <= spec.size()) {
    const size_t comma = std::min(spec.find(',', pos), spec.size());
    const std::string item(spec.substr(pos, comma - pos));
    int lo = 0, hi = 0;
    char dash = 0, extra = 0;
    const int n = std::sscanf(item.c_str(), "%d%c%d%c", &lo, &dash, &hi, &extra);
    if (n == 1) {
      hi = lo;
    } else if (!(n == 3 && dash == '-')) {
      return make_error("bad CPU list '{}': expected items like 0 or 2-3 separated by commas", spec);
    }
    if (lo < 0 || hi < lo || hi >= n_cpus)
      return make_error("bad CPU list '{}': CPUs must be in 0-{} and ranges ascending", spec, n_cpus - 1);
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    pos = comma + 1;
  }
  return cpus;
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::hardware_threads() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

void ThreadPool::run_chunks() {
  const size_t n = job_n_, n_chunks = job_chunks_;
  for (size_t c = next_chunk_.fetch_add(1, std::memory_order_relaxed); c < n_chunks;
       c = next_chunk_.fetch_add(1, std::memory_order_relaxed)) {
    const size_t begin = n * c / n_chunks, end = n * (c + 1) / n_chunks;
    if (begin < end) (*job_)(begin, end);
  }
}

void ThreadPool::parallel_for(size_t n, FunctionRef<void(size_t, size_t)> fn) {
  if (n == 0) return;
  if (workers_.empty() || n == 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    job_chunks_ = std::min(n, static_cast<size_t>(n_threads()) * kChunksPerThread);
    next_chunk_.store(0, std::memory_order_relaxed);
    pending_.store(static_cast<int>(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks();
  auto all_done = [this] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(all_done))
    while (!all_done()) std::this_thread::yield();  // a worker descheduled mid-chunk
}

int ThreadPool::thread_index() { return t_thread_index; }

void ThreadPool::worker_loop(int index) {
  t_thread_index = index;
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until([&] { return generation_.load(std::memory_order_acquire) != seen; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
    }
    bool stop = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      seen = generation_.load(std::memory_order_acquire);
      stop = stop_;
    }
    if (stop) return;
    run_chunks();
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace edgelm
