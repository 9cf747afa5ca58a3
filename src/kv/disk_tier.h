// DiskTier: the prefix KV cache's second tier, full KV blocks (and hybrid models' recurrent-state
// snapshots) in files under one directory, so that a restarted server (power cut, update,
// kill -9) comes back with its prefixes warm.
//
// Job: persist published blocks (write-through: the engine hands each block over when it is
// published, see engine/engine.h, so that what a power cut leaves on disk is everything that was
// hot, not only what RAM happened to evict), find them by their prefix hash, read them back for
// a prompt whose prefix RAM no longer holds, and keep the directory under a byte budget (LRU).
//
// Two kinds of block (DiskKind): a KV block (every attention layer's K/V of block_size tokens,
// "<namespace>-<hash>.kvb") and a recurrent-state snapshot (hybrid models, kv/state_snapshots.h:
// the whole recurrent state after the tokens up to the end of the block named <hash>,
// "<namespace>-<hash>.kvs"). A snapshot is only useful together with the KV blocks of its chain
// (the engine reads both back and uses the longest prefix that has both); a KV block on a
// hybrid model is only useful with a snapshot at or after it. Both kinds share the index, the
// LRU and the byte budget.
//
// Keys: a block file is named "<namespace>-<hash>.kvb" (16 hex digits each). The hash is the
// block's prefix hash (prefix_hash.h: it chains the tenant's root salt and any image content,
// so tenant scoping is the same as in RAM); the namespace is a hash of everything else the
// block's bytes depend on (disk_namespace.h: model file content, KV type, block size and
// layout, RoPE, context, chat template, mmproj). A block of another namespace is never read.
//
// File format (version 1, little-endian): a 64-byte header
//   magic "EDGKVBLK" | u32 version | u32 kind (1: KV block) | u64 namespace | u64 hash |
//   magic "EDGKVBLK" | u32 version | u32 kind (1: KV block, 2: state snapshot) | u64 namespace |
//   u64 hash | u64 parent hash | u32 n_tokens | u32 absorbed | u64 payload bytes | u64 XXH64
// then n_tokens i32 tokens (the block's own), then the payload: KvStore::save_block's bytes
// (kind 1, absorbed 0) or the snapshot's floats (kind 2, absorbed: the tokens the state has
// absorbed, the end of the block). The checksum covers the header (with the checksum field
// zero), the tokens and the payload.
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
// Reads in place: a read key may name its destination (DiskBlockKey::dest, the pieces of a KV
// block the caller allocated, KvStore::block_pieces): the payload then goes from the kernel
// straight into those pieces (one preadv, no staging buffer) and the checksum is computed over
// the bytes in place before the block is reported good; a bad block's pieces hold garbage and
// the caller must not use them (it gets them back as not read). Measured why (README, KV disk
// tier): a staging vector per block and a second copy into never-touched KV memory were most of
// a disk hit's cost.
//
// Threads: one writer thread drains a bounded queue (queue_bytes; a block that does not fit is
// dropped and counted: the engine thread never waits for the disk); `readers` reader threads
// share each read job's keys (each claims the next unread key, so a job's blocks are read in
// parallel; a job is finished by the thread that completes its last key). contains /
// enqueue_write / submit_read / take_reads / stats may be called from any thread (one mutex);
// the destructor finishes the queued writes and joins the threads (a job being read is finished
// first, so destination memory must outlive the tier).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/result.h"

