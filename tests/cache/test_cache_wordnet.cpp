// WordNet loading (a hand-written miniature database in the wndb format, and the real
// wordnet-base one), the opposites guard, selectable guards, the lexical embedder's WordNet mode,
// the error bound, the hit ledger and feedback through ResponseCache.
#include <gtest/gtest.h>

#include "cache/error_bound.h"
#include "cache/guards.h"
#include "cache/hit_ledger.h"
#include "cache/lexical_embedder.h"
#include "cache/opposites.h"
#include "cache/response_cache.h"
#include "cache/wordnet.h"
#include "support/test_data.h"
#include "test_wordnet_data.h"

namespace edgelm::cache {
namespace {

using test::TempDir;
using test::write_file;

// A miniature database: open/close(+shut) verbs with derived nouns, wet/dry with the satellite
// damp, store/shop nouns sharing a sense.
void write_mini_wordnet(const TempDir& d) {
  const std::string licence = "  1 This software and database is being provided to you, the LICENSEE\n";
  write_file(d.file("index.noun"), licence +
                                       "closing n 1 1 + 1 0 00000200  \n"
                                       "opening n 1 1 + 1 0 00000100  \n"
                                       "shop n 2 0 2 0 00000300 00000400  \n"
                                       "store n 1 0 1 0 00000300  \n");
  write_file(d.file("index.verb"), licence +
                                       "close v 1 1 ! 1 0 00001100  \n"
                                       "open v 1 1 ! 1 0 00001000  \n"
                                       "shut v 1 0 1 0 00001100  \n");
  write_file(d.file("index.adj"), licence +
                                      "damp a 1 1 & 1 0 00002100  \n"
                                      "dry a 1 1 ! 1 0 00002200  \n"
                                      "wet a 1 1 ! 1 0 00002000  \n");
  write_file(d.file("index.adv"), licence + "quickly r 1 0 1 0 00003000  \n");
  write_file(d.file("data.noun"), licence +
                                      "00000100 04 n 01 opening 0 001 + 00001000 v 0101 | an opening  \n"
                                      "00000200 04 n 01 closing 0 001 + 00001100 v 0101 | a closing  \n"
                                      "00000300 06 n 02 store 0 shop 0 000 | a store  \n"
                                      "00000400 04 n 01 shop 0 000 | a workshop  \n");
  write_file(d.file("data.verb"), licence +
                                      "00001000 35 v 01 open 0 002 ! 00001100 v 0101 + 00000100 n 0101 | open it  \n"
                                      "00001100 35 v 02 close 0 shut 0 002 ! 00001000 v 0101 + 00000200 n 0101 | shut "
                                      "it  \n");
  write_file(d.file("data.adj"), licence +
                                     "00002000 00 a 01 wet(a) 0 002 ! 00002200 a 0101 & 00002100 s 0000 | wet  \n"
                                     "00002100 00 s 01 damp 0 001 & 00002000 a 0000 | damp  \n"
                                     "00002200 00 a 01 dry 0 001 ! 00002000 a 0101 | dry  \n");
  write_file(d.file("data.adv"), licence + "00003000 02 r 01 quickly 0 000 | fast  \n");
  write_file(d.file("verb.exc"), "shutting shut\n");
  write_file(d.file("noun.exc"), "mice mouse\n");  // no such lemma here: dropped
  write_file(d.file("adj.exc"), "");
  write_file(d.file("adv.exc"), "");
}

TEST(WordNet, LoadsTheMiniatureDatabase) {
  TempDir d;
  write_mini_wordnet(d);
  auto r = WordNet::load(d.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  const WordNet& wn = **r;
  EXPECT_EQ(wn.n_lemmas(), 11u);
  EXPECT_EQ(wn.n_synsets(), 10u);
  const int32_t shop = wn.find("shop"), store = wn.find("store");
  ASSERT_GE(shop, 0);
  EXPECT_EQ(wn.lemma(shop), "shop");
  EXPECT_EQ(wn.find("mouse"), -1);
  EXPECT_EQ(wn.pos_mask(shop), WordNet::noun);
  ASSERT_EQ(wn.senses(shop).size(), 2u);
  EXPECT_EQ(WordNet::sense_rank(wn.senses(shop)[0]), 0);
  EXPECT_EQ(WordNet::sense_rank(wn.senses(shop)[1]), 1);
  EXPECT_EQ(WordNet::sense_synset(wn.senses(shop)[0]), WordNet::sense_synset(wn.senses(store)[0]));  // synonyms
  // Direct antonyms, the antonym synset's other members, derivations and satellites.
  EXPECT_TRUE(wn.opposite(wn.find("open"), wn.find("close")));
  EXPECT_TRUE(wn.opposite(wn.find("close"), wn.find("open")));
  EXPECT_TRUE(wn.opposite(wn.find("shut"), wn.find("open")));
  EXPECT_TRUE(wn.opposite(wn.find("opening"), wn.find("closing")));
  EXPECT_TRUE(wn.opposite(wn.find("damp"), wn.find("dry")));
  EXPECT_TRUE(wn.opposite(wn.find("wet"), wn.find("dry")));
  EXPECT_FALSE(wn.opposite(wn.find("store"), wn.find("shop")));
  EXPECT_FALSE(wn.opposite(wn.find("open"), wn.find("opening")));
  EXPECT_FALSE(wn.opposite(-1, wn.find("open")));
  // Exceptions and morphy's rules.
  EXPECT_EQ(wn.lemmatize("shutting"), "shut");
  EXPECT_EQ(wn.lemmatize("opened"), "open");
  EXPECT_EQ(wn.lemmatize("shops"), "shop");
  EXPECT_EQ(wn.lemmatize("opening"), "open");  // a noun lemma, but no verb: the verb reading wins
  EXPECT_EQ(wn.lemmatize("damper"), "damp");
  EXPECT_EQ(wn.lemmatize("wetter"), "wetter");  // doubled consonants come from adj.exc, absent here
  EXPECT_EQ(wn.lemmatize("unknownword"), "unknownword");
  EXPECT_GT(wn.bytes(), 0u);
}

TEST(WordNet, MissingDataNamesThePackage) {
  TempDir d;
  auto r = WordNet::load(d.file("nothing"));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("wordnet-base"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("index.noun"), std::string::npos) << r.error().message;
  write_mini_wordnet(d);
  std::remove(d.file("data.adv").c_str());
  r = WordNet::load(d.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("data.adv"), std::string::npos) << r.error().message;
}

TEST(WordNet, MalformedLineNamesFileAndLine) {
  TempDir d;
  write_mini_wordnet(d);
  write_file(d.file("data.adj"), "00002000 00 a 01 wet 0 002 ! zzz a 0101 | wet\n");
  auto r = WordNet::load(d.path());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("data.adj': line 1"), std::string::npos) << r.error().message;
}

TEST(WordNet, RealDatabase) {
  const std::shared_ptr<const WordNet> wn = test_wordnet();
  ASSERT_TRUE(wn);
  EXPECT_GT(wn->n_lemmas(), 130000u);
  EXPECT_GT(wn->n_synsets(), 110000u);
  EXPECT_LT(wn->bytes(), size_t{16} << 20);
  auto opp = [&](const char* a, const char* b) { return wn->opposite(wn->find(a), wn->find(b)); };
  EXPECT_TRUE(opp("increase", "decrease"));
  EXPECT_TRUE(opp("open", "close"));
  EXPECT_TRUE(opp("maximum", "minimum"));
  EXPECT_TRUE(opp("early", "late"));
  EXPECT_TRUE(opp("lock", "unlock"));
  EXPECT_FALSE(opp("store", "shop"));
  EXPECT_FALSE(opp("refund", "return"));
  EXPECT_GE(wn->find("turn_on"), 0);
  EXPECT_GE(wn->find("check_in"), 0);  // "check-in" and "check in" meet
  EXPECT_EQ(wn->lemmatize("children"), "child");
  EXPECT_EQ(wn->lemmatize("forgotten"), "forget");
  EXPECT_EQ(wn->lemmatize("closed"), "close");
  EXPECT_EQ(wn->lemmatize("after"), "after");
  const std::vector<std::string> hb = wn->base_forms("higher");
  EXPECT_NE(std::find(hb.begin(), hb.end(), "high"), hb.end());
}

std::optional<std::pair<std::string, std::string>> opposite_of(const char* a, const char* b) {
  const WordNet& wn = *test_wordnet();
  return find_opposite(opposite_forms(query_words(a, true), wn), opposite_forms(query_words(b, true), wn), wn);
}

TEST(Opposites, IssuePairsAndSharedWords) {
  ASSERT_TRUE(test_wordnet());
  EXPECT_TRUE(opposite_of("Should I take the pill before meals?", "Should I take the pill after meals?"));
  EXPECT_TRUE(opposite_of("Is it in stock?", "Is it out of stock?"));
  EXPECT_TRUE(opposite_of("What time is check-in?", "What time is check-out?"));
  EXPECT_TRUE(opposite_of("How do I increase the volume?", "How do I decrease the volume?"));
  EXPECT_TRUE(opposite_of("When do you open?", "When do you close?"));
  EXPECT_TRUE(opposite_of("What is the max size?", "What is the min size?"));
  EXPECT_TRUE(opposite_of("Why is my bill higher?", "Why is my bill lower?"));  // comparatives
  EXPECT_TRUE(opposite_of("Is the pool heated?", "Is the pool unheated?"));     // prefix
  EXPECT_TRUE(opposite_of("Is this a smoking room?", "Is this a non-smoking room?"));
  const auto p = opposite_of("Turn the light on", "Turn the light off");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->first, "on");
  EXPECT_EQ(p->second, "off");
  // Words both share never count; paraphrases pass.
  EXPECT_FALSE(opposite_of("What time do you open and close?", "When are you open?"));
  EXPECT_FALSE(opposite_of("What are your opening hours?", "What time do you open and close?"));
  EXPECT_FALSE(opposite_of("How do I shut the valve?", "How do I close the valve?"));
  EXPECT_FALSE(opposite_of("Can I return an item?", "Is it possible to send an item back?"));
  EXPECT_TRUE(prefix_opposite("dislike", "like"));
  EXPECT_FALSE(prefix_opposite("unit", "it"));  // the stem is too short
  EXPECT_TRUE(curated_opposite("after", "before"));
  EXPECT_FALSE(curated_opposite("after", "after"));
}

TEST(Guards, SelectableListAndOpposites) {
  auto all = parse_guard_list("all");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(guard_list(*all), "negation,numbers,entities,opposites");
  auto some = parse_guard_list(" opposites , Negation");
  ASSERT_TRUE(some.ok()) << some.error().message;
  EXPECT_EQ(guard_list(*some), "negation,opposites");
  EXPECT_EQ(guard_list(*parse_guard_list("off")), "");
  EXPECT_EQ(guard_list(*parse_guard_list("none")), "");
  auto bad = parse_guard_list("negation,antonyms");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("'antonyms'"), std::string::npos);
  EXPECT_FALSE(parse_guard_list("numbers,numbers").ok());
  EXPECT_FALSE(parse_guard_list("numbers,").ok());

