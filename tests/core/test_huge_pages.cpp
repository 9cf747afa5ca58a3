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

TEST(HugePages, PopulateCommitsTheRangeAndKeepsTheContents) {
  constexpr size_t kBytes = 3 * HugePageBuffer::kHugePage;
  auto b = HugePageBuffer::allocate(kBytes);
  ASSERT_TRUE(b.ok()) << b.error().message;
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  b->data()[2 * HugePageBuffer::kHugePage + 7] = std::byte{0x33};
  if (!b->populate(HugePageBuffer::kHugePage + page, 2 * page)) GTEST_SKIP() << "no MADV_POPULATE_WRITE";
  // The range's pages are committed (with THP, its whole 2 MiB page); the first 2 MiB are not.
  EXPECT_GE(resident_pages(b->data() + HugePageBuffer::kHugePage + page, 2 * page), 2u);
  EXPECT_EQ(resident_pages(b->data(), HugePageBuffer::kHugePage), 0u);
  EXPECT_TRUE(b->populate(0, kBytes + 12345));  // clamped to the buffer
  EXPECT_EQ(resident_pages(b->data(), kBytes), kBytes / page);
  for (size_t i = 0; i < kBytes; i += 4093)
    ASSERT_EQ(b->data()[i], i == 2 * HugePageBuffer::kHugePage + 7 ? std::byte{0x33} : std::byte{0}) << i;
  EXPECT_EQ(b->data()[2 * HugePageBuffer::kHugePage + 7], std::byte{0x33});
  EXPECT_FALSE(b->populate(kBytes + HugePageBuffer::kHugePage, page));  // past the end: nothing
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
