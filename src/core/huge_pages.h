// HugePageBuffer: a large anonymous allocation aligned to 2 MiB on which the kernel is asked for
// transparent huge pages (madvise MADV_HUGEPAGE).
//
// Why: the engine streams hundreds of MB per decode step (the packed weights) and walks the KV
// cache block by block. With 4 KiB pages every page is a TLB miss and a point where the
// hardware prefetchers stop and ramp up again; with 2 MiB pages a matrix is a few pages. Most
// distributions set THP to "madvise", where only regions that ask get huge pages; measured on
// TinyLlama Q4_0 decode (2 threads) at about +13% tokens/s.
//
// Invariants: data() is 2 MiB-aligned (64-byte alignment for any SIMD load follows); the memory
// is zero-filled and committed lazily, page by page, on first touch (prefault() commits it all
// at once); best effort: where THP is off ("never") or the kernel lacks it, the buffer simply
// has small pages. small_pages() takes ranges back to 4 KiB pages where a huge page would commit
// far more than is used (the first blocks of each KV layer region). Move-only.
#pragma once

#include <cstddef>

#include "core/result.h"

namespace edgelm {

class HugePageBuffer {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;

  HugePageBuffer() = default;
  // Error when the address space cannot be reserved (mmap fails), naming the size.
  static Result<HugePageBuffer> allocate(size_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& o) noexcept : data_(o.data_), size_(o.size_), mapped_(o.mapped_) {
    o.data_ = nullptr;
    o.size_ = o.mapped_ = 0;
  }
  HugePageBuffer& operator=(HugePageBuffer&& o) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  // Commits every page now (each 4 KiB page's first byte written back to itself: the contents
  // stay as they are), so that later accesses take no first-touch faults: each zeroes a whole 2
  // MiB page, and on a VM whose host backs guest memory lazily it costs milliseconds more.
  void prefault();
  // Commits the pages of [offset, offset + bytes) (clamped to the buffer) without changing any
  // byte (madvise MADV_POPULATE_WRITE), so it may run on another thread while the buffer is in
  // use; false (nothing done) where the kernel lacks it (before Linux 5.14): only a hint.
  bool populate(size_t offset, size_t bytes);

  // Asks for 4 KiB pages on [offset, offset + bytes) (clamped to the buffer, widened to whole 4
  // KiB pages): a first touch there commits 4 KiB, not 2 MiB. For a region whose first pages are
  // all a short use touches (e.g. each KV layer's first blocks), so that memory grows with use;
  // beyond the range the huge pages stay. Best effort, like the huge-page advice itself.
  void small_pages(size_t offset, size_t bytes);
  // Undoes small_pages on [offset, offset + bytes) (clamped, widened to whole 4 KiB pages) and
  // collapses the 2 MiB pages inside the range into huge pages now, contents kept
  // (MADV_COLLAPSE, Linux 6.1): for a small-page region whose use has grown past it. A frame
  // collapses only when one small_pages range covers all of it (the kernel needs it inside one
  // mapping). Best effort: false when a frame stays in small pages (no THP, an older kernel, a
  // transient failure), and khugepaged may still collapse it later.
  bool huge_pages(size_t offset, size_t bytes);

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }  // the bytes asked for

 private:
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // size_ rounded up to whole huge pages
};

}  // namespace edgelm
