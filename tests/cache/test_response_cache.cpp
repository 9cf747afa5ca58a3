#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <sqlite3.h>

#include "cache/cache_store.h"
#include "cache/lexical_embedder.h"
#include "cache/response_cache.h"
#include "support/test_data.h"
#include "test_wordnet_data.h"

namespace edgelm::cache {
namespace {

namespace fs = std::filesystem;

CacheRequest req(const std::string& query, const std::string& ns = "ns", const std::string& params = "t=0") {
  CacheRequest r;
  r.ns = ns;
  r.parts = {"model", query, params};
  r.query = query;
  return r;
}

CachedAnswer answer(const std::string& text) { return {text, "stop", 5, 3}; }

struct Fixture {
  double clock = 1000.0;
  std::vector<std::string> warnings;
  std::unique_ptr<ResponseCache> cache;

  explicit Fixture(CacheOptions o = {}, CacheMode mode = CacheMode::semantic) {
    o.mode = mode;
    o.clock = [this] { return clock; };
    if (!o.guard_options.wordnet) o.guard_options.wordnet = test_wordnet();
    auto c = ResponseCache::create(o, std::make_shared<LexicalEmbedder>(512), warnings);
    EXPECT_TRUE(c.ok()) << (c.ok() ? "" : c.error().message);
    cache = std::move(*c);
  }
};

TEST(ResponseCache, ExactHitAfterNormalization) {
  Fixture f({}, CacheMode::exact);
  EXPECT_EQ(f.cache->lookup(req("What are your opening hours?")).level, CacheLevel::miss);
  f.cache->insert(req("What are your opening hours?"), answer("9 to 5"));
  CacheLookup l = f.cache->lookup(req("  what are YOUR opening\thours? "));
  EXPECT_EQ(l.level, CacheLevel::exact);
  EXPECT_EQ(l.answer.text, "9 to 5");
  EXPECT_EQ(l.answer.finish_reason, "stop");
  // Other generation parameters: another key.
  EXPECT_EQ(f.cache->lookup(req("What are your opening hours?", "ns", "t=0;max=9")).level, CacheLevel::miss);
  // Exact mode never answers a paraphrase.
  EXPECT_EQ(f.cache->lookup(req("What are the opening hours?")).level, CacheLevel::miss);
  CacheStats s = f.cache->stats();
  EXPECT_EQ(s.hits_exact, 1u);
  EXPECT_EQ(s.misses, 3u);
}

TEST(ResponseCache, ExactCaseFoldingConfigurable) {
  CacheOptions o;
  o.case_fold = false;
  Fixture f(o, CacheMode::exact);
  f.cache->insert(req("Hello there"), answer("hi"));
  EXPECT_EQ(f.cache->lookup(req("Hello   there")).level, CacheLevel::exact);
  EXPECT_EQ(f.cache->lookup(req("hello there")).level, CacheLevel::miss);
}

TEST(ResponseCache, SemanticHitOnParaphrase) {
  CacheOptions o;
  o.threshold = 0.6;
  Fixture f(o);
  f.cache->insert(req("How can I reset my password?"), answer("Use the link."));
  CacheLookup l = f.cache->lookup(req("How do I reset my password please"));
  ASSERT_EQ(l.level, CacheLevel::semantic);
  EXPECT_EQ(l.answer.text, "Use the link.");
  EXPECT_GE(l.similarity, 0.6f);
  EXPECT_LT(l.similarity, 1.0f);
  EXPECT_EQ(l.matched_query, "How can I reset my password?");
  // Unrelated: miss.
  EXPECT_EQ(f.cache->lookup(req("Where is my parcel?")).level, CacheLevel::miss);
  EXPECT_EQ(f.cache->stats().hits_semantic, 1u);
}

// Each guard turns a would-be semantic hit into a miss; with guards off the same pair hits.
struct GuardCase {
  const char* cached;
  const char* query;
  const char* guard;
};

TEST(ResponseCache, GuardsRejectMeaningFlips) {
  const GuardCase cases[] = {
      {"Can I return an opened item?", "Can't I return an opened item?", "negation"},
      {"Can I return shoes after 30 days?", "Can I return shoes after 60 days?", "numbers"},
      {"Can I return shoes after two weeks?", "Can I return shoes after three weeks?", "numbers"},
      {"Do you ship parcels to Canada?", "Do you ship parcels to Mexico?", "entities"},
      {"Is the X200 charger covered by warranty?", "Is the X300 charger covered by warranty?", "entities"},
  };
  for (const GuardCase& c : cases) {
    SCOPED_TRACE(c.query);
    CacheOptions o;
    o.threshold = 0.5;
    Fixture on(o);
    on.cache->insert(req(c.cached), answer("cached"));
    CacheLookup l = on.cache->lookup(req(c.query));
    EXPECT_EQ(l.level, CacheLevel::miss);
    EXPECT_EQ(l.guard_rejected, c.guard);
    EXPECT_EQ(on.cache->stats().guard_rejections[c.guard], 1u);
    o.guards = false;
    Fixture off(o);
    off.cache->insert(req(c.cached), answer("cached"));
    EXPECT_EQ(off.cache->lookup(req(c.query)).level, CacheLevel::semantic);
  }
  // One guard off lets exactly its cases through.
  CacheOptions o;
  o.threshold = 0.5;
  o.guard_options.negation = false;
  Fixture f(o);
  f.cache->insert(req("Can I return an opened item?"), answer("cached"));
  EXPECT_EQ(f.cache->lookup(req("Can't I return an opened item?")).level, CacheLevel::semantic);
}

TEST(ResponseCache, EvictionOrderIsLruAndRemovesVectors) {
  CacheOptions o;
  o.capacity = 3;
  o.threshold = 0.9;
  Fixture f(o);
  f.cache->insert(req("track my parcel"), answer("a"));
  f.cache->insert(req("reset my password"), answer("b"));
  f.cache->insert(req("opening hours on sunday"), answer("c"));
  EXPECT_EQ(f.cache->lookup(req("track my parcel")).level, CacheLevel::exact);  // now most recent
  f.cache->insert(req("cancel my subscription"), answer("d"));                 // evicts "reset my password"
  EXPECT_EQ(f.cache->lookup(req("reset my password")).level, CacheLevel::miss);
  EXPECT_EQ(f.cache->lookup(req("track my parcel")).level, CacheLevel::exact);
  CacheStats s = f.cache->stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.vectors, 3u);  // the evicted entry's vector is gone from the index
  EXPECT_EQ(s.evictions, 1u);
  // A full cache keeps taking inserts.
  for (int i = 0; i < 50; ++i) f.cache->insert(req("question number " + std::to_string(i)), answer("x"));
  s = f.cache->stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.vectors, 3u);
  EXPECT_EQ(f.cache->lookup(req("question number 49")).level, CacheLevel::exact);
}

