// CacheStore: the response cache on disk, one SQLite file in WAL mode, so cached answers
// survive a restart.
//
// One row per cached entry (the exact key is the primary key) with its query, answer, expiry,
// query vector and the feedback on its semantic hits (so an entry that was wrong at some
// similarity stays refused there after a restart). The file holds exactly the entries the memory cache holds: the cache writes
// every insert and deletes every eviction, expiry and flush, so the file is bounded by the same
// entry and byte limits. Rows come back in insertion order (LRU recency is not persisted).
//
// A file that is not a database, fails PRAGMA quick_check, or has an incompatible table is
// moved aside to "<path>.corrupt-<unix time>" (with its -wal/-shm files) and a fresh file is
// created; open() reports that in `warning`. Not thread-safe: ResponseCache serializes.
//
// Faults: every write is one autocommit transaction, so a process killed mid-write (kill -9)
// leaves the file with exactly the writes that committed (WAL recovery at the next open;
// synchronous=NORMAL: a power cut may lose the last commits, never the file). A write that
// fails (disk full: SQLITE_FULL, or the OS refusing to grow the file) is rolled back and
// returned as an error naming the file and the cause; the rows already in the file are
// untouched and the store stays usable.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cache/exact_cache.h"
#include "core/result.h"

struct sqlite3;

namespace edgelm::cache {

class CacheStore {
 public:
  // Errors only when even a fresh file cannot be created (unwritable folder).
  static Result<std::unique_ptr<CacheStore>> open(const std::string& path, std::string& warning);
  ~CacheStore();

  Status put(const CacheEntry& e);
  // Replaces the stored feedback of the entry `key` (no row: nothing changes).
  Status set_observations(const std::string& key, const std::vector<HitObservation>& obs);
  Status erase(const std::string& key);
  Status clear();
  // Every row, oldest first; guards and labels are not stored (the caller recomputes them).
  Result<std::vector<CacheEntry>> load_all();
  // PRAGMA integrity_check (the full check; open() runs the quick one): ok, or what it found.
  Status integrity_check();

  const std::string& path() const { return path_; }

 private:
  CacheStore(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status exec(const char* sql);
  // "cache file 'P': <SQLite message> (<what it means>)" for the last failed call.
  Error db_error() const;
  sqlite3* db_;
  std::string path_;
};

}  // namespace edgelm::cache
