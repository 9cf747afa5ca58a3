#include "kv/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "core/log.h"
#include "core/xxhash64.h"

namespace edgelm::kv {
namespace {

constexpr char kMagic[8] = {'E', 'D', 'G', 'K', 'V', 'B', 'L', 'K'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr size_t kChecksumAt = 56;  // the header's last field

void put32(std::byte* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
void put64(std::byte* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}
uint32_t get32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint32_t>(p[i]);
  return v;
}
uint64_t get64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint64_t>(p[i]);
  return v;
}

// Tokens as little-endian i32 bytes.
std::vector<std::byte> token_bytes(const std::vector<int32_t>& tokens) {
  std::vector<std::byte> out(tokens.size() * 4);
  for (size_t i = 0; i < tokens.size(); ++i) put32(out.data() + 4 * i, static_cast<uint32_t>(tokens[i]));
  return out;
}

uint64_t checksum(const std::byte* header, const std::vector<std::byte>& toks, const std::byte* payload, size_t n) {
  std::byte h[kHeaderBytes];
  std::memcpy(h, header, kHeaderBytes);
  put64(h + kChecksumAt, 0);
  Xxh64 x(0);
  x.update(h, kHeaderBytes);
  x.update(toks.data(), toks.size());
  x.update(payload, n);
  return x.digest();
}

bool write_all(int fd, const std::byte* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly the pieces' bytes from `at` on (preadv, resumed after a short read).
bool preadv_all(int fd, std::vector<iovec>& iov, off_t at) {
  size_t i = 0;
  while (i < iov.size()) {
    const int cnt = static_cast<int>(std::min<size_t>(iov.size() - i, IOV_MAX));
    ssize_t r = ::preadv(fd, iov.data() + i, cnt, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    at += r;
    while (i < iov.size() && static_cast<size_t>(r) >= iov[i].iov_len) r -= static_cast<ssize_t>(iov[i++].iov_len);
    if (r > 0) {
      iov[i].iov_base = static_cast<std::byte*>(iov[i].iov_base) + r;
      iov[i].iov_len -= static_cast<size_t>(r);
    }
  }
  return true;
}

bool read_all(int fd, std::byte* p, size_t n, off_t at) {
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, at);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
    at += r;
  }
  return true;
}

bool is_hex16(const std::string& s, size_t at) {
  if (s.size() < at + 16) return false;
  for (size_t i = at; i < at + 16; ++i)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
  return true;
}

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

bool parse_block_file_name(const std::string& name, uint64_t* ns, uint64_t* hash, DiskKind* kind) {
  if (name.size() != 16 + 1 + 16 + 4 || name[16] != '-') return false;
  const bool kv = name.compare(33, 4, ".kvb") == 0, state = name.compare(33, 4, ".kvs") == 0;
  if (!(kv || state) || !is_hex16(name, 0) || !is_hex16(name, 17)) return false;
  *ns = std::stoull(name.substr(0, 16), nullptr, 16);
  *hash = std::stoull(name.substr(17, 16), nullptr, 16);
  if (kind != nullptr) *kind = kv ? DiskKind::kv : DiskKind::state;
  return true;
}

DiskTier::DiskTier(DiskTierOptions opts) : opts_(std::move(opts)) {}

Result<std::unique_ptr<DiskTier>> DiskTier::open(DiskTierOptions opts) {
  if (opts.dir.empty()) return make_error("--kv-disk: the directory is empty");
  if (opts.max_bytes == 0) return make_error("--kv-disk-size must be > 0");
  std::error_code ec;
  if (!std::filesystem::exists(opts.dir, ec)) {
    std::filesystem::create_directories(opts.dir, ec);
    if (ec) return make_error("--kv-disk {}: cannot create the directory: {}", opts.dir, ec.message());
    ::chmod(opts.dir.c_str(), 0700);
  }
  if (!std::filesystem::is_directory(opts.dir, ec)) return make_error("--kv-disk {}: not a directory", opts.dir);
  std::unique_ptr<DiskTier> t(new DiskTier(std::move(opts)));
  t->dir_fd_ = ::open(t->opts_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (t->dir_fd_ < 0) return make_error("--kv-disk {}: {}", t->opts_.dir, std::strerror(errno));
  if (::faccessat(t->dir_fd_, ".", W_OK, 0) != 0)
    return make_error("--kv-disk {}: not writable: {}", t->opts_.dir, std::strerror(errno));
  // A write past RLIMIT_FSIZE must fail with EFBIG (tier off), not kill the server.
  std::signal(SIGXFSZ, SIG_IGN);
  EDGELM_TRY_STATUS(t->scan());
  t->stats_.enabled = true;
  t->writer_ = std::thread([p = t.get()] { p->writer_main(); });
  for (int i = 0; i < std::max(1, t->opts_.readers); ++i) t->readers_.emplace_back([p = t.get()] { p->reader_main(); });
  return t;
}

DiskTier::~DiskTier() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  write_cv_.notify_all();
  read_cv_.notify_all();
  if (writer_.joinable()) writer_.join();
  for (std::thread& r : readers_) r.join();
  if (dir_fd_ >= 0) ::close(dir_fd_);
}

std::string DiskTier::path_of(const Key& k) const {
  return fmt::format("{:016x}-{:016x}.{}", k.ns, k.hash, k.kind == DiskKind::kv ? "kvb" : "kvs");
}

Status DiskTier::scan() {
  const int fd = ::dup(dir_fd_);
  DIR* d = fd >= 0 ? ::fdopendir(fd) : nullptr;
  if (d == nullptr) return make_error("--kv-disk {}: cannot list: {}", opts_.dir, std::strerror(errno));
  struct Found {
    Key key;
    uint64_t bytes;
    int64_t mtime_ns;
  };
  std::vector<Found> found;
  const std::string own_tmp = fmt::format(".tmp-{}-", ::getpid());
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind(".tmp-", 0) == 0) {
      // A temp file of a process killed mid-write (never one of ours: a reload opens the
      // directory again while this process writes).
      if (name.rfind(own_tmp, 0) != 0 && ::unlinkat(dir_fd_, name.c_str(), 0) == 0) ++stats_.temp_removed;
      continue;
    }
    Key k{};
    if (!parse_block_file_name(name, &k.ns, &k.hash, &k.kind)) continue;
    struct stat st {};
    if (::fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    found.push_back(
        {k, static_cast<uint64_t>(st.st_size), int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec});
  }
  ::closedir(d);
  // Other namespaces first (least recent), then by modification time.
  const uint64_t ns = opts_.name_space;
  std::sort(found.begin(), found.end(), [ns](const Found& a, const Found& b) {
    if ((a.key.ns == ns) != (b.key.ns == ns)) return a.key.ns != ns;
    return a.mtime_ns < b.mtime_ns;
  });
  std::lock_guard lock(mu_);
  for (const Found& f : found) index_add_locked(f.key, f.bytes);
  evict_locked(0);
  return ok_status();
}

void DiskTier::index_add_locked(Key k, uint64_t bytes) {
  auto it = index_.find(k);
  if (it != index_.end()) {
    stats_.bytes -= static_cast<int64_t>(it->second.bytes);
    stats_.state_files -= k.kind == DiskKind::state ? 1 : 0;
    lru_.erase(it->second.lru);
    index_.erase(it);
  }
  lru_.push_back(k);
  index_.emplace(k, Entry{bytes, std::prev(lru_.end())});
  stats_.bytes += static_cast<int64_t>(bytes);
  stats_.n_files = static_cast<int64_t>(index_.size());
  stats_.state_files += k.kind == DiskKind::state ? 1 : 0;
}

void DiskTier::index_erase_locked(Key k) {
  auto it = index_.find(k);
  if (it == index_.end()) return;
  stats_.bytes -= static_cast<int64_t>(it->second.bytes);
  stats_.state_files -= k.kind == DiskKind::state ? 1 : 0;
  lru_.erase(it->second.lru);
  index_.erase(it);
  stats_.n_files = static_cast<int64_t>(index_.size());
}

void DiskTier::evict_locked(uint64_t need) {
  while (!lru_.empty() && static_cast<uint64_t>(stats_.bytes) + need > opts_.max_bytes) {
    const Key k = lru_.front();
    ::unlinkat(dir_fd_, path_of(k).c_str(), 0);
    index_erase_locked(k);
    ++stats_.evictions;
  }
}

void DiskTier::disable_locked(std::string why) {
  if (!stats_.enabled) return;
  stats_.enabled = false;
  stats_.disabled_reason = std::move(why);
  EDGELM_LOG_WARN("KV disk tier {} turned off: {} (serving goes on from RAM)", opts_.dir, stats_.disabled_reason);
}

bool DiskTier::enabled() const {
  std::lock_guard lock(mu_);
  return stats_.enabled;
}

bool DiskTier::contains(uint64_t hash, DiskKind kind) const {
  const Key k{opts_.name_space, hash, kind};
  std::lock_guard lock(mu_);
  return index_.count(k) > 0 || queued_.count(k) > 0;
}

bool DiskTier::enqueue_write(DiskBlock block) {
  const size_t bytes = block.data.size() + 4 * block.tokens.size() + kHeaderBytes;
  {
    std::lock_guard lock(mu_);
    if (!stats_.enabled || stop_ || queued_bytes_ + bytes > opts_.queue_bytes || bytes > opts_.max_bytes) {
      ++stats_.write_drops;
      return false;
    }
    const Key k{opts_.name_space, block.hash, block.kind};
    if (queued_.count(k) > 0 || index_.count(k) > 0) return true;
    queued_[k] = 1;
    queued_bytes_ += bytes;
    write_queue_.push_back(std::move(block));
  }
  write_cv_.notify_one();
  return true;
}

Status DiskTier::write_file(const DiskBlock& b, int* err) {
  const auto t0 = std::chrono::steady_clock::now();
  std::byte header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, 8);
  put32(header + 8, kVersion);
  put32(header + 12, static_cast<uint32_t>(b.kind));
  put64(header + 16, opts_.name_space);
  put64(header + 24, b.hash);
  put64(header + 32, b.parent);
  put32(header + 40, static_cast<uint32_t>(b.tokens.size()));
  put32(header + 44, b.absorbed);
  put64(header + 48, b.data.size());
  const std::vector<std::byte> toks = token_bytes(b.tokens);
  put64(header + kChecksumAt, checksum(header, toks, b.data.data(), b.data.size()));