  GuardOptions o = *all;
  o.wordnet = test_wordnet();
  const WordNet* wn = o.wordnet.get();
  auto check = [&](const char* a, const char* b, const GuardOptions& g) {
    return guard_check(guard_features(a, wn), guard_features(b, wn), g);
  };
  EXPECT_EQ(check("Should I take the pill before meals?", "Should I take the pill after meals?", o), "opposites");
  EXPECT_EQ(check("Is parking available?", "Is parking unavailable?", o), "negation");  // a prefixed antonym
  GuardOptions no_opp = o;
  no_opp.opposites = false;
  EXPECT_EQ(check("Should I take the pill before meals?", "Should I take the pill after meals?", no_opp), "");
  GuardOptions no_wn = o;
  no_wn.wordnet = nullptr;  // nothing to compare with: the guard cannot fire
  EXPECT_EQ(guard_check(guard_features("before meals"), guard_features("after meals"), no_wn), "");
}

TEST(LexicalEmbedder, WordNetModeLemmasCompoundsSynonyms) {
  auto wn = test_wordnet();
  ASSERT_TRUE(wn);
  LexicalEmbedder e(1024, wn), plain(1024);
  EXPECT_EQ(e.name(), "lexical-wn-1024");
  EXPECT_EQ(plain.name(), "lexical-1024");
  EXPECT_EQ(e.tokens("How do I switch on the lights?"),
            (std::vector<std::string>{"how", "do", "i", "switch_on", "the", "light"}));
  EXPECT_EQ(e.tokens("Check-in opened"), (std::vector<std::string>{"check_in", "open"}));
  auto sim = [](LexicalEmbedder& x, const char* a, const char* b) { return dot(*x.embed(a), *x.embed(b)); };
  // Synonyms and inflections move closer than in the plain embedder.
  EXPECT_GT(sim(e, "How do I shut the valve?", "How do I close the valve?"),
            sim(plain, "How do I shut the valve?", "How do I close the valve?") + 0.1f);
  EXPECT_GT(sim(e, "Do you have a store in Berlin?", "Do you have a shop in Berlin?"),
            sim(plain, "Do you have a store in Berlin?", "Do you have a shop in Berlin?") + 0.05f);
  EXPECT_GT(sim(e, "Is the item opened?", "Can I open the item?"),
            sim(plain, "Is the item opened?", "Can I open the item?"));
  // Question words count: "when" and "where" ask different things.
  EXPECT_LT(sim(e, "When is the store?", "Where is the store?"),
            sim(plain, "When is the store?", "Where is the store?"));
  // Deterministic, unit length, zero for no features.
  const std::vector<float> v = *e.embed("Shut the valve");
  EXPECT_EQ(v, *e.embed("Shut the valve"));
  EXPECT_NEAR(dot(v, v), 1.0f, 1e-5f);
  const std::vector<float> z = *e.embed("?!");
  EXPECT_EQ(dot(z, z), 0.0f);

  auto w = parse_lexical_weights("synonym=0.5,senses=1");
  ASSERT_TRUE(w.ok());
  EXPECT_FLOAT_EQ(w->synonym, 0.5f);
  EXPECT_EQ(w->senses, 1);
  EXPECT_FLOAT_EQ(w->stop, LexicalWeights{}.stop);
  EXPECT_FALSE(parse_lexical_weights("synonyms=1").ok());
  EXPECT_FALSE(parse_lexical_weights("senses=9").ok());
  EXPECT_FALSE(parse_lexical_weights("stop=-1").ok());
  EXPECT_FALSE(parse_lexical_weights("stop").ok());
}

