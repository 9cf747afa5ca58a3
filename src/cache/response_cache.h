// ResponseCache: the two-level response cache of `edgelm serve` (and of `edgelm eval-cache
// --bench`) — exact (normalized key) and semantic (embedding nearest neighbour + guards) — with
// optional SQLite persistence.
//
// lookup(): if the request is cacheable (its prompt is at most max_prompt_bytes), the exact key
// is tried first; in semantic mode the query is then embedded (outside the lock) and searched in
// the index of its semantic namespace (namespace + model + params + conversation context); the
// nearest candidates are tried most similar first, and the first that the candidate entry's
// error bound accepts at that similarity (error_bound.h: `threshold` is the prior,
// `max_error_rate` the bound, feedback moves it per entry) and whose guards pass is a hit.
// Hits can be remembered under a response id (remember()); feedback(id, ns, correct) then
// records on that entry whether it was right at that similarity (an exact hit judged wrong is
// dropped). insert() stores an answer under both levels (re-using the lookup's
// vector, so a miss is embedded once).
//
// Invariants: thread-safe (one mutex around the in-memory state and the file; embeddings are
// computed without it); bounded by capacity entries and max_bytes (LRU eviction, removing the
// entry's vector from its index and its row from the file); expired entries are never served;
// a namespace never sees another's entries; a full cache evicts, never fails; errors of the
// file or the embedder degrade to a miss / a memory-only insert and are counted, never thrown.
// A failing file (disk full, say) is logged once when it starts failing and once when writes
// work again, not on every insert; the memory cache keeps serving in between.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cache/cache_store.h"
#include "cache/embedder.h"
#include "cache/exact_cache.h"
#include "cache/guards.h"
#include "cache/hit_ledger.h"
#include "cache/normalize_key.h"
#include "cache/semantic_index.h"
#include "core/result.h"

namespace edgelm::cache {

enum class CacheMode { off, exact, semantic };
enum class CacheLevel { miss, exact, semantic };

const char* cache_level_name(CacheLevel level);
Result<CacheMode> parse_cache_mode(std::string_view text);

struct CacheOptions {
  CacheMode mode = CacheMode::exact;
  size_t capacity = 1000;            // entries (both levels share them)
  size_t max_bytes = 64u << 20;      // in memory (and so in the file)
  double ttl_s = 0;                  // 0: entries do not expire
  double threshold = 0.80;           // cosine similarity of a semantic hit: the prior (README: eval-cache)
  double max_error_rate = 0.01;      // the per-entry error bound (error_bound.h), in (0, 1)
  double prior_slope = 30;           // of the prior error curve (error_bound.h)
  size_t feedback_ids = 10000;       // response ids of hits kept for feedback (HitLedger)
  bool guards = true;                // master switch of the guards
  GuardOptions guard_options;        // each guard, when `guards` is on (opposites needs .wordnet)
  bool case_fold = true;             // exact keys ignore case
  size_t max_prompt_bytes = 16384;   // larger prompts are neither looked up nor stored
  size_t candidates = 8;             // nearest neighbours tried per semantic lookup
  std::string db_path;               // empty: memory only
  std::function<double()> clock;     // wall seconds; default: system clock
};

// One request as the cache sees it.
struct CacheRequest {
  std::string ns;       // isolation namespace (e.g. a hash of the API key); empty is a namespace too
  KeyParts parts;       // exact-key parts
  std::string query;    // what the semantic level compares (the prompt, or the last user message)
  std::string context;  // what else must match exactly for a semantic hit (earlier chat messages)
};

struct CachedAnswer {
  std::string text, finish_reason;
  int32_t prompt_tokens = 0, completion_tokens = 0;
};

struct CacheLookup {
  CacheLevel level = CacheLevel::miss;
  CachedAnswer answer;
  float similarity = 0;        // semantic hits: cosine to the cached query
  std::string matched_query;   // semantic hits: the cached query
  std::string guard_rejected;  // a candidate above the threshold failed this guard
  bool bound_rejected = false;  // a candidate the prior accepts was refused by its entry's feedback
  bool skipped = false;        // not cacheable (too large, or the cache is off)
  double seconds = 0;          // time spent in lookup()
  std::vector<float> vector;   // the query's embedding (semantic mode), for insert()
  std::string entry_key;       // hits: the entry's exact key and insert serial (remember())
  uint64_t entry_serial = 0;
};

enum class FeedbackStatus {
  applied,     // recorded on the entry (or, an exact hit judged wrong, the entry dropped)
  unknown_id,  // no remembered hit with this id in this namespace
  entry_gone,  // the entry was evicted, expired or replaced since
};

struct FeedbackResult {
  FeedbackStatus status = FeedbackStatus::unknown_id;
  float similarity = 0;
  bool exact = false;
};

struct CacheStats {
  size_t entries = 0, bytes = 0, vectors = 0, namespaces = 0;
  uint64_t hits_exact = 0, hits_semantic = 0, misses = 0, skipped = 0, inserts = 0, evictions = 0, expirations = 0,
           embed_errors = 0, store_errors = 0, bound_rejections = 0, feedback_correct = 0, feedback_wrong = 0,
           feedback_unknown = 0, feedback_gone = 0;
  size_t feedback_ids = 0;  // remembered hit ids
  // store_errors counts failed writes to the file; this is the latest one's message (empty: none).
  std::string store_last_error;
  std::map<std::string, uint64_t> guard_rejections;  // by guard name
  std::string mode, embedder, db_path;
  double threshold = 0, max_error_rate = 0;
  std::string guards;  // the enabled guards, comma-separated
};

class ResponseCache {
 public:
  // `embedder` is required in semantic mode (may be null otherwise). A db_path that cannot be
  // used at all is reported in `warnings` and the cache runs in memory; a corrupt one is moved
  // aside (warning) and replaced. Errors: invalid options (capacity 0, threshold outside [0, 1]).
  static Result<std::unique_ptr<ResponseCache>> create(CacheOptions options, std::shared_ptr<Embedder> embedder,
                                                       std::vector<std::string>& warnings);