  const std::string tmp = fmt::format(".tmp-{}-{}", ::getpid(), tmp_counter_++);
  const int fd = ::openat(dir_fd_, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = errno;
    return make_error("create {}: {}", tmp, std::strerror(errno));
  }
  bool ok = write_all(fd, header, kHeaderBytes) && write_all(fd, toks.data(), toks.size()) &&
            write_all(fd, b.data.data(), b.data.size()) && ::fsync(fd) == 0;
  int e = ok ? 0 : errno;
  ::close(fd);
  if (ok && ::renameat(dir_fd_, tmp.c_str(), dir_fd_, path_of(Key{opts_.name_space, b.hash, b.kind}).c_str()) != 0) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    ::unlinkat(dir_fd_, tmp.c_str(), 0);
    *err = e;
    return make_error("write {}: {}", tmp, std::strerror(e));
  }
  std::lock_guard lock(mu_);
  stats_.write_seconds += since(t0);
  return ok_status();
}

void DiskTier::writer_main() {
  std::unique_lock lock(mu_);
  bool dirty = false;  // renamed files since the last directory fsync
  for (;;) {
    write_cv_.wait(lock, [&] { return stop_ || !write_queue_.empty() || dirty || writing_; });
    if (write_queue_.empty()) {
      if (dirty) {
        lock.unlock();
        ::fsync(dir_fd_);  // the renames of the batch are durable
        lock.lock();
        dirty = false;
      }
      writing_ = false;
      drained_cv_.notify_all();
      if (stop_) return;
      continue;
    }
    writing_ = true;
    DiskBlock b = std::move(write_queue_.front());
    write_queue_.pop_front();
    const size_t bytes = b.data.size() + 4 * b.tokens.size() + kHeaderBytes;
    queued_bytes_ -= bytes;
    if (stats_.enabled) {
      evict_locked(bytes);
      lock.unlock();
      int err = 0;
      const Status st = write_file(b, &err);
      lock.lock();
      if (st.ok()) {
        index_add_locked(Key{opts_.name_space, b.hash, b.kind}, bytes);
        ++stats_.writes;
        stats_.state_writes += b.kind == DiskKind::state ? 1 : 0;
        dirty = true;
      } else {
        ++stats_.write_errors;
        if (err == ENOSPC || err == EFBIG || err == EDQUOT)
          disable_locked(st.error().message);
        else
          EDGELM_LOG_WARN("KV disk tier: {}", st.error().message);
      }
    } else {
      ++stats_.write_drops;
    }
    queued_.erase(Key{opts_.name_space, b.hash, b.kind});
  }
}