TEST(ResponseCache, TtlExpiresBothLevels) {
  CacheOptions o;
  o.ttl_s = 60;
  o.threshold = 0.6;
  Fixture f(o);
  f.cache->insert(req("How can I reset my password?"), answer("x"));
  f.clock += 59;
  EXPECT_EQ(f.cache->lookup(req("How can I reset my password?")).level, CacheLevel::exact);
  EXPECT_EQ(f.cache->lookup(req("How do I reset my password please")).level, CacheLevel::semantic);
  f.clock += 2;
  EXPECT_EQ(f.cache->lookup(req("How do I reset my password please")).level, CacheLevel::miss);
  EXPECT_EQ(f.cache->lookup(req("How can I reset my password?")).level, CacheLevel::miss);
  CacheStats s = f.cache->stats();
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.vectors, 0u);
  EXPECT_EQ(s.expirations, 1u);
}

TEST(ResponseCache, NamespacesAreIsolated) {
  CacheOptions o;
  o.threshold = 0.5;
  Fixture f(o);
  f.cache->insert(req("How can I reset my password?", "key-a"), answer("for a"));
  EXPECT_EQ(f.cache->lookup(req("How can I reset my password?", "key-b")).level, CacheLevel::miss);
  EXPECT_EQ(f.cache->lookup(req("How do I reset my password", "key-b")).level, CacheLevel::miss);
  EXPECT_EQ(f.cache->lookup(req("How can I reset my password?", "key-a")).level, CacheLevel::exact);
  // Other generation parameters are another semantic space too.
  EXPECT_EQ(f.cache->lookup(req("How do I reset my password", "key-a", "t=0;max=99")).level, CacheLevel::miss);
  // Chat context must match for a semantic hit.
  CacheRequest a = req("How can I reset my password?", "key-a");
  a.context = "system: you are a bank";
  a.parts.prompt = a.context + "|" + a.query;
  f.cache->insert(a, answer("bank"));
  CacheRequest b = req("How do I reset my password", "key-a");
  b.context = "system: you are a shop";
  b.parts.prompt = b.context + "|" + b.query;
  EXPECT_EQ(f.cache->lookup(b).level, CacheLevel::miss);
  b.context = a.context;
  b.parts.prompt = b.context + "|" + b.query;
  CacheLookup l = f.cache->lookup(b);
  EXPECT_EQ(l.level, CacheLevel::semantic);
  EXPECT_EQ(l.answer.text, "bank");
}

