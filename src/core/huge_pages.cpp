#include "core/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace edgelm {
namespace {

constexpr size_t kPage = 4096;  // the smallest page size

// [begin, end) of [offset, offset + bytes) clamped to the `mapped` bytes and widened to whole
// small pages; empty (begin == end) when nothing of it is mapped.
struct PageSpan {
  size_t begin = 0, end = 0;
};
PageSpan page_span(size_t mapped, size_t offset, size_t bytes) {
  if (offset >= mapped || bytes == 0) return {};
  return {offset / kPage * kPage, std::min(mapped, (offset + std::min(bytes, mapped - offset) + kPage - 1) / kPage * kPage)};
}

}  // namespace

Result<HugePageBuffer> HugePageBuffer::allocate(size_t bytes) {
  HugePageBuffer b;
  if (bytes == 0) return b;
  if (bytes > SIZE_MAX - 2 * kHugePage) return make_error("cannot allocate {} bytes: too large", bytes);
  const size_t mapped = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  // Reserve one huge page more, then trim the ends so the region starts on a 2 MiB boundary.
  const size_t reserve = mapped + kHugePage;
  void* p = mmap(nullptr, reserve, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return make_error("cannot allocate {} bytes: {}", bytes, std::strerror(errno));
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t aligned = (base + kHugePage - 1) & ~(uintptr_t{kHugePage} - 1);
  if (aligned > base) munmap(p, aligned - base);
  const uintptr_t end = base + reserve, used_end = aligned + mapped;
  if (end > used_end) munmap(reinterpret_cast<void*>(used_end), end - used_end);
#if defined(MADV_HUGEPAGE)
  madvise(reinterpret_cast<void*>(aligned), mapped, MADV_HUGEPAGE);  // best effort (EINVAL without THP)
#endif
  b.data_ = reinterpret_cast<std::byte*>(aligned);
  b.size_ = bytes;
  b.mapped_ = mapped;
  return b;
}

void HugePageBuffer::small_pages(size_t offset, size_t bytes) {
  [[maybe_unused]] const PageSpan p = page_span(mapped_, offset, bytes);
#if defined(MADV_NOHUGEPAGE)
  if (p.end > p.begin) madvise(data_ + p.begin, p.end - p.begin, MADV_NOHUGEPAGE);  // best effort, as MADV_HUGEPAGE
#endif
}

bool HugePageBuffer::huge_pages(size_t offset, size_t bytes) {
#ifndef MADV_COLLAPSE
  constexpr int MADV_COLLAPSE = 25;  // linux/mman.h, 6.1
#endif
  const PageSpan p = page_span(mapped_, offset, bytes);
  if (p.end == p.begin) return false;
#if defined(MADV_HUGEPAGE)
  if (madvise(data_ + p.begin, p.end - p.begin, MADV_HUGEPAGE) != 0) return false;
#endif
  const size_t first = (p.begin + kHugePage - 1) / kHugePage * kHugePage, last = p.end / kHugePage * kHugePage;
  return first < last && madvise(data_ + first, last - first, MADV_COLLAPSE) == 0;
}

void HugePageBuffer::prefault() {
  // Each small page's first byte: a huge page takes its first write only.
  for (size_t i = 0; i < mapped_; i += kPage) {
    volatile std::byte* p = data_ + i;
    *p = *p;
  }
}

bool HugePageBuffer::populate(size_t offset, size_t bytes) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // linux/mman.h, 5.14
#endif
  const PageSpan p = page_span(mapped_, offset, bytes);
  return p.end > p.begin && madvise(data_ + p.begin, p.end - p.begin, MADV_POPULATE_WRITE) == 0;
}

HugePageBuffer::~HugePageBuffer() {
  if (data_ != nullptr) munmap(data_, mapped_);
}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& o) noexcept {
  if (this != &o) {
    if (data_ != nullptr) munmap(data_, mapped_);
    data_ = o.data_;
    size_ = o.size_;
    mapped_ = o.mapped_;
    o.data_ = nullptr;
    o.size_ = o.mapped_ = 0;
  }
  return *this;
}

}  // namespace edgelm
