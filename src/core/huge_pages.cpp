#include "core/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

namespace edgelm {

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
  constexpr size_t kPage = 4096;
  if (data_ == nullptr || offset >= mapped_) return;
  const size_t begin = offset / kPage * kPage;
  const size_t end = std::min(mapped_, (offset + std::min(bytes, mapped_ - offset) + kPage - 1) / kPage * kPage);
#if defined(MADV_NOHUGEPAGE)
  if (end > begin) madvise(data_ + begin, end - begin, MADV_NOHUGEPAGE);  // best effort, as MADV_HUGEPAGE
#endif
}

bool HugePageBuffer::huge_pages(size_t offset, size_t bytes) {
#ifndef MADV_COLLAPSE
  constexpr int MADV_COLLAPSE = 25;  // linux/mman.h, 6.1
#endif
  constexpr size_t kPage = 4096;
  if (data_ == nullptr || offset >= mapped_ || bytes == 0) return false;
  const size_t begin = offset / kPage * kPage;
  const size_t end = std::min(mapped_, (offset + std::min(bytes, mapped_ - offset) + kPage - 1) / kPage * kPage);
#if defined(MADV_HUGEPAGE)
  if (madvise(data_ + begin, end - begin, MADV_HUGEPAGE) != 0) return false;
#endif
  const size_t first = (begin + kHugePage - 1) / kHugePage * kHugePage, last = end / kHugePage * kHugePage;
  return first < last && madvise(data_ + first, last - first, MADV_COLLAPSE) == 0;
}

void HugePageBuffer::prefault() {
  constexpr size_t kPage = 4096;  // the smallest page size; a huge page takes its first write only
  for (size_t i = 0; i < mapped_; i += kPage) {
    volatile std::byte* p = data_ + i;
    *p = *p;
  }
}

bool HugePageBuffer::populate(size_t offset, size_t bytes) {
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // linux/mman.h, 5.14
#endif
  constexpr size_t kPage = 4096;
  if (data_ == nullptr || offset >= mapped_ || bytes == 0) return false;
  const size_t begin = offset / kPage * kPage;
  const size_t end = std::min(mapped_, (offset + std::min(bytes, mapped_ - offset) + kPage - 1) / kPage * kPage);
  return madvise(data_ + begin, end - begin, MADV_POPULATE_WRITE) == 0;
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
