#include "cache/cache_store.h"

#include <sqlite3.h>

#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

namespace edgelm::cache {
namespace {

constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS edgelm_cache_v1 ("
    " key TEXT PRIMARY KEY, sem_ns TEXT NOT NULL, query TEXT NOT NULL, response TEXT NOT NULL,"
    " finish_reason TEXT NOT NULL, prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,"
    " created_s REAL NOT NULL, expires_s REAL NOT NULL, embedder TEXT NOT NULL, vector BLOB,"
    " observations BLOB)";

// The columns this version reads and writes, in order.
constexpr const char* kColumns =
    "key, sem_ns, query, response, finish_reason, prompt_tokens, completion_tokens, created_s, expires_s,"
    " embedder, vector, observations";

// Feedback observations as stored: per observation the similarity (float32) and 1 or 0 for
// correct (int32), host byte order (the file is a cache of this machine).
std::vector<uint8_t> encode_observations(const std::vector<HitObservation>& obs) {
  std::vector<uint8_t> out(obs.size() * 8);
  for (size_t i = 0; i < obs.size(); ++i) {
    const int32_t correct = obs[i].correct ? 1 : 0;
    std::memcpy(out.data() + 8 * i, &obs[i].similarity, 4);
    std::memcpy(out.data() + 8 * i + 4, &correct, 4);
  }
  return out;
}

// The stored observations, or none when the blob is not what encode_observations writes (a
// damaged row loses its feedback, never its answer).
std::vector<HitObservation> decode_observations(const void* blob, int n) {
  std::vector<HitObservation> out;
  if (blob == nullptr || n <= 0 || n % 8 != 0 || static_cast<size_t>(n / 8) > ErrorBound::kMaxObservations) return out;
  const auto* p = static_cast<const uint8_t*>(blob);
  for (int i = 0; i < n / 8; ++i) {
    HitObservation o;
    int32_t correct = 0;
    std::memcpy(&o.similarity, p + 8 * i, 4);
    std::memcpy(&correct, p + 8 * i + 4, 4);
    if (!(o.similarity >= -1.0f && o.similarity <= 1.0f) || (correct != 0 && correct != 1)) return {};
    o.correct = correct == 1;
    out.push_back(o);
  }
  return out;
}

struct Stmt {
  sqlite3_stmt* s = nullptr;
  ~Stmt() { sqlite3_finalize(s); }
};

// Opens and checks one file; null (and the reason) if it is unusable.
sqlite3* try_open(const std::string& path, std::string& why) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    why = db ? sqlite3_errmsg(db) : "cannot open";
    sqlite3_close(db);
    return nullptr;
  }
  sqlite3_busy_timeout(db, 2000);
  auto run = [&](const char* sql) {
    char* err = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
      why = err ? err : sqlite3_errmsg(db);
      sqlite3_free(err);
      return false;
    }
    return true;
  };
  // auto_vacuum (effective on a new file only) gives the pages of evicted rows back, so the file
  // shrinks with the cache instead of keeping its high-water mark.
  bool ok = run("PRAGMA auto_vacuum=FULL") && run("PRAGMA journal_mode=WAL") && run("PRAGMA synchronous=NORMAL");
  if (ok) {
    // quick_check returns one row "ok" on a sound file.
    Stmt st;
    ok = sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st.s, nullptr) == SQLITE_OK &&
         sqlite3_step(st.s) == SQLITE_ROW;
    if (ok) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
      ok = text != nullptr && std::strcmp(text, "ok") == 0;
      if (!ok) why = text ? text : "quick_check failed";
    } else {
      why = sqlite3_errmsg(db);
    }
  }
  ok = ok && run(kSchema);
  // The table must have the columns this version writes. A file of the version before feedback
  // was persisted lacks only `observations`: it gains the column and keeps its rows.
  auto has_columns = [&] {
    Stmt st;
    const std::string sql = std::string("SELECT ") + kColumns + " FROM edgelm_cache_v1 LIMIT 0";
    const bool has = sqlite3_prepare_v2(db, sql.c_str(), -1, &st.s, nullptr) == SQLITE_OK;
    if (!has) why = sqlite3_errmsg(db);
    return has;
  };
  if (ok && !has_columns()) ok = run("ALTER TABLE edgelm_cache_v1 ADD COLUMN observations BLOB") && has_columns();
  if (!ok) {
    sqlite3_close(db);
    return nullptr;
  }
  return db;
}

}  // namespace

Result<std::unique_ptr<CacheStore>> CacheStore::open(const std::string& path, std::string& warning) {
  std::string why;
  sqlite3* db = try_open(path, why);
  if (db == nullptr) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(path, ec)) {
      const std::string aside = path + ".corrupt-" + std::to_string(std::time(nullptr));
      fs::rename(path, aside, ec);
      if (ec) return make_error("cache file '{}' is unusable ({}) and cannot be moved aside: {}", path, why, ec.message());
      for (const char* suffix : {"-wal", "-shm"}) {
        if (fs::exists(path + suffix, ec)) fs::rename(path + suffix, aside + suffix, ec);
      }
      warning = "cache file '" + path + "' is unusable (" + why + "); moved to '" + aside + "', starting empty";
      std::string why2;
      db = try_open(path, why2);
      if (db == nullptr) return make_error("cannot create cache file '{}': {}", path, why2);
    } else {
      return make_error("cannot create cache file '{}': {}", path, why);
    }
  }
  return std::unique_ptr<CacheStore>(new CacheStore(db, path));
}

CacheStore::~CacheStore() { sqlite3_close(db_); }

