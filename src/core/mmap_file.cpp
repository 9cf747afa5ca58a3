#include "core/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace edgelm {
namespace {

// Fills `dst` with the file's first `size` bytes. The file must not have shrunk since fstat.
Status read_all(int fd, uint8_t* dst, size_t size, const std::string& path) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, dst + done, size - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error("cannot read '{}': {}", path, std::strerror(errno));
    }
    if (n == 0) return make_error("cannot read '{}': the file shrank to {} bytes while being read", path, done);
    done += static_cast<size_t>(n);
  }
  return ok_status();
}

}  // namespace

Result<MappedFile> MappedFile::open(const std::string& path, FileAccess access) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error("cannot stat '{}': {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error("'{}' is not a regular file", path);
  }
  MappedFile f;
  f.path_ = path;
  f.size_ = static_cast<size_t>(st.st_size);
  f.maps_file_ = access == FileAccess::map;
  if (f.size_ > 0) {
    // Both modes hold a mapping, so one munmap releases either; the anonymous one is
    // page-aligned like the file mapping, which the tensor alignment checks rely on.
    void* p = access == FileAccess::map
                  ? ::mmap(nullptr, f.size_, PROT_READ, MAP_PRIVATE, fd, 0)
                  : ::mmap(nullptr, f.size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return make_error("cannot {} '{}' ({} bytes): {}", access == FileAccess::map ? "mmap" : "allocate memory for",
                        path, f.size_, std::strerror(err));
    }
    f.data_ = static_cast<const uint8_t*>(p);
    if (access == FileAccess::read) {
      Status st_read = read_all(fd, static_cast<uint8_t*>(p), f.size_, path);
      if (!st_read.ok()) {
        ::close(fd);
        return st_read.error();  // f's destructor unmaps
      }
      ::mprotect(p, f.size_, PROT_READ);  // the same read-only contract as the file mapping
    }
  }
  ::close(fd);
  return f;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      maps_file_(std::exchange(other.maps_file_, false)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    maps_file_ = std::exchange(other.maps_file_, false);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace edgelm