TEST(ErrorBound, PriorFeedbackAndFloor) {
  ErrorBound b;  // threshold 0.80, bound 1%
  EXPECT_NEAR(prior_error(b, 0.80), 0.01, 1e-12);
  EXPECT_LT(prior_error(b, 0.90), 0.01);
  EXPECT_GT(prior_error(b, 0.70), 0.01);
  // Without feedback: exactly the threshold.
  EXPECT_TRUE(error_bound_accepts(b, {}, 0.80));
  EXPECT_FALSE(error_bound_accepts(b, {}, 0.799));
  // A wrong hit at 0.85 refuses 0.85 and below, not above.
  const std::vector<HitObservation> wrong = {{0.85f, false}};
  EXPECT_FALSE(error_bound_accepts(b, wrong, 0.85));
  EXPECT_FALSE(error_bound_accepts(b, wrong, 0.82));
  EXPECT_TRUE(error_bound_accepts(b, wrong, 0.87));
  // Right hits lower the entry's threshold a little above where they were seen.
  std::vector<HitObservation> right(4, {0.80f, true});
  EXPECT_TRUE(error_bound_accepts(b, right, 0.80));
  EXPECT_FALSE(error_bound_accepts(b, {}, 0.78));
  // A looser bound lowers the prior's threshold, a tighter one raises it.
  ErrorBound loose = b, tight = b;
  loose.max_error_rate = 0.05;
  tight.max_error_rate = 0.002;
  EXPECT_TRUE(error_bound_accepts(loose, {}, 0.76));
  EXPECT_FALSE(error_bound_accepts(tight, {}, 0.82));
  EXPECT_TRUE(error_bound_accepts(tight, {}, 0.86));
  EXPECT_LT(error_bound_floor(b), 0.80);
  EXPECT_GT(error_bound_floor(b), 0.6);
  // Nothing below the floor is ever accepted, even with the most right hits.
  const std::vector<HitObservation> many(ErrorBound::kMaxObservations, {0.5f, true});
  EXPECT_FALSE(error_bound_accepts(b, many, error_bound_floor(b) - 0.01));
}

