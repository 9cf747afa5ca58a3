// HugePageBuffer: 2 MiB alignment, zero-filled memory committed lazily, and prefault() committing
// every page at once without changing the contents. Residency is read with mincore(), which
// reports the pages the process has in its page tables.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "core/huge_pages.h"

namespace edgelm {
namespace {

// Resident pages (of the system's page size) of [p, p + bytes), p page-aligned.
size_t resident_pages(const std::byte* p, size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> v((bytes + page - 1) / page);
  EXPECT_EQ(mincore(const_cast<std::byte*>(p), bytes, v.data()), 0);
  size_t n = 0;
  for (const unsigned char c : v) n += c & 1;
  return n;
}

TEST(HugePages, PrefaultCommitsEveryPageAndKeepsTheContents) {
  constexpr size_t kBytes = 3 * HugePageBuffer::kHugePage;
  auto b = HugePageBuffer::allocate(kBytes);
  ASSERT_TRUE(b.ok()) << b.error().message;
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % HugePageBuffer::kHugePage, 0u);
  EXPECT_EQ(resident_pages(b->data(), kBytes), 0u) << "a fresh buffer is committed lazily";

  // One written byte commits its page (with THP, its whole 2 MiB page) and nothing beyond.
  b->data()[page + 5] = std::byte{0x5a};
  const size_t after_write = resident_pages(b->data(), kBytes);
  EXPECT_GE(after_write, 1u);
  EXPECT_LE(after_write, HugePageBuffer::kHugePage / page);

  b->prefault();
  EXPECT_EQ(resident_pages(b->data(), kBytes), kBytes / page);
  for (size_t i = 0; i < kBytes; i += 4093)  // the contents: still zero but for the one byte
    ASSERT_EQ(b->data()[i], i == page + 5 ? std::byte{0x5a} : std::byte{0}) << i;
  EXPECT_EQ(b->data()[page + 5], std::byte{0x5a});
}

TEST(HugePages, PrefaultOfAnEmptyBufferDoesNothing) {
  auto b = HugePageBuffer::allocate(0);
  ASSERT_TRUE(b.ok());
  b->prefault();
  EXPECT_EQ(b->data(), nullptr);
  HugePageBuffer moved_from = std::move(*b);
  b->prefault();  // a moved-from buffer holds nothing either
}

}  // namespace
}  // namespace edgelm
