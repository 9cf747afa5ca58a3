#include "support/counting_new.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<int64_t> g_n_allocs{0};

void* counted_malloc(size_t n) {
  g_n_allocs.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
}  // namespace

namespace edgelm::test {
int64_t heap_allocations() { return g_n_allocs.load(std::memory_order_relaxed); }
}  // namespace edgelm::test

// Not inlined: GCC would otherwise warn about free() on memory from operator new at every
// inlined call site.
__attribute__((noinline)) void* operator new(size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void* operator new[](size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void* operator new(size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
__attribute__((noinline)) void* operator new[](size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, size_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