TEST(HitLedger, BoundedAndPerNamespace) {
  HitLedger l(2);
  l.add("a", {"ns1", "k1", 1, 0.9f, false});
  l.add("b", {"ns1", "k2", 2, 0.8f, false});
  EXPECT_TRUE(l.find("a", "ns1"));
  EXPECT_FALSE(l.find("a", "ns2"));
  l.add("c", {"ns2", "k3", 3, 0.85f, true});
  EXPECT_EQ(l.size(), 2u);
  EXPECT_FALSE(l.find("a", "ns1"));  // the oldest went
  ASSERT_TRUE(l.find("c", "ns2"));
  EXPECT_TRUE(l.find("c", "ns2")->exact);
  l.clear();
  EXPECT_EQ(l.size(), 0u);
}

TEST(ResponseCache, FeedbackMovesTheEntrysThreshold) {
  CacheOptions o;
  o.mode = CacheMode::semantic;
  o.threshold = 0.6;
  o.guard_options.wordnet = test_wordnet();
  std::vector<std::string> warnings;
  auto c = ResponseCache::create(o, std::make_shared<LexicalEmbedder>(1024, test_wordnet()), warnings);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ResponseCache& cache = **c;
  auto req = [](const std::string& q, const std::string& ns) {
    CacheRequest r;
    r.ns = ns;
    r.parts = {"model", q, "t=0"};
    r.query = q;
    return r;
  };
  cache.insert(req("Can I return an opened item to the shop?", "ns"), {"yes", "stop", 5, 1});
  const CacheRequest para = req("Can I return an opened item to your shop please?", "ns");
  CacheLookup hit = cache.lookup(para);
  ASSERT_EQ(hit.level, CacheLevel::semantic);
  cache.remember("id-1", para, hit);
  EXPECT_EQ(cache.feedback("id-1", "other", false).status, FeedbackStatus::unknown_id);
  EXPECT_EQ(cache.feedback("id-2", "ns", false).status, FeedbackStatus::unknown_id);
  const FeedbackResult f = cache.feedback("id-1", "ns", false);
  EXPECT_EQ(f.status, FeedbackStatus::applied);
  EXPECT_FLOAT_EQ(f.similarity, hit.similarity);
  const CacheLookup after = cache.lookup(para);
  EXPECT_EQ(after.level, CacheLevel::miss);
  EXPECT_TRUE(after.bound_rejected);
  EXPECT_EQ(cache.stats().bound_rejections, 1u);
  EXPECT_EQ(cache.stats().feedback_wrong, 1u);
  // A replaced entry is another entry: old feedback ids no longer reach it.
  cache.insert(req("Can I return an opened item to the shop?", "ns"), {"yes, within 30 days", "stop", 5, 4});
  EXPECT_EQ(cache.lookup(para).level, CacheLevel::semantic);
  EXPECT_EQ(cache.feedback("id-1", "ns", false).status, FeedbackStatus::entry_gone);
  // Without WordNet the opposites guard cannot be asked for.
  CacheOptions bad = o;
  bad.guard_options.wordnet = nullptr;
  EXPECT_FALSE(ResponseCache::create(bad, std::make_shared<LexicalEmbedder>(), warnings).ok());
  bad.guard_options.opposites = false;
  EXPECT_TRUE(ResponseCache::create(bad, std::make_shared<LexicalEmbedder>(), warnings).ok());
  bad.max_error_rate = 0;
  EXPECT_FALSE(ResponseCache::create(bad, std::make_shared<LexicalEmbedder>(), warnings).ok());
}