Error CacheStore::db_error() const {
  // SQLite says "disk I/O error" both for a failing disk and for a write the OS refused (no
  // space left, a file size limit); the extended code tells a write from a read.
  const int code = sqlite3_extended_errcode(db_);
  const char* why = nullptr;
  switch (code) {
    case SQLITE_FULL: why = "no room to grow the file"; break;
    case SQLITE_IOERR_WRITE:
    case SQLITE_IOERR_FSYNC:
    case SQLITE_IOERR_TRUNCATE:
    case SQLITE_IOERR_SHMSIZE: why = "a write was refused: disk full, a file size limit, or a failing disk"; break;
    case SQLITE_IOERR_READ:
    case SQLITE_IOERR_SHORT_READ: why = "a read failed"; break;
    case SQLITE_READONLY: why = "the file or its folder is read-only"; break;
    default: break;
  }
  if (why != nullptr) return make_error("cache file '{}': {} ({})", path_, sqlite3_errmsg(db_), why);
  return make_error("cache file '{}': {}", path_, sqlite3_errmsg(db_));
}

Status CacheStore::exec(const char* sql) {
  if (sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) != SQLITE_OK) return db_error();
  return ok_status();
}

Status CacheStore::integrity_check() {
  Stmt st;
  if (sqlite3_prepare_v2(db_, "PRAGMA integrity_check", -1, &st.s, nullptr) != SQLITE_OK) return db_error();
  std::string found;
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(st.s, 0));
    const std::string line = text ? text : "";
    if (line != "ok") found += (found.empty() ? "" : "; ") + line;
  }
  if (rc != SQLITE_DONE) return db_error();
  if (!found.empty()) return make_error("cache file '{}' fails integrity_check: {}", path_, found);
  return ok_status();
}

Status CacheStore::put(const CacheEntry& e) {
  Stmt st;
  const std::string sql =
      std::string("INSERT OR REPLACE INTO edgelm_cache_v1 (") + kColumns + ") VALUES (?,?,?,?,?,?,?,?,?,?,?,?)";
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK) return db_error();
  auto text = [&](int i, const std::string& s) {
    sqlite3_bind_text(st.s, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  };
  text(1, e.key);
  text(2, e.sem_ns);
  text(3, e.query);
  text(4, e.response);
  text(5, e.finish_reason);
  sqlite3_bind_int(st.s, 6, e.prompt_tokens);
  sqlite3_bind_int(st.s, 7, e.completion_tokens);
  sqlite3_bind_double(st.s, 8, e.created_s);
  sqlite3_bind_double(st.s, 9, e.expires_s);
  text(10, e.embedder);
  if (e.vector.empty())
    sqlite3_bind_null(st.s, 11);
  else
    sqlite3_bind_blob(st.s, 11, e.vector.data(), static_cast<int>(e.vector.size() * sizeof(float)), SQLITE_TRANSIENT);
  const std::vector<uint8_t> obs = encode_observations(e.observations);
  if (obs.empty())
    sqlite3_bind_null(st.s, 12);
  else
    sqlite3_bind_blob(st.s, 12, obs.data(), static_cast<int>(obs.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_DONE) return db_error();
  return ok_status();
}

Status CacheStore::set_observations(const std::string& key, const std::vector<HitObservation>& obs) {
  Stmt st;
  if (sqlite3_prepare_v2(db_, "UPDATE edgelm_cache_v1 SET observations = ? WHERE key = ?", -1, &st.s, nullptr) !=
      SQLITE_OK)
    return db_error();
  const std::vector<uint8_t> blob = encode_observations(obs);
  if (blob.empty())
    sqlite3_bind_null(st.s, 1);
  else
    sqlite3_bind_blob(st.s, 1, blob.data(), static_cast<int>(blob.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 2, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_DONE) return db_error();
  return ok_status();
}

Status CacheStore::erase(const std::string& key) {
  Stmt st;
  if (sqlite3_prepare_v2(db_, "DELETE FROM edgelm_cache_v1 WHERE key = ?", -1, &st.s, nullptr) != SQLITE_OK)
    return db_error();
  sqlite3_bind_text(st.s, 1, key.data(), static_cast<int>(key.size()), SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_DONE) return db_error();
  return ok_status();
}

Status CacheStore::clear() { return exec("DELETE FROM edgelm_cache_v1"); }

Result<std::vector<CacheEntry>> CacheStore::load_all() {
  Stmt st;
  const std::string sql = std::string("SELECT ") + kColumns + " FROM edgelm_cache_v1 ORDER BY created_s, rowid";
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &st.s, nullptr) != SQLITE_OK) return db_error();
  std::vector<CacheEntry> out;
  auto col = [&](int i) {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st.s, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(st.s, i))) : std::string();
  };
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    CacheEntry e;
    e.key = col(0);
    e.sem_ns = col(1);
    e.query = col(2);
    e.response = col(3);
    e.finish_reason = col(4);
    e.prompt_tokens = sqlite3_column_int(st.s, 5);
    e.completion_tokens = sqlite3_column_int(st.s, 6);
    e.created_s = sqlite3_column_double(st.s, 7);
    e.expires_s = sqlite3_column_double(st.s, 8);
    e.embedder = col(9);
    const int n = sqlite3_column_bytes(st.s, 10);
    if (n > 0 && n % static_cast<int>(sizeof(float)) == 0) {
      e.vector.resize(static_cast<size_t>(n) / sizeof(float));
      std::memcpy(e.vector.data(), sqlite3_column_blob(st.s, 10), static_cast<size_t>(n));
    }
    e.observations = decode_observations(sqlite3_column_blob(st.s, 11), sqlite3_column_bytes(st.s, 11));
    out.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return db_error();
  return out;
}

}  // namespace edgelm::cache
