#include "http/worker_pool.h"

#include <algorithm>

namespace edgelm::http {

WorkerPool::WorkerPool(int n_threads) {
  const int n = std::max(1, n_threads);
  threads_.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { worker(); });
}

WorkerPool::~WorkerPool() { stop(); }

bool WorkerPool::post(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

size_t WorkerPool::pending() const {
  std::lock_guard lock(mu_);
  return tasks_.size() + running_;
}

void WorkerPool::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void WorkerPool::worker() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and everything posted ran
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
    }
    task();
    std::lock_guard lock(mu_);
    --running_;
  }
}

}  // namespace edgelm::http