TEST(ResponseCache, RefusedCandidatesKeepTheirRecency) {
  CacheOptions o;
  o.mode = CacheMode::semantic;
  o.capacity = 2;
  o.guard_options.wordnet = test_wordnet();
  std::vector<std::string> warnings;
  auto c = ResponseCache::create(o, std::make_shared<LexicalEmbedder>(1024, test_wordnet()), warnings);
  ASSERT_TRUE(c.ok()) << c.error().message;
  auto req = [](const std::string& q) {
    CacheRequest r;
    r.parts = {"model", q, "t=0"};
    r.query = q;
    return r;
  };
  (*c)->insert(req("Should I take the pill before meals?"), {"before", "stop", 5, 1});
  (*c)->insert(req("Where is the train station?"), {"there", "stop", 5, 1});
  const CacheLookup l = (*c)->lookup(req("Should I take the pill after meals?"));
  EXPECT_EQ(l.level, CacheLevel::miss);
  EXPECT_EQ(l.guard_rejected, "opposites");
  // The refused entry was not used: it is still the least recent, so it goes first.
  (*c)->insert(req("How do I reset my password?"), {"so", "stop", 5, 1});
  const std::vector<std::string> keys = (*c)->keys_mru();
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_NE(keys[1].find("train station"), std::string::npos) << keys[1];
}

}  // namespace
}  // namespace edgelm::cache
