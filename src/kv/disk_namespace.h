// Disk-tier namespaces (kv/disk_tier.h): one 64-bit name for everything a KV block's bytes
// depend on besides its tokens, so that a block written under one model or setting is never
// read under another.
//
// Job: file_content_hash() names a model (or mmproj) file by its content: XXH64 of every byte,
// read once in 8 MiB pieces (about disk speed: a 1 GB model is read once at its first load, a
// cost its first use pays anyway) and remembered in the tier's directory under a key of the
// file's identity (device, inode, size, modification and change times in ns), so a restart of an unchanged
// file reads only a 16-byte note. A file replaced or rewritten in place gets a new mtime (or
// inode) and is hashed again (a file rewritten to the same size within one tick of the
// file system's clock and inode would be missed: a replaced model is a new file in practice). DiskNamespace absorbs
// named fields in order into one XXH64.
//
// Invariants: deterministic across runs and hosts; a field's name is part of the hash, so
// ("a", "bc") and ("ab", "c") differ. The remembered notes are 0600 files
// "model-<key>.hash" under the tier's directory, written temp-then-rename.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/xxhash64.h"

namespace edgelm::kv {

// XXH64 of the whole file at `path`; `note_dir` (may be empty: no note) remembers it.
Result<uint64_t> file_content_hash(const std::string& path, const std::string& note_dir);

class DiskNamespace {
 public:
  DiskNamespace& add(std::string_view name, std::string_view value);
  DiskNamespace& add(std::string_view name, uint64_t value);
  uint64_t value() const { return h_.digest(); }

 private:
  Xxh64 h_{0x6b766469736b3031ull};  // "kvdisk01"
};

}  // namespace edgelm::kv