namespace edgelm::kv {

enum class DiskKind : uint32_t { kv = 1, state = 2 };

struct DiskTierOptions {
  std::string dir;                        // created (0700) when missing
  uint64_t max_bytes = 0;                 // the directory's block files at most (LRU); >= one block
  uint64_t name_space = 0;                // disk_namespace.h
  size_t queue_bytes = size_t{64} << 20;  // blocks waiting to be written at most
  int readers = 2;                        // reader threads (>= 1)
};

// One block: its kind, its prefix hash, its parent's, its tokens and its bytes
// (KvStore::save_block, or a state snapshot's floats after `absorbed` tokens).
struct DiskBlock {
  DiskKind kind = DiskKind::kv;
  uint64_t hash = 0;
  uint64_t parent = 0;
  std::vector<int32_t> tokens;
  uint32_t absorbed = 0;  // kind state: the tokens the snapshot's state has absorbed
  std::vector<std::byte> data;
};

// What a read job must find: a block's kind and hash with the parent, tokens (and for a
// snapshot the absorbed count) it must carry.
struct DiskBlockKey {
  DiskKind kind = DiskKind::kv;
  uint64_t hash = 0;
  uint64_t parent = 0;
  std::vector<int32_t> tokens;
  uint32_t absorbed = 0;
  // A snapshot key of a read job: how many of the job's KV keys must have been read for this
  // snapshot to be usable (its block and every one before it on disk).
  size_t after = 0;
  // Non-empty: read the payload straight into these pieces, in order (their sizes must add up to
  // the file's payload, else the block is a miss); the result's DiskBlock then has no data.
  std::vector<std::span<std::byte>> dest = {};
};

struct DiskReadResult {
  uint64_t tag = 0;               // submit_read's
  std::vector<DiskBlock> blocks;  // the keys' blocks in order, up to the first missing or bad one
  // The longest of the job's snapshot keys that is usable with `blocks` (after <= blocks.size())
  // and intact (kind state); absent (has_state false) when none is.
  bool has_state = false;
  DiskBlock state;
  size_t state_after = 0;  // that key's `after`
  double seconds = 0.0;    // the job's wall time
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
  int64_t state_files = 0;      // of n_files: recurrent-state snapshots (this namespace or not)
  int64_t state_writes = 0;     // of writes: snapshots
  int64_t state_reads = 0;      // of reads: snapshots
  int64_t state_corrupt = 0;    // of read_corrupt: snapshots
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
  // A file of this namespace holds `hash` of this kind, or a write of it is queued.
  bool contains(uint64_t hash, DiskKind kind = DiskKind::kv) const;
  // Queues the block for writing; false (counted) when the queue is full or the tier is off.
  bool enqueue_write(DiskBlock block);
  // Queues a read of `keys` (a chain of KV blocks, in order: read up to the first missing or bad
  // one), then of the longest usable snapshot of `states` (tried longest `after` first, each
  // bad one counted and passed over); its result comes from take_reads. ram_after: the chain's
  // first ram_after keys end at a snapshot the caller holds already, so once that many came
  // back no snapshot with a smaller or equal `after` is read.
  void submit_read(uint64_t tag, std::vector<DiskBlockKey> keys, std::vector<DiskBlockKey> states = {},
                   size_t ram_after = SIZE_MAX);
  // The read jobs finished so far (waits up to `wait` when none has).
  std::vector<DiskReadResult> take_reads(std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // Blocks until the queued writes are on disk.
  void drain_writes();
  // Files of this namespace of one kind (O(files): for a start-up estimate, not a request path).
  int64_t count(DiskKind kind) const;
  // Deletes every block file in the directory (all namespaces) after the queued writes; returns
  // how many.
  int64_t clear();
  DiskTierStats stats() const;
  const DiskTierOptions& options() const { return opts_; }

 private:
  explicit DiskTier(DiskTierOptions opts);
  struct Key {
    uint64_t ns, hash;
    DiskKind kind;
    bool operator==(const Key& o) const { return ns == o.ns && hash == o.hash && kind == o.kind; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return static_cast<size_t>(k.hash ^ (k.ns * 0x9e3779b97f4a7c15ull) ^ static_cast<uint64_t>(k.kind));
    }
  };
  struct Entry {
    uint64_t bytes;
    std::list<Key>::iterator lru;
  };
  // A read job, shared by the reader threads: each claims the next key (below fail_at: a key
  // after a bad one is not worth reading), and the one that completes the last key finishes it.
  struct ReadJob {
    uint64_t tag;
    std::vector<DiskBlockKey> keys, states;
    size_t ram_after;
    std::vector<DiskBlock> out;  // [keys] the blocks read
    size_t next = 0;             // the next key to claim
    size_t n_done = 0;           // keys completed (read or skipped)
    size_t fail_at = SIZE_MAX;   // the first bad or missing key so far
    std::chrono::steady_clock::time_point t0;
  };
  Status scan();
  void writer_main();
  void reader_main();
  // The job's snapshot read and result, once all its keys are done (no lock held).
  void finish_job(ReadJob& job);
  // Writes one block file (temp, fsync, rename); errno-style failure in the Status.
  Status write_file(const DiskBlock& b, int* err);
  // The verified block, or false (counted) when missing, torn or corrupt.
  bool read_file(const DiskBlockKey& key, DiskBlock& out);
  // read_file, counted as a read and moved to the LRU's most recent end when good.
  bool read_counted(const DiskBlockKey& key, DiskBlock& out);
  std::string path_of(const Key& k) const;
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
  std::unordered_map<Key, int, KeyHash> queued_;  // blocks queued or being written
  std::deque<DiskBlock> write_queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  std::deque<std::shared_ptr<ReadJob>> read_queue_;  // jobs with keys left to claim or finish
  std::vector<DiskReadResult> done_;
  bool stop_ = false;
  uint64_t tmp_counter_ = 0;
  DiskTierStats stats_;
  std::thread writer_;
  std::vector<std::thread> readers_;
};

// Parses a block file name "<16 hex>-<16 hex>.kvb" (KV) or ".kvs" (state snapshot); false for
// anything else.
bool parse_block_file_name(const std::string& name, uint64_t* ns, uint64_t* hash, DiskKind* kind = nullptr);

}  // namespace edgelm::kv
