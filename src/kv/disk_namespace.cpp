#include "kv/disk_namespace.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace edgelm::kv {

DiskNamespace& DiskNamespace::add(std::string_view name, std::string_view value) {
  const uint64_t sizes[2] = {name.size(), value.size()};
  h_.update(sizes, sizeof sizes);
  h_.update(name.data(), name.size());
  h_.update(value.data(), value.size());
  return *this;
}

DiskNamespace& DiskNamespace::add(std::string_view name, uint64_t value) {
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>(value >> (8 * i));
  return add(name, std::string_view(buf, 8));
}

Result<uint64_t> file_content_hash(const std::string& path, const std::string& note_dir) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return make_error("{}: {}", path, std::strerror(errno));
  const uint64_t id[5] = {
      static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
      static_cast<uint64_t>(st.st_mtim.tv_sec) * 1000000000ull + static_cast<uint64_t>(st.st_mtim.tv_nsec),
      static_cast<uint64_t>(st.st_ctim.tv_sec) * 1000000000ull + static_cast<uint64_t>(st.st_ctim.tv_nsec)};
  const std::string note =
      note_dir.empty() ? std::string() : fmt::format("{}/model-{:016x}.hash", note_dir, xxh64(id, sizeof id));
  if (!note.empty()) {
    const int fd = ::open(note.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      char buf[17] = {};
      const ssize_t n = ::read(fd, buf, 16);
      ::close(fd);
      char* end = nullptr;
      const uint64_t v = std::strtoull(buf, &end, 16);
      if (n == 16 && end == buf + 16) return v;
    }
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("{}: {}", path, std::strerror(errno));
  std::vector<char> buf(size_t{8} << 20);
  Xxh64 h(0);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return make_error("{}: {}", path, std::strerror(e));
    }
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  const uint64_t v = h.digest();
  if (!note.empty()) {
    const std::string tmp = fmt::format("{}.tmp-{}", note, ::getpid());
    const int out = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (out >= 0) {
      const std::string text = fmt::format("{:016x}", v);
      const bool ok = ::write(out, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fsync(out) == 0;
      ::close(out);
      if (!ok || ::rename(tmp.c_str(), note.c_str()) != 0) ::unlink(tmp.c_str());
    }
  }
  return v;
}

}  // namespace edgelm::kv