void DiskTier::drain_writes() {
  std::unique_lock lock(mu_);
  drained_cv_.wait(lock, [&] { return write_queue_.empty() && !writing_; });
}

int64_t DiskTier::clear() {
  drain_writes();
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (const Key& k : lru_)
    if (::unlinkat(dir_fd_, path_of(k).c_str(), 0) == 0) ++n;
  index_.clear();
  lru_.clear();
  stats_.bytes = 0;
  stats_.n_files = 0;
  stats_.state_files = 0;
  ::fsync(dir_fd_);
  return n;
}

bool DiskTier::read_file(const DiskBlockKey& key, DiskBlock& out) {
  const Key k{opts_.name_space, key.hash, key.kind};
  const std::string name = path_of(k);
  auto drop = [&](bool corrupt) {
    std::lock_guard lock(mu_);
    if (corrupt) {
      ++stats_.read_corrupt;
      stats_.state_corrupt += k.kind == DiskKind::state ? 1 : 0;
      ::unlinkat(dir_fd_, name.c_str(), 0);
      EDGELM_LOG_WARN("KV disk tier: {} is torn or corrupt; deleted", name);
    } else {
      ++stats_.read_missing;
    }
    index_erase_locked(k);
    return false;
  };
  const int fd = ::openat(dir_fd_, name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return drop(false);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return drop(false);
  std::byte header[kHeaderBytes];
  if (static_cast<size_t>(st.st_size) < kHeaderBytes || !read_all(fd, header, kHeaderBytes, 0)) return drop(true);
  const uint32_t n_tokens = get32(header + 40);
  const uint64_t payload = get64(header + 48);
  if (std::memcmp(header, kMagic, 8) != 0 || get32(header + 8) != kVersion || get32(header + 12) != static_cast<uint32_t>(k.kind) ||
      get64(header + 16) != k.ns || get64(header + 24) != k.hash || n_tokens > (1u << 20) ||
      payload > (uint64_t{1} << 40) || static_cast<uint64_t>(st.st_size) != kHeaderBytes + 4ull * n_tokens + payload)
    return drop(true);
  std::vector<std::byte> toks(4ull * n_tokens);
  if (key.dest.empty()) {
    out.data.resize(payload);
    if (!read_all(fd, toks.data(), toks.size(), kHeaderBytes) ||
        !read_all(fd, out.data.data(), payload, static_cast<off_t>(kHeaderBytes + toks.size())))
      return drop(true);
    if (checksum(header, toks, out.data.data(), payload) != get64(header + kChecksumAt)) return drop(true);
  } else {
    // In place: tokens and payload in one preadv, the payload into the caller's pieces; the
    // checksum then runs over the bytes where they landed (still in cache, block by block).
    uint64_t dest_bytes = 0;
    for (const std::span<std::byte>& d : key.dest) dest_bytes += d.size();
    if (dest_bytes != payload) return false;  // intact, but not of the caller's layout: a miss
    std::vector<iovec> iov;
    iov.reserve(1 + key.dest.size());
    iov.push_back({toks.data(), toks.size()});
    for (const std::span<std::byte>& d : key.dest) iov.push_back({d.data(), d.size()});
    if (!preadv_all(fd, iov, kHeaderBytes)) return drop(true);
    std::byte h[kHeaderBytes];
    std::memcpy(h, header, kHeaderBytes);
    put64(h + kChecksumAt, 0);
    Xxh64 x(0);
    x.update(h, kHeaderBytes);
    x.update(toks.data(), toks.size());
    for (const std::span<std::byte>& d : key.dest) x.update(d.data(), d.size());
    if (x.digest() != get64(header + kChecksumAt)) return drop(true);
    out.data.clear();
  }
  out.kind = key.kind;
  out.hash = key.hash;
  out.parent = get64(header + 32);
  out.absorbed = get32(header + 44);
  out.tokens.resize(n_tokens);
  for (size_t i = 0; i < n_tokens; ++i) out.tokens[i] = static_cast<int32_t>(get32(toks.data() + 4 * i));
  // An intact block under the hash that is not the one asked for: a 64-bit collision, a miss.
  return out.parent == key.parent && out.tokens == key.tokens && out.absorbed == key.absorbed;
}

bool DiskTier::read_counted(const DiskBlockKey& key, DiskBlock& out) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!read_file(key, out)) return false;
  std::lock_guard l(mu_);
  ++stats_.reads;
  stats_.state_reads += key.kind == DiskKind::state ? 1 : 0;
  stats_.read_seconds += since(t0);
  auto it = index_.find(Key{opts_.name_space, key.hash, key.kind});
  if (it != index_.end()) lru_.splice(lru_.end(), lru_, it->second.lru);  // most recently used
  return true;
}