TEST(ResponseCache, LargePromptsAreNotCached) {
  CacheOptions o;
  o.max_prompt_bytes = 100;
  Fixture f(o, CacheMode::exact);
  const std::string big(200, 'a');
  f.cache->insert(req(big), answer("x"));
  CacheLookup l = f.cache->lookup(req(big));
  EXPECT_EQ(l.level, CacheLevel::miss);
  EXPECT_TRUE(l.skipped);
  EXPECT_EQ(f.cache->stats().entries, 0u);
}

TEST(ResponseCache, FlushEmptiesEverything) {
  Fixture f;
  f.cache->insert(req("a question"), answer("x"));
  f.cache->insert(req("another question"), answer("y"));
  EXPECT_EQ(f.cache->flush(), 2u);
  EXPECT_EQ(f.cache->lookup(req("a question")).level, CacheLevel::miss);
  EXPECT_EQ(f.cache->stats().vectors, 0u);
}

TEST(ResponseCache, PersistsAcrossRestart) {
  test::TempDir dir;
  const std::string db = (fs::path(dir.path()) / "cache.db").string();
  CacheOptions o;
  o.db_path = db;
  o.threshold = 0.6;
  o.capacity = 2;
  {
    Fixture f(o);
    EXPECT_TRUE(f.warnings.empty());
    f.cache->insert(req("How can I reset my password?"), answer("Use the link."));
    f.cache->insert(req("first evicted"), answer("gone"));
    f.cache->insert(req("Where is my parcel?"), answer("On its way."));  // evicts the least recent
  }
  {
    Fixture f(o);
    EXPECT_TRUE(f.warnings.empty());
    EXPECT_EQ(f.cache->stats().entries, 2u);
    // The oldest entry was evicted before the restart and stays gone.
    EXPECT_EQ(f.cache->lookup(req("How can I reset my password?")).level, CacheLevel::miss);
    CacheLookup l = f.cache->lookup(req("where is my parcel?"));
    EXPECT_EQ(l.level, CacheLevel::exact);
    EXPECT_EQ(l.answer.text, "On its way.");
    EXPECT_EQ(l.answer.completion_tokens, 3);
    EXPECT_EQ(f.cache->lookup(req("Where is my parcel now?")).level, CacheLevel::semantic);
    EXPECT_EQ(f.cache->flush(), 2u);
  }
  {
    Fixture f(o);
    EXPECT_EQ(f.cache->stats().entries, 0u);  // the flush reached the file
  }
}

