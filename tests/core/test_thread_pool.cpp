#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace edgelm {
namespace {

// Every index is visited exactly once, whatever the split, over many back-to-back jobs (the
// pool's spin/sleep hand-off is exercised between them).
TEST(ThreadPool, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.n_threads(), threads);
    for (size_t n : {0u, 1u, 2u, 7u, 64u, 1001u}) {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, [&](size_t b, size_t e) {
          ASSERT_LE(b, e);
          for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
        });
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
      }
    }
  }
}

TEST(ThreadPool, ChunksAreBalanced) {
  ThreadPool pool(4);
  std::atomic<size_t> max_chunk{0}, min_chunk{1000};
  pool.parallel_for(102, [&](size_t b, size_t e) {
    size_t len = e - b, cur = max_chunk.load();
    while (len > cur && !max_chunk.compare_exchange_weak(cur, len)) {}
    cur = min_chunk.load();
    while (len < cur && !min_chunk.compare_exchange_weak(cur, len)) {}
  });
  EXPECT_LE(max_chunk.load() - min_chunk.load(), 1u);
}

// A thread held up in its chunk does not hold the rest of the loop: the other threads take the
// remaining chunks. Item 0 waits until more items are done than the other threads would have
// with one fixed chunk per thread (n - n / threads), which then would never happen: the held
// thread's own later items would wait behind it.
TEST(ThreadPool, OthersTakeTheChunksOfAThreadThatFallsBehind) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    const size_t n = 64;
    std::atomic<size_t> done{0};
    std::atomic<bool> timed_out{false};
    pool.parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) {
        if (i == 0) {
          const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          while (done.load() <= n - n / static_cast<size_t>(threads) && !timed_out) {
            if (std::chrono::steady_clock::now() > deadline) timed_out = true;
            std::this_thread::yield();
          }
        }
        done.fetch_add(1);
      }
    });
    EXPECT_FALSE(timed_out.load()) << threads << " threads: the other chunks were not taken";
    EXPECT_EQ(done.load(), n);
  }
}

TEST(ThreadPool, SleepsAndWakesAfterIdle) {
  ThreadPool pool(3);
  std::atomic<int> sum{0};
  for (int rep = 0; rep < 3; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers go to sleep
    pool.parallel_for(3, [&](size_t b, size_t e) { sum += static_cast<int>(e - b); });
  }
  EXPECT_EQ(sum.load(), 9);
}

}  // namespace
}  // namespace edgelm
