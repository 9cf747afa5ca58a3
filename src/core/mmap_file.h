// A whole file's bytes in memory, read-only. By default the file is mapped: model weights are
// used in place from the mapping, so loading a model costs page faults, not copies. With
// FileAccess::read the file is instead read (pread) into anonymous memory and closed.
//
// Invariants: data() stays valid and unchanged for the object's lifetime, except that a mapped
// file shrunk or rewritten in place on disk shows through (a page past the new end is SIGBUS on
// access). Replacing the file by rename never affects a mapping (it keeps the old inode), and
// nothing done to the file affects a read one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/result.h"

namespace edgelm {

enum class FileAccess {
  map,   // mmap(MAP_PRIVATE): lazy, shares the page cache, the kernel may drop clean pages
  read,  // pread into private anonymous memory: the file's size in RAM up front, a full read
};

class MappedFile {
 public:
  static Result<MappedFile> open(const std::string& path, FileAccess access = FileAccess::map);

  MappedFile() = default;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // False for FileAccess::read: the bytes are a private copy, no longer tied to the file.
  bool maps_file() const { return maps_file_; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  bool maps_file_ = false;
  std::string path_;
};

}  // namespace edgelm
