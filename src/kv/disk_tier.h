// DiskTier: the prefix KV cache's second tier, full KV blocks in files under one directory, so
// that a restarted server (power cut, update, kill -9) comes back with its prefixes warm.
//
// Job: persist published blocks (write-through: the engine hands each block over when it is
// published, see engine/engine.h, so that what a power cut leaves on disk is everything that was
// hot, not only what RAM happened to evict), find them by their prefix hash, read them back for
// a prompt whose prefix RAM no longer holds, and keep the directory under a byte budget (LRU).
//
// Keys: a block file is named "<namespace>-<hash>.kvb" (16 hex digits each). The hash is the
// block's prefix hash (prefix_hash.h: it chains the tenant's root salt and any image content,
// so tenant scoping is the same as in RAM); the namespace is a hash of everything else the
// block's bytes depend on (disk_namespace.h: model file content, KV type, block size and
// layout, RoPE, context, chat template, mmproj). A block of another namespace is never read.
//
// File format (version 1, little-endian): a 64-byte header
//   magic "EDGKVBLK" | u32 version | u32 kind (1: KV block) | u64 namespace | u64 hash |
//   u64 parent hash | u32 n_tokens | u32 0 | u64 payload bytes | u64 XXH64 of the rest
// then n_tokens i32 tokens, then the payload (KvStore::save_block). The checksum covers the
// header (with the checksum field zero), the tokens and the payload.
//
// Crash safety: a block is written to ".tmp-<pid>-<n>" (0600, O_EXCL), fsynced, renamed to its
// name, and the directory is fsynced after each batch, so a file with a block's name is always
// complete; kill -9 leaves at most temp files, removed at the next open. A torn or corrupt file
// (short, bad header, wrong checksum) is counted, deleted and never used. ENOSPC / EFBIG (a full
// disk, RLIMIT_FSIZE: open() ignores SIGXFSZ process-wide so the write fails instead of killing
// the server) turn the tier off with a counted error; the server goes on from RAM.
//
// Index: open() lists the directory once (names and stat sizes/mtimes, never block bodies) and
// builds an LRU of every block file of every namespace (all count against max_bytes; other
// namespaces' files are the oldest and go first). Lookups are an in-memory hash map.
//
// Threads: one writer thread drains a bounded queue (queue_bytes; a block that does not fit is
// dropped and counted: the engine thread never waits for the disk), one reader thread serves
// read jobs. contains / enqueue_write / submit_read / take_reads / stats may be called from any
// thread (one mutex); the destructor finishes the queued writes and joins both threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace edgelm::kv {

struct DiskTierOptions {
  std::string dir;                        // created (0700) when missing
  uint64_t max_bytes = 0;                 // the directory's block files at most (LRU); >= one block
  uint64_t name_space = 0;                // disk_namespace.h
  size_t queue_bytes = size_t{64} << 20;  // blocks waiting to be written at most
};

// One block: its prefix hash, its parent's, its tokens and its bytes (KvStore::save_block).
struct DiskBlock {
  uint64_t hash = 0;
  uint64_t parent = 0;
  std::vector<int32_t> tokens;
  std::vector<std::byte> data;
};

// What a read job must find: a block's hash with the parent and tokens it must carry.
struct DiskBlockKey {
  uint64_t hash = 0;
  uint64_t parent = 0;
  std::vector<int32_t> tokens;
};

struct DiskReadResult {
  uint64_t tag = 0;               // submit_read's
  std::vector<DiskBlock> blocks;  // the keys' blocks in order, up to the first missing or bad one
  double seconds = 0.0;           // the job's wall time
};

struct DiskTierStats {
  bool enabled = false;
  std::string disabled_reason;  // why the tier turned itself off
  int64_t n_files = 0;          // block files indexed (all namespaces)
  int64_t bytes = 0;            // their bytes
  int64_t writes = 0;           // blocks written
  int64_t write_drops = 0;      // blocks dropped: queue full, or the tier off
  int64_t write_errors = 0;     // failed writes (ENOSPC / EFBIG among them)
  int64_t reads = 0;            // blocks read back and verified
  int64_t read_corrupt = 0;     // torn or corrupt files found (deleted)
  int64_t read_missing = 0;     // indexed but gone (deleted by hand, or by another process)
  int64_t evictions = 0;        // files deleted by the LRU
  int64_t temp_removed = 0;     // temp files of a killed process removed at open
  double write_seconds = 0.0;   // sum over `writes`
  double read_seconds = 0.0;    // sum over `reads`
};

class DiskTier {
 public:
  static Result<std::unique_ptr<DiskTier>> open(DiskTierOptions opts);
  ~DiskTier();
  DiskTier(const DiskTier&) = delete;
  DiskTier& operator=(const DiskTier&) = delete;

  bool enabled() const;
  // A file of this namespace holds `hash`, or a write of it is queued.
  bool contains(uint64_t hash) const;
  // Queues the block for writing; false (counted) when the queue is full or the tier is off.
  bool enqueue_write(DiskBlock block);
  // Queues a read of `keys` (a chain of blocks, in order); its result comes from take_reads.
  void submit_read(uint64_t tag, std::vector<DiskBlockKey> keys);
  // The read jobs finished so far (waits up to `wait` when none has).
  std::vector<DiskReadResult> take_reads(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // Blocks until the queued writes are on disk.
  void drain_writes();
  // Deletes every block file in the directory (all namespaces) after the queued writes; returns
  // how many.
  int64_t clear();
  DiskTierStats stats() const;
  const DiskTierOptions& options() const { return opts_; }

 private:
  explicit DiskTier(DiskTierOptions opts);
  struct Key {
    uint64_t ns, hash;
    bool operator==(const Key& o) const { return ns == o.ns && hash == o.hash; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const { return static_cast<size_t>(k.hash ^ (k.ns * 0x9e3779b97f4a7c15ull)); }
  };
  struct Entry {
    uint64_t bytes;
    std::list<Key>::iterator lru;
  };
  struct ReadJob {
    uint64_t tag;
    std::vector<DiskBlockKey> keys;
  };
  Status scan();
  void writer_main();
  void reader_main();
  // Writes one block file (temp, fsync, rename); errno-style failure in the Status.
  Status write_file(const DiskBlock& b, int* err);
  // The verified block, or nullopt (counted) when missing, torn or corrupt.
  bool read_file(const DiskBlockKey& key, DiskBlock& out);
  std::string path_of(uint64_t ns, uint64_t hash) const;
  void index_add_locked(Key k, uint64_t bytes);
  void index_erase_locked(Key k);
  void evict_locked(uint64_t need);
  void disable_locked(std::string why);

  DiskTierOptions opts_;
  int dir_fd_ = -1;
  mutable std::mutex mu_;
  std::condition_variable write_cv_, drained_cv_, read_cv_, done_cv_;
  std::unordered_map<Key, Entry, KeyHash> index_;
  std::list<Key> lru_;                        // front: least recently used
  std::unordered_map<uint64_t, int> queued_;  // hashes queued or being written
  std::deque<DiskBlock> write_queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  std::deque<ReadJob> read_queue_;
  std::vector<DiskReadResult> done_;
  bool stop_ = false;
  uint64_t tmp_counter_ = 0;
  DiskTierStats stats_;
  std::thread writer_, reader_;
};

// Parses a block file name "<16 hex>-<16 hex>.kvb"; false for anything else.
bool parse_block_file_name(const std::string& name, uint64_t* ns, uint64_t* hash);

}  // namespace edgelm::kv