  CacheLookup lookup(const CacheRequest& req);
  // Stores an answer; `vector` is the lookup's embedding (empty: embedded here if needed).
  void insert(const CacheRequest& req, const CachedAnswer& answer, std::vector<float> vector = {});
  // Remembers a hit's response id for feedback (no-op for misses).
  void remember(const std::string& response_id, const CacheRequest& req, const CacheLookup& hit);
  // Feedback on the answer with that id, from a caller of namespace `ns`.
  FeedbackResult feedback(const std::string& response_id, const std::string& ns, bool correct);
  // Drops every entry (memory and file); returns how many there were.
  size_t flush();
  CacheStats stats() const;

  const CacheOptions& options() const { return options_; }
  bool cacheable(const CacheRequest& req) const;
  // Keys from most to least recently used.
  std::vector<std::string> keys_mru() const;

 private:
  ResponseCache(CacheOptions options, std::shared_ptr<Embedder> embedder);
  double now() const;
  std::string exact_key_of(const CacheRequest& req) const;
  std::string sem_ns_of(const CacheRequest& req) const;
  // With mutex_ held: remove side structures of entries that left the ExactCache.
  void drop_locked(std::vector<CacheEntry>& removed, bool expired);
  void remove_vector_locked(const CacheEntry& e);
  // With mutex_ held: put into the memory cache, index and (if persist) the file.
  void put_locked(CacheEntry e, bool persist);
  // With mutex_ held: counts and logs the outcome of a write to the file.
  void note_store_locked(const Status& st);

  CacheOptions options_;
  std::shared_ptr<Embedder> embedder_;
  mutable std::mutex mutex_;
  ExactCache exact_;
  struct Space {
    std::unique_ptr<SemanticIndex> index;
    std::map<uint64_t, std::string> keys;  // label -> exact key
  };
  std::map<std::string, Space> spaces_;  // by semantic namespace
  std::unique_ptr<CacheStore> store_;
  ErrorBound bound_;
  double search_floor_ = 0;  // error_bound_floor(bound_)
  HitLedger ledger_;
  uint64_t next_serial_ = 0;
  CacheStats counters_;
  uint64_t n_failing_writes_ = 0;  // failed writes since the last successful one (0: healthy)
};

}  // namespace edgelm::cache
