#include <gtest/gtest.h>

#include <atomic>
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