void DiskTier::submit_read(uint64_t tag, std::vector<DiskBlockKey> keys, std::vector<DiskBlockKey> states,
                           size_t ram_after) {
  auto job = std::make_shared<ReadJob>();
  job->tag = tag;
  job->keys = std::move(keys);
  job->states = std::move(states);
  job->ram_after = ram_after;
  job->out.resize(job->keys.size());
  job->t0 = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    read_queue_.push_back(std::move(job));
  }
  read_cv_.notify_all();
}

void DiskTier::reader_main() {
  std::unique_lock lock(mu_);
  for (;;) {
    // The first job with a key left to claim (or with none at all: a snapshot-only job).
    std::shared_ptr<ReadJob> job;
    read_cv_.wait(lock, [&] {
      if (stop_) return true;
      for (const std::shared_ptr<ReadJob>& j : read_queue_)
        if (j->next < std::min(j->keys.size(), j->fail_at) || (j->keys.empty() && j->next == 0)) {
          job = j;
          return true;
        }
      return false;
    });
    if (stop_) return;
    bool last = false;
    if (job->keys.empty()) {
      job->next = 1;  // claimed
      last = true;
    } else {
      const size_t i = job->next++;
      lock.unlock();
      const bool good = read_counted(job->keys[i], job->out[i]);
      lock.lock();
      if (!good) job->fail_at = std::min(job->fail_at, i);
      ++job->n_done;
      // Keys past the first bad one are never claimed: they count as done.
      const size_t claimable = std::min(job->keys.size(), job->fail_at);
      last = job->next >= claimable && job->n_done == job->next;  // nothing left to claim or to wait for
    }
    if (!last) continue;
    read_queue_.erase(std::find(read_queue_.begin(), read_queue_.end(), job));
    lock.unlock();
    finish_job(*job);
    lock.lock();
  }
}