TEST(ResponseCache, FeedbackSurvivesRestart) {
  test::TempDir dir;
  CacheOptions o;
  o.db_path = (fs::path(dir.path()) / "cache.db").string();
  o.threshold = 0.6;
  const CacheRequest para = req("Where is my parcel now?");
  float sim = 0;
  {
    Fixture f(o);
    f.cache->insert(req("Where is my parcel?"), answer("On its way."));
    const CacheLookup hit = f.cache->lookup(para);
    ASSERT_EQ(hit.level, CacheLevel::semantic);
    sim = hit.similarity;
    f.cache->remember("resp-1", para, hit);
    ASSERT_EQ(f.cache->feedback("resp-1", "ns", false).status, FeedbackStatus::applied);
    EXPECT_EQ(f.cache->lookup(para).level, CacheLevel::miss);
  }
  {
    Fixture f(o);
    EXPECT_TRUE(f.warnings.empty());
    // The entry is back, and so is what feedback taught it: no hit at that similarity.
    EXPECT_EQ(f.cache->lookup(req("where is my parcel?")).level, CacheLevel::exact);
    const CacheLookup again = f.cache->lookup(para);
    EXPECT_EQ(again.level, CacheLevel::miss);
    EXPECT_TRUE(again.bound_rejected);
    EXPECT_GT(sim, 0.6f);
  }
}

