#include <gtest/gtest.h>

#include "cache/exact_cache.h"
#include "cache/guards.h"
#include "cache/lexical_embedder.h"
#include "cache/normalize_key.h"
#include "cache/semantic_index.h"

namespace edgelm::cache {
namespace {

TEST(NormalizeKey, NfkcWhitespaceAndCase) {
  EXPECT_EQ(normalize_text("  Ｈｅｌｌｏ\t\n  world\u00A0! ", false), "Hello world !");
  EXPECT_EQ(normalize_text("ﬁne  CAFÉ", true), "fine café");
  EXPECT_EQ(normalize_text("Cafe\u0301", false), "Café");  // composed
  EXPECT_NE(exact_key({"m", "Hi", "t=0"}, false), exact_key({"m", "hi", "t=0"}, false));
  EXPECT_EQ(exact_key({"m", "Hi  there", "t=0"}, true), exact_key({"m", "hi there", "t=0"}, true));
  EXPECT_NE(exact_key({"m", "hi", "t=0"}, true), exact_key({"m", "hi", "t=1"}, true));
  EXPECT_NE(exact_key({"m1", "hi", "t=0"}, true), exact_key({"m2", "hi", "t=0"}, true));
  // Invalid UTF-8 does not crash and stays distinguishable from valid text.
  EXPECT_FALSE(normalize_text("a\xff" "b", false).empty());
}

TEST(NormalizeKey, QueryWordsExpandContractions) {
  EXPECT_EQ(query_words("Can't I return it?", true), (std::vector<std::string>{"can", "not", "i", "return", "it"}));
  EXPECT_EQ(query_words("I won\u2019t; it's fine", true),
            (std::vector<std::string>{"i", "will", "not", "it", "fine"}));
  EXPECT_EQ(query_words("don't", true), (std::vector<std::string>{"do", "not"}));
  EXPECT_EQ(light_stem("items"), "item");
  EXPECT_EQ(light_stem("address"), "address");
  EXPECT_EQ(light_stem("bus"), "bus");
}

TEST(Guards, Negation) {
  GuardOptions o;
  EXPECT_EQ(guard_check(guard_features("Can I return an opened item?"), guard_features("Can't I return an opened item?"), o),
            "negation");
  EXPECT_EQ(guard_check(guard_features("Can I return an item without a receipt?"),
                        guard_features("Can I return an item if I don't have the receipt?"), o),
            "");
  EXPECT_EQ(guard_check(guard_features("Do you never close?"), guard_features("Do you close?"), o), "negation");
  o.negation = false;
  EXPECT_EQ(guard_check(guard_features("Can I return it?"), guard_features("I cannot return it?"), o), "");
}

TEST(Guards, Numbers) {
  GuardOptions o;
  EXPECT_EQ(guard_features("a 30 day window").numbers, (std::vector<std::string>{"30"}));
  EXPECT_EQ(guard_features("thirty days").numbers, (std::vector<std::string>{"30"}));
  EXPECT_EQ(guard_features("twenty five euros").numbers, (std::vector<std::string>{"25"}));
  EXPECT_EQ(guard_features("costs 1,000 or 2.50").numbers, (std::vector<std::string>{"1000", "2.5"}));
  EXPECT_EQ(guard_check(guard_features("Can I return it after 30 days?"), guard_features("Can I return it after thirty days?"), o), "");
  EXPECT_EQ(guard_check(guard_features("Can I return it after 30 days?"), guard_features("Can I return it after 60 days?"), o),
            "numbers");
  EXPECT_EQ(guard_check(guard_features("Do you open at 9?"), guard_features("Do you open at 10?"), o), "numbers");
  EXPECT_TRUE(guard_features("Which one of these is the blue one?").numbers.empty());
  o.numbers = false;
  EXPECT_EQ(guard_check(guard_features("after 30 days"), guard_features("after 60 days"), o), "");
}

TEST(Guards, Entities) {
  GuardOptions o;
  EXPECT_EQ(guard_features("Do you ship to Canada from the UK?").entities, (std::vector<std::string>{"canada", "uk"}));
  EXPECT_EQ(guard_features("Is the X200 waterproof?").entities, (std::vector<std::string>{"x200"}));
  EXPECT_EQ(guard_features("Does my iPhone work?").entities, (std::vector<std::string>{"iphone"}));
  EXPECT_TRUE(guard_features("Where is my order? I paid yesterday.").entities.empty());
  EXPECT_EQ(guard_check(guard_features("Do you ship to Canada?"), guard_features("Do you ship to Mexico?"), o), "entities");
  EXPECT_EQ(guard_check(guard_features("Is the Berlin store open on Sundays?"),
                        guard_features("Is your Berlin shop open on Sunday?"), o),
            "");
  o.entities = false;
  EXPECT_EQ(guard_check(guard_features("Do you ship to Canada?"), guard_features("Do you ship to Mexico?"), o), "");
}

float sim(LexicalEmbedder& e, const char* a, const char* b) { return dot(*e.embed(a), *e.embed(b)); }

TEST(LexicalEmbedder, UnitVectorsAndSimilarity) {
  LexicalEmbedder e(512);
  std::vector<float> v = *e.embed("How do I reset my password?");
  ASSERT_EQ(v.size(), 512u);
  EXPECT_NEAR(dot(v, v), 1.0f, 1e-5);
  EXPECT_NEAR(sim(e, "How do I reset my password?", "how do i reset my password"), 1.0f, 1e-5);
  const float near = sim(e, "How do I reset my password?", "How can I reset my password?");
  const float far = sim(e, "How do I reset my password?", "What are your opening hours on Sunday?");
  EXPECT_GT(near, 0.85f);
  EXPECT_LT(far, 0.3f);
  std::vector<float> z = *e.embed("");
  EXPECT_EQ(dot(z, z), 0.0f);
}

TEST(SemanticIndex, AddSearchRemoveReuse) {
  LexicalEmbedder e(256);
  SemanticIndex idx(256, 2);
  const char* texts[] = {"reset my password", "opening hours today", "ship to canada", "refund for a broken phone"};
  std::vector<uint64_t> labels;
  for (const char* t : texts) labels.push_back(*idx.add(*e.embed(t)));
  EXPECT_EQ(idx.size(), 4u);
  auto r = idx.search(*e.embed("reset my password please"), 2);
  ASSERT_FALSE(r.empty());
  EXPECT_EQ(r[0].first, labels[0]);
  EXPECT_GT(r[0].second, 0.7f);
  idx.remove(labels[0]);
  EXPECT_EQ(idx.size(), 3u);
  r = idx.search(*e.embed("reset my password please"), 4);
  for (const auto& [l, s] : r) EXPECT_NE(l, labels[0]);
  // The freed slot is reused for the next vector, which is then found.
  const uint64_t again = *idx.add(*e.embed("track my parcel"));
  EXPECT_EQ(again, labels[0]);
  r = idx.search(*e.embed("track my parcel"), 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].first, again);
  EXPECT_NEAR(r[0].second, 1.0f, 1e-4);
  EXPECT_FALSE(idx.add(std::vector<float>(3, 0.f)).ok());
}

CacheEntry entry(const std::string& key, size_t response_bytes = 10, double expires = 0) {
  CacheEntry e;
  e.key = key;
  e.response.assign(response_bytes, 'x');
  e.expires_s = expires;
  return e;
}

TEST(ExactCache, LruOrderEntriesBytesAndTtl) {
  ExactCache c(3, 1 << 20);
  std::vector<CacheEntry> gone;
  EXPECT_TRUE(c.put(entry("a")).empty());
  EXPECT_TRUE(c.put(entry("b")).empty());
  EXPECT_TRUE(c.put(entry("c")).empty());
  ASSERT_NE(c.find("a", 0, gone), nullptr);  // a becomes most recent
  std::vector<CacheEntry> ev = c.put(entry("d"));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].key, "b");
  EXPECT_EQ(c.keys_mru(), (std::vector<std::string>{"d", "a", "c"}));
  // Bytes bound.
  ExactCache small(100, 3 * entry("x", 100).bytes());
  for (const char* k : {"p", "q", "r"}) EXPECT_TRUE(small.put(entry(k, 100)).empty());
  ev = small.put(entry("s", 100));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].key, "p");
  EXPECT_LE(small.bytes(), 3 * entry("x", 100).bytes());
  ev = small.put(entry("huge", 10000));  // never fits: refused, nothing else lost
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].key, "huge");
  EXPECT_EQ(small.size(), 3u);
  // TTL.
  ExactCache t(10, 1 << 20);
  t.put(entry("k", 10, 100.0));
  EXPECT_NE(t.find("k", 99.0, gone), nullptr);
  EXPECT_TRUE(gone.empty());
  EXPECT_EQ(t.find("k", 100.0, gone), nullptr);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(t.size(), 0u);
}

}  // namespace
}  // namespace edgelm::cache