void DiskTier::finish_job(ReadJob& job) {
  DiskReadResult r;
  r.tag = job.tag;
  const size_t n_good = std::min(job.keys.size(), job.fail_at);
  r.blocks.reserve(n_good);
  for (size_t i = 0; i < n_good; ++i) r.blocks.push_back(std::move(job.out[i]));
  // The longest snapshot whose KV chain came back; a bad one falls back to the next shorter.
  std::stable_sort(job.states.begin(), job.states.end(),
                   [](const DiskBlockKey& a, const DiskBlockKey& b) { return a.after > b.after; });
  for (const DiskBlockKey& key : job.states) {
    if (key.kind != DiskKind::state || key.after > r.blocks.size()) continue;
    if (key.after <= job.ram_after && r.blocks.size() >= job.ram_after) break;  // the caller's serves
    if (!read_counted(key, r.state)) continue;
    r.has_state = true;
    r.state_after = key.after;
    break;
  }
  r.seconds = since(job.t0);
  std::lock_guard lock(mu_);
  done_.push_back(std::move(r));
  done_cv_.notify_all();
}

int64_t DiskTier::count(DiskKind kind) const {
  std::lock_guard lock(mu_);
  int64_t n = 0;
  for (const auto& e : index_) n += e.first.ns == opts_.name_space && e.first.kind == kind ? 1 : 0;
  return n;
}

std::vector<DiskReadResult> DiskTier::take_reads(std::chrono::milliseconds wait) {
  std::unique_lock lock(mu_);
  if (done_.empty() && wait.count() > 0) done_cv_.wait_for(lock, wait, [&] { return !done_.empty(); });
  std::vector<DiskReadResult> out;
  out.swap(done_);
  return out;
}

DiskTierStats DiskTier::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace edgelm::kv
