// MappedFile's two ways into memory: a mapping, and a private copy read with pread
// (FileAccess::read, behind --no-mmap). The copy must hold the file's bytes and stay unchanged
// whatever happens to the file afterwards; a mapping sees a rewrite in place.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "core/mmap_file.h"
#include "support/test_data.h"

namespace edgelm {
namespace {

std::string pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed)) & 0xff);
  return s;
}

// Rewrites the file's bytes in place (same inode, same size), as `cp new old` or a careless
// editor would.
void overwrite_in_place(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

TEST(MappedFile, ReadHoldsTheBytesAndIgnoresLaterChangesToTheFile) {
  test::TempDir dir;
  const std::string path = dir.file("blob.bin");
  // Not a multiple of the page size, and several pages, so the tail and the loop both count.
  const std::string original = pattern(3 * 4096 + 123, 1);
  test::write_file(path, original);
  auto f = MappedFile::open(path, FileAccess::read);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_FALSE(f->maps_file());
  ASSERT_EQ(f->size(), original.size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), f->size()), original);
  overwrite_in_place(path, pattern(original.size(), 2));
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  ASSERT_EQ(std::remove(path.c_str()), 0);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), f->size()), original);
  // Moving keeps the copy alive in the new owner.
  MappedFile moved = std::move(f).value();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(moved.data()), moved.size()), original);
}

// The reason --no-mmap exists: a mapping shows an in-place rewrite of the file.
TEST(MappedFile, MapSeesAnInPlaceRewriteButNotARename) {
  test::TempDir dir;
  const std::string path = dir.file("blob.bin");
  const std::string original = pattern(2 * 4096, 3), changed = pattern(2 * 4096, 4);
  test::write_file(path, original);
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_TRUE(f->maps_file());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), f->size()), original);
  // A new file renamed over the path: the mapping keeps the old inode.
  test::write_file(dir.file("new.bin"), changed);
  ASSERT_EQ(std::rename(dir.file("new.bin").c_str(), path.c_str()), 0);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), f->size()), original);
  // Rewritten in place: the mapping changes under the reader.
  auto g = MappedFile::open(path);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(g->data()), g->size()), changed);
  overwrite_in_place(path, original);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(g->data()), g->size()), original);
}

TEST(MappedFile, ReadErrorsAndEmptyFiles) {
  test::TempDir dir;
  EXPECT_FALSE(MappedFile::open(dir.file("missing.bin"), FileAccess::read).ok());
  EXPECT_FALSE(MappedFile::open(dir.path(), FileAccess::read).ok());  // a folder
  test::write_file(dir.file("empty.bin"), "");
  auto e = MappedFile::open(dir.file("empty.bin"), FileAccess::read);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->size(), 0u);
}

}  // namespace
}  // namespace edgelm