TEST(CacheStore, ObservationsRoundTripAndAnOlderFileGainsTheColumn) {
  test::TempDir dir;
  const std::string db = (fs::path(dir.path()) / "old.db").string();
  {  // A file as the version before persisted feedback wrote it: no observations column.
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    const char* sql =
        "CREATE TABLE edgelm_cache_v1 (key TEXT PRIMARY KEY, sem_ns TEXT NOT NULL, query TEXT NOT NULL,"
        " response TEXT NOT NULL, finish_reason TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,"
        " completion_tokens INTEGER NOT NULL, created_s REAL NOT NULL, expires_s REAL NOT NULL,"
        " embedder TEXT NOT NULL, vector BLOB);"
        "INSERT INTO edgelm_cache_v1 VALUES ('k1', 'ns', 'q1', 'a1', 'stop', 1, 2, 10.0, 0.0, 'lexical', NULL);";
    ASSERT_EQ(sqlite3_exec(h, sql, nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(h);
  }
  std::string warning;
  auto store = CacheStore::open(db, warning);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_TRUE(warning.empty()) << warning;  // migrated in place, not moved aside
  auto rows = (*store)->load_all();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0].response, "a1");
  EXPECT_TRUE((*rows)[0].observations.empty());
  const std::vector<HitObservation> obs = {{0.83f, false}, {0.91f, true}};
  ASSERT_TRUE((*store)->set_observations("k1", obs).ok());
  ASSERT_TRUE((*store)->set_observations("no-such-key", obs).ok());
  CacheEntry e2 = (*rows)[0];
  e2.key = "k2";
  e2.observations = {{0.5f, true}};
  ASSERT_TRUE((*store)->put(e2).ok());
  store->reset();
  auto again = CacheStore::open(db, warning);
  ASSERT_TRUE(again.ok());
  rows = (*again)->load_all();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  ASSERT_EQ((*rows)[0].observations.size(), 2u);
  EXPECT_FLOAT_EQ((*rows)[0].observations[0].similarity, 0.83f);
  EXPECT_FALSE((*rows)[0].observations[0].correct);
  EXPECT_TRUE((*rows)[0].observations[1].correct);
  ASSERT_EQ((*rows)[1].observations.size(), 1u);
  EXPECT_TRUE((*rows)[1].observations[0].correct);
  // A damaged observations blob loses the feedback, not the row.
  {
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(h, "UPDATE edgelm_cache_v1 SET observations = x'0102' WHERE key = 'k1'", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
    sqlite3_close(h);
  }
  rows = (*again)->load_all();
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_TRUE((*rows)[0].observations.empty());
  EXPECT_EQ((*rows)[0].response, "a1");
}

TEST(ResponseCache, ExpiredRowsAreNotLoaded) {
  test::TempDir dir;
  CacheOptions o;
  o.db_path = (fs::path(dir.path()) / "c.db").string();
  o.ttl_s = 10;
  {
    Fixture f(o, CacheMode::exact);
    f.cache->insert(req("q"), answer("a"));
  }
  Fixture g(o, CacheMode::exact);
  g.clock += 5;
  EXPECT_EQ(g.cache->stats().entries, 1u);
  Fixture h(o, CacheMode::exact);
  h.clock = 2000;  // after expiry; the clock is read during create in this fixture's lambda
  EXPECT_EQ(h.cache->lookup(req("q")).level, CacheLevel::miss);
}

TEST(ResponseCache, CorruptFileStartsEmptyAndIsMovedAside) {
  test::TempDir dir;
  const std::string db = (fs::path(dir.path()) / "cache.db").string();
  {
    std::ofstream out(db, std::ios::binary);
    out << "this is not an sqlite database, just garbage bytes";
    for (int i = 0; i < 5000; ++i) out << static_cast<char>(i * 7);
  }
  CacheOptions o;
  o.db_path = db;
  Fixture f(o);
  ASSERT_EQ(f.warnings.size(), 1u);
  EXPECT_NE(f.warnings[0].find("moved to"), std::string::npos) << f.warnings[0];
  EXPECT_EQ(f.cache->stats().entries, 0u);
  EXPECT_EQ(f.cache->stats().db_path, db);
  bool aside = false;
  for (const auto& e : fs::directory_iterator(dir.path()))
    aside |= e.path().filename().string().rfind("cache.db.corrupt-", 0) == 0;
  EXPECT_TRUE(aside);
  f.cache->insert(req("works now"), answer("yes"));
  EXPECT_EQ(f.cache->lookup(req("works now")).level, CacheLevel::exact);
}

TEST(ResponseCache, UnusableDbPathFallsBackToMemory) {
  CacheOptions o;
  o.db_path = "/nonexistent-dir-edgelm/x/cache.db";
  Fixture f(o);
  EXPECT_FALSE(f.warnings.empty());
  f.cache->insert(req("q"), answer("a"));
  EXPECT_EQ(f.cache->lookup(req("q")).level, CacheLevel::exact);
}

TEST(ResponseCache, ConcurrentLookupsAndInsertsKeepTheBounds) {
  CacheOptions o;
  o.capacity = 40;
  o.threshold = 0.7;
  Fixture f(o);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&f, t] {
      for (int i = 0; i < 300; ++i) {
        const std::string q = "question " + std::to_string((i * 7 + t) % 97) + " about returns";
        CacheLookup l = f.cache->lookup(req(q));
        if (l.level == CacheLevel::miss) f.cache->insert(req(q), answer("a" + std::to_string(i)), l.vector);
      }
    });
  }
  for (auto& th : threads) th.join();
  CacheStats s = f.cache->stats();
  EXPECT_LE(s.entries, 40u);
  EXPECT_EQ(s.vectors, s.entries);  // every entry has its vector, no orphan vectors
  EXPECT_EQ(s.hits_exact + s.hits_semantic + s.misses, 8u * 300u);
  EXPECT_GT(s.hits_exact, 0u);
}

TEST(ResponseCache, InvalidOptions) {
  std::vector<std::string> w;
  CacheOptions o;
  o.capacity = 0;
  EXPECT_FALSE(ResponseCache::create(o, nullptr, w).ok());
  o = {};
  o.threshold = 1.5;
  EXPECT_FALSE(ResponseCache::create(o, nullptr, w).ok());
  o = {};
  o.mode = CacheMode::semantic;
  EXPECT_FALSE(ResponseCache::create(o, nullptr, w).ok());
}

}  // namespace
}  // namespace edgelm::cache
