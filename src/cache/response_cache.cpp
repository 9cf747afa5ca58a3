#include "cache/response_cache.h"

#include "core/log.h"

#include <chrono>

namespace edgelm::cache {

const char* cache_level_name(CacheLevel level) {
  switch (level) {
    case CacheLevel::exact: return "exact";
    case CacheLevel::semantic: return "semantic";
    case CacheLevel::miss: break;
  }
  return "miss";
}

Result<CacheMode> parse_cache_mode(std::string_view text) {
  if (text == "off") return CacheMode::off;
  if (text == "exact") return CacheMode::exact;
  if (text == "semantic") return CacheMode::semantic;
  return make_error("cache mode '{}' is not one of off, exact, semantic", text);
}

static const char* mode_name(CacheMode m) {
  return m == CacheMode::off ? "off" : m == CacheMode::exact ? "exact" : "semantic";
}

ResponseCache::ResponseCache(CacheOptions options, std::shared_ptr<Embedder> embedder)
    : options_(std::move(options)),
      embedder_(std::move(embedder)),
      exact_(options_.capacity, options_.max_bytes),
      ledger_(options_.feedback_ids) {
  bound_.threshold = options_.threshold;
  bound_.max_error_rate = options_.max_error_rate;
  bound_.slope = options_.prior_slope;
  search_floor_ = error_bound_floor(bound_);
}

Result<std::unique_ptr<ResponseCache>> ResponseCache::create(CacheOptions options,
                                                             std::shared_ptr<Embedder> embedder,
                                                             std::vector<std::string>& warnings) {
  if (options.capacity == 0) return make_error("cache capacity must be >= 1");
  if (!(options.threshold >= 0 && options.threshold <= 1))
    return make_error("cache threshold must be in [0, 1], got {}", options.threshold);
  if (!(options.ttl_s >= 0)) return make_error("cache ttl must be >= 0 seconds, got {}", options.ttl_s);
  if (!(options.max_error_rate > 0 && options.max_error_rate < 1))
    return make_error("cache max error rate must be in (0, 1), got {}", options.max_error_rate);
  if (!(options.prior_slope > 0)) return make_error("cache prior slope must be > 0, got {}", options.prior_slope);
  if (options.mode == CacheMode::semantic && !embedder)
    return make_error("the semantic cache needs an embedding source");
  if (options.mode == CacheMode::semantic && options.guards && options.guard_options.opposites &&
      !options.guard_options.wordnet)
    return make_error("the opposites cache guard needs the WordNet data (wordnet-base)");
  if (options.candidates == 0) options.candidates = 1;
  std::unique_ptr<ResponseCache> c(new ResponseCache(std::move(options), std::move(embedder)));
  if (!c->options_.db_path.empty() && c->options_.mode != CacheMode::off) {
    std::string warning;
    Result<std::unique_ptr<CacheStore>> store = CacheStore::open(c->options_.db_path, warning);
    if (!warning.empty()) warnings.push_back(warning);
    if (!store.ok()) {
      warnings.push_back(store.error().message + "; the cache runs in memory only");
    } else {
      c->store_ = std::move(*store);
      Result<std::vector<CacheEntry>> rows = c->store_->load_all();
      if (!rows.ok()) {
        warnings.push_back(rows.error().message + "; starting with an empty cache");
        (void)c->store_->clear();
      } else {
        std::lock_guard lock(c->mutex_);
        const double t = c->now();
        const std::string name = c->embedder_ ? c->embedder_->name() : "";
        for (CacheEntry& e : *rows) {
          if (e.expires_s > 0 && e.expires_s <= t) {
            (void)c->store_->erase(e.key);
            continue;
          }
          if (e.embedder != name) {  // another embedder's vector and similarities: exact only
            e.vector.clear();
            e.observations.clear();
          }
          e.guards = guard_features(e.query, c->options_.guard_options.wordnet.get());
          e.serial = ++c->next_serial_;
          c->put_locked(std::move(e), /*persist=*/false);
        }
      }
    }
  }
  return c;
}

double ResponseCache::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool ResponseCache::cacheable(const CacheRequest& req) const {
  return options_.mode != CacheMode::off && req.parts.prompt.size() <= options_.max_prompt_bytes &&
         req.query.size() <= options_.max_prompt_bytes && req.context.size() <= options_.max_prompt_bytes;
}

std::string ResponseCache::exact_key_of(const CacheRequest& req) const {
  return req.ns + '\x1d' + exact_key(req.parts, options_.case_fold);
}

std::string ResponseCache::sem_ns_of(const CacheRequest& req) const {
  return req.ns + '\x1d' + req.parts.model + '\x1f' + req.parts.params + '\x1f' +
         normalize_text(req.context, options_.case_fold);
}

void ResponseCache::remove_vector_locked(const CacheEntry& e) {
  if (e.label < 0) return;
  auto it = spaces_.find(e.sem_ns);
  if (it == spaces_.end()) return;
  it->second.index->remove(static_cast<uint64_t>(e.label));
  it->second.keys.erase(static_cast<uint64_t>(e.label));
  if (it->second.keys.empty()) spaces_.erase(it);
}

void ResponseCache::drop_locked(std::vector<CacheEntry>& removed, bool expired) {
  for (CacheEntry& e : removed) {
    if (expired)
      ++counters_.expirations;
    else
      ++counters_.evictions;
    remove_vector_locked(e);
    if (store_) note_store_locked(store_->erase(e.key));
  }
}

void ResponseCache::note_store_locked(const Status& st) {
  if (st.ok()) {
    if (n_failing_writes_ > 0)
      EDGELM_LOG_WARN(
          "response cache: writes to '{}' work again ({} failed meanwhile; those entries are in memory only)",
          store_->path(), n_failing_writes_);
    n_failing_writes_ = 0;
    return;
  }
  ++counters_.store_errors;
  counters_.store_last_error = st.error().message;
  if (n_failing_writes_++ == 0)
    EDGELM_LOG_WARN(
        "response cache: {}; the cache keeps serving from memory, the file keeps its earlier entries "
        "(further failures are counted in store_errors, not logged)",
        st.error().message);
}

void ResponseCache::put_locked(CacheEntry e, bool persist) {
  if (auto old = exact_.erase(e.key)) remove_vector_locked(*old);  // a replacement, not an eviction
  e.label = -1;
  if (!e.vector.empty()) {
    Space& space = spaces_[e.sem_ns];
    if (!space.index) space.index = std::make_unique<SemanticIndex>(static_cast<int>(e.vector.size()));
    if (space.index->dim() == static_cast<int>(e.vector.size())) {
      Result<uint64_t> label = space.index->add(e.vector);
      if (label.ok()) {
        e.label = static_cast<int64_t>(*label);
        space.keys[*label] = e.key;
      }
    }
    if (space.keys.empty()) spaces_.erase(e.sem_ns);
  }
  const std::string key = e.key;
  CacheEntry copy_for_store;
  if (persist && store_) copy_for_store = e;
  std::vector<CacheEntry> evicted = exact_.put(std::move(e));
  bool refused = false;
  for (auto it = evicted.begin(); it != evicted.end();) {
    if (it->key == key) {  // too large to ever fit
      refused = true;
      remove_vector_locked(*it);
      if (store_) note_store_locked(store_->erase(key));
      it = evicted.erase(it);
    } else {
      ++it;
    }
  }
  drop_locked(evicted, false);
  if (persist && store_ && !refused) note_store_locked(store_->put(copy_for_store));
}

CacheLookup ResponseCache::lookup(const CacheRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  CacheLookup out;
  auto finish = [&]() -> CacheLookup {
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return std::move(out);
  };
  if (!cacheable(req)) {
    out.skipped = true;
    std::lock_guard lock(mutex_);
    ++counters_.skipped;
    return finish();
  }
  const std::string key = exact_key_of(req);
  {
    std::lock_guard lock(mutex_);
    std::vector<CacheEntry> expired;
    CacheEntry* e = exact_.find(key, now(), expired);
    drop_locked(expired, true);
    if (e != nullptr) {
      out.level = CacheLevel::exact;
      out.answer = {e->response, e->finish_reason, e->prompt_tokens, e->completion_tokens};
      out.similarity = 1.0f;
      out.entry_key = e->key;
      out.entry_serial = e->serial;
      ++counters_.hits_exact;
      return finish();
    }
  }
  if (options_.mode == CacheMode::semantic && embedder_) {
    Result<std::vector<float>> v = embedder_->embed(req.query);
    std::lock_guard lock(mutex_);
    if (!v.ok()) {
      ++counters_.embed_errors;
    } else {
      out.vector = std::move(*v);
      const std::string ns = sem_ns_of(req);
      auto sit = spaces_.find(ns);
      if (sit != spaces_.end()) {
        const std::vector<std::pair<uint64_t, float>> near = sit->second.index->search(out.vector, options_.candidates);
        GuardFeatures mine;
        bool have_mine = false;
        for (const auto& [label, sim] : near) {
          if (sim < search_floor_ - 1e-6) break;
          auto kit = sit->second.keys.find(label);
          if (kit == sit->second.keys.end()) continue;
          const std::string cached_key = kit->second;
          // Looked at without touching its recency: only a hit counts as a use.
          CacheEntry* e = exact_.peek(cached_key);
          if (e == nullptr) continue;
          if (e->expires_s > 0 && now() >= e->expires_s) {
            std::vector<CacheEntry> expired;
            (void)exact_.find(cached_key, now(), expired);
            drop_locked(expired, true);
            sit = spaces_.find(ns);  // the space may be gone
            if (sit == spaces_.end()) break;
            continue;
          }
          // The entry's own threshold: its feedback and the prior (error_bound.h).
          if (!error_bound_accepts(bound_, e->observations, sim)) {
            if (error_bound_accepts(bound_, {}, sim)) {  // the prior alone would serve it
              ++counters_.bound_rejections;
              out.bound_rejected = true;
            }
            continue;
          }
          if (options_.guards) {
            if (!have_mine) {
              mine = guard_features(req.query, options_.guard_options.wordnet.get());
              have_mine = true;
            }
            const std::string failed = guard_check(mine, e->guards, options_.guard_options);
            if (!failed.empty()) {
              ++counters_.guard_rejections[failed];
              if (out.guard_rejected.empty()) out.guard_rejected = failed;
              continue;
            }
          }
          std::vector<CacheEntry> expired;
          e = exact_.find(cached_key, now(), expired);  // the hit: most recently used now
          if (e == nullptr) {
            drop_locked(expired, true);
            sit = spaces_.find(ns);
            if (sit == spaces_.end()) break;
            continue;
          }
          out.level = CacheLevel::semantic;
          out.answer = {e->response, e->finish_reason, e->prompt_tokens, e->completion_tokens};
          out.similarity = sim;
          out.matched_query = e->query;
          out.entry_key = e->key;
          out.entry_serial = e->serial;
          ++counters_.hits_semantic;
          return finish();
        }
      }
    }
  }
  {
    std::lock_guard lock(mutex_);
    ++counters_.misses;
  }
  return finish();
}

void ResponseCache::insert(const CacheRequest& req, const CachedAnswer& answer, std::vector<float> vector) {
  if (!cacheable(req)) return;
  CacheEntry e;
  e.key = exact_key_of(req);
  e.sem_ns = sem_ns_of(req);
  e.query = req.query;
  e.response = answer.text;
  e.finish_reason = answer.finish_reason;
  e.prompt_tokens = answer.prompt_tokens;
  e.completion_tokens = answer.completion_tokens;
  if (options_.mode == CacheMode::semantic && embedder_) {
    if (vector.empty()) {
      Result<std::vector<float>> v = embedder_->embed(req.query);
      if (v.ok()) {
        vector = std::move(*v);
      } else {
        std::lock_guard lock(mutex_);
        ++counters_.embed_errors;
      }
    }
    e.vector = std::move(vector);
    e.embedder = embedder_->name();
    e.guards = guard_features(req.query, options_.guard_options.wordnet.get());
  }
  std::lock_guard lock(mutex_);
  e.serial = ++next_serial_;
  e.created_s = now();
  e.expires_s = options_.ttl_s > 0 ? e.created_s + options_.ttl_s : 0;
  ++counters_.inserts;
  put_locked(std::move(e), /*persist=*/true);
}

void ResponseCache::remember(const std::string& response_id, const CacheRequest& req, const CacheLookup& hit) {
  if (hit.level == CacheLevel::miss || hit.entry_key.empty()) return;
  std::lock_guard lock(mutex_);
  ledger_.add(response_id, {req.ns, hit.entry_key, hit.entry_serial, hit.similarity, hit.level == CacheLevel::exact});
}

FeedbackResult ResponseCache::feedback(const std::string& response_id, const std::string& ns, bool correct) {
  std::lock_guard lock(mutex_);
  FeedbackResult out;
  const std::optional<HitRecord> r = ledger_.find(response_id, ns);
  if (!r) {
    ++counters_.feedback_unknown;
    return out;
  }
  out.similarity = r->similarity;
  out.exact = r->exact;
  CacheEntry* e = exact_.peek(r->key);
  if (e == nullptr || e->serial != r->serial) {
    out.status = FeedbackStatus::entry_gone;
    ++counters_.feedback_gone;
    return out;
  }
  out.status = FeedbackStatus::applied;
  ++(correct ? counters_.feedback_correct : counters_.feedback_wrong);
  if (r->exact) {
    // The stored answer is wrong for its own question: serve it no more.
    if (!correct) {
      std::optional<CacheEntry> gone = exact_.erase(r->key);
      if (gone) {
        remove_vector_locked(*gone);
        if (store_) note_store_locked(store_->erase(gone->key));
      }
    }
    return out;
  }
  std::vector<HitObservation>& seen = e->observations;
  if (seen.size() >= ErrorBound::kMaxObservations) seen.erase(seen.begin());
  seen.push_back({r->similarity, correct});
  if (store_) note_store_locked(store_->set_observations(e->key, seen));
  return out;
}

size_t ResponseCache::flush() {
  std::lock_guard lock(mutex_);
  ledger_.clear();
  std::vector<CacheEntry> all = exact_.clear();
  spaces_.clear();
  if (store_) note_store_locked(store_->clear());
  return all.size();
}

CacheStats ResponseCache::stats() const {
  std::lock_guard lock(mutex_);
  CacheStats s = counters_;
  s.entries = exact_.size();
  s.bytes = exact_.bytes();
  s.namespaces = spaces_.size();
  for (const auto& [ns, space] : spaces_) s.vectors += space.index->size();
  s.mode = mode_name(options_.mode);
  s.embedder = embedder_ && options_.mode == CacheMode::semantic ? embedder_->name() : "";
  s.db_path = store_ ? store_->path() : "";
  s.threshold = options_.threshold;
  s.max_error_rate = options_.max_error_rate;
  s.guards = options_.guards ? guard_list(options_.guard_options) : "";
  s.feedback_ids = ledger_.size();
  return s;
}

std::vector<std::string> ResponseCache::keys_mru() const {
  std::lock_guard lock(mutex_);
  return exact_.keys_mru();
}

}  // namespace edgelm::cache
