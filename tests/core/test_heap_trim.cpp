// release_free_heap(): the pages of freed heap chunks that malloc keeps (free memory below a live
// chunk, which free() itself never returns) go back to the system. A serve of Gemma 4 E2B kept 43
// MB that way when the function had silently compiled to nothing (__GLIBC__ was tested before any
// libc header defined it).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/heap_trim.h"

namespace edgelm {
namespace {

// Resident bytes of this process (/proc/self/statm's second field, in pages).
long resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long size = 0, resident = 0;
  const int n = std::fscanf(f, "%ld %ld", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

TEST(HeapTrim, FreedChunksBelowALiveOneGoBackToTheSystem) {
#if !defined(__GLIBC__)
  GTEST_SKIP() << "SKIPPED: not glibc's malloc (release_free_heap is a no-op there)";
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "SKIPPED: a sanitizer's allocator owns the heap (release_free_heap is a no-op there)";
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  GTEST_SKIP() << "SKIPPED: a sanitizer's allocator owns the heap (release_free_heap is a no-op there)";
#endif
#endif
  constexpr size_t kChunk = 16 << 10, kChunks = 4096;  // 64 MiB in chunks under the mmap threshold
  std::vector<char*> chunks(kChunks);
  for (char*& c : chunks) {
    c = static_cast<char*>(std::malloc(kChunk));
    ASSERT_NE(c, nullptr);
    std::memset(c, 1, kChunk);
  }
  // One more chunk after them stays live: free() can then not hand them back as the top of the heap.
  char* pin = static_cast<char*>(std::malloc(kChunk));
  ASSERT_NE(pin, nullptr);
  std::memset(pin, 1, kChunk);
  for (char* c : chunks) std::free(c);
  const long before = resident_bytes();
  release_free_heap();
  const long after = resident_bytes();
  std::free(pin);
  ASSERT_GT(before, 0);
  EXPECT_GE(before - after, 48L << 20) << "resident " << before << " -> " << after << " bytes";
}

}  // namespace
}  // namespace edgelm
