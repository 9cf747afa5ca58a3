// A fixed set of threads running posted tasks in order of arrival: where HTTP handlers run, so
// a handler that blocks (a generation waited on to its end) holds one of a known number of
// threads and never the IO thread.
//
// Invariants: post() never blocks; stop() runs every task already posted, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace edgelm::http {

class WorkerPool {
 public:
  explicit WorkerPool(int n_threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False (the task dropped) once stop() began.
  bool post(std::function<void()> task);
  // Tasks posted and not yet finished.
  size_t pending() const;
  void stop();

 private:
  void worker();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  size_t running_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace edgelm::http
