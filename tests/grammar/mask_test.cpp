// fill_mask == brute force (a fresh copy of the matcher + accept_token for every token) on
// random grammars with a small synthetic vocabulary, and on the real llama-spm and deepseek-llm
// vocabularies at many states of JSON grammars (tokenized random documents, random walks).
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "format/gguf_reader.h"
#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "support/test_data.h"
#include "test_grammars.h"
#include "tokenizer/tokenizer.h"

namespace edgelm::grammar {
namespace {

std::vector<uint8_t> brute_mask(const Matcher& m) {
  std::vector<uint8_t> out(static_cast<size_t>(m.tokens().n_tokens()));
  for (int32_t id = 0; id < m.tokens().n_tokens(); ++id) {
    Matcher c = m;
    out[static_cast<size_t>(id)] = c.accept_token(id) ? 1 : 0;
  }
  return out;
}

// Compares at the current state; returns the allowed ids.
std::vector<int32_t> expect_mask_matches(const Matcher& m, const std::string& where) {
  std::vector<uint8_t> mask(static_cast<size_t>(m.tokens().n_tokens()), 9);
  m.fill_mask(mask);
  const std::vector<uint8_t> want = brute_mask(m);
  std::vector<int32_t> allowed;
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (mask[i] != want[i] && bad++ < 5)
      ADD_FAILURE() << where << ": token " << i << " '" << m.tokens().piece(static_cast<int32_t>(i))
                    << "' mask=" << int(mask[i]) << " brute=" << int(want[i]);
    if (want[i]) allowed.push_back(static_cast<int32_t>(i));
    if (want[i] != m.allows(static_cast<int32_t>(i)) && bad++ < 5)
      ADD_FAILURE() << where << ": allows() differs at " << i;
  }
  return allowed;
}

std::string random_grammar(std::mt19937& rng) {
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const char* atoms[] = {"\"a\"", "\"b\"", "\"ab\"", "[a-c]", "[^a]", "\"\xC3\xA9\"", "[\xC3\xA9\xE4\xB8\xAD]",
                         ".",     "\"\""};
  const char* posts[] = {"", "", "", "*", "+", "?", "{2}", "{1,3}", "{,2}", "{2,}"};
  std::string g;
  const int n_rules = 1 + pick(3);
  for (int r = 0; r < n_rules; ++r) {
    g += (r == 0 ? std::string("root") : "r" + std::to_string(r)) + " ::= ";
    const int n_alts = 1 + pick(3);
    for (int a = 0; a < n_alts; ++a) {
      if (a) g += " | ";
      const int n_elems = 1 + pick(3);
      for (int e = 0; e < n_elems; ++e) {
        std::string el;
        const int k = pick(10);
        if (k < 2 && r + 1 < n_rules) {
          el = "r" + std::to_string(r + 1 + pick(n_rules - r - 1));
        } else if (k == 2) {
          el = std::string("(") + atoms[pick(9)] + " | " + atoms[pick(9)] + " " + atoms[pick(9)] + ")";
        } else {
          el = atoms[pick(9)];
        }
        g += el + posts[pick(10)] + " ";
      }
    }
    g += "\n";
  }
  return g;
}

// Runs the body with caches keyed on only `depth` stack entries (more uncertain tokens).
class KeyDepth {
 public:
  explicit KeyDepth(uint32_t d) : saved_(detail::mask_key_depth()) { detail::set_mask_key_depth(d); }
  ~KeyDepth() { detail::set_mask_key_depth(saved_); }

 private:
  uint32_t saved_;
};

class FillMaskDepth : public testing::TestWithParam<uint32_t> {};

TEST_P(FillMaskDepth, RandomGrammarsSyntheticVocab) {
  KeyDepth depth(GetParam());
  std::vector<std::string> pieces = {"",
                                     "\xC3",
                                     "\xA9",
                                     "\xE4",
                                     "\xB8",
                                     "\xAD",
                                     "\xC3\xA9",
                                     "\xE4\xB8",
                                     "\xB8\xAD",
                                     "a\xC3",
                                     "\xA9"
                                     "a",
                                     "\xE4\xB8\xAD",
                                     "\xFF",
                                     "\xC0\x80"};
  const char* alpha[] = {"a", "b", "c", "d"};
  for (const char* x : alpha) {
    pieces.emplace_back(x);
    for (const char* y : alpha) {
      pieces.push_back(std::string(x) + y);
      for (const char* z : alpha) pieces.push_back(std::string(x) + y + z);
    }
  }
  pieces.push_back("ab");  // a duplicate piece
  auto tok = std::make_shared<TokenIndex>(pieces);
  std::mt19937 rng(1234);
  int tested = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const std::string text = random_grammar(rng);
    auto g = parse_gbnf(text);
    if (!g.ok()) continue;  // e.g. left recursion through a nullable repetition
    ++tested;
    for (int walk = 0; walk < 3; ++walk) {
      Matcher m(*g, tok);
      for (int step = 0; step < 8; ++step) {
        const auto allowed = expect_mask_matches(m, text + " step " + std::to_string(step));
        if (allowed.empty() || HasFailure()) break;
        ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
      }
      if (HasFailure()) return;
    }
  }
  EXPECT_GT(tested, 150);
}

// Deep nesting: the keys are proper suffixes, tokens that close brackets are uncertain.
TEST_P(FillMaskDepth, NestedBracketsSyntheticVocab) {
  KeyDepth depth(GetParam());
  auto g = parse_gbnf("root ::= v\nv ::= \"[\" ws (v (\",\" ws v)*)? ws \"]\" | \"a\"+\nws ::= \" \"{0,2}");
  ASSERT_TRUE(g.ok()) << g.error().message;
  std::vector<std::string> pieces = {"[",  "]",   "]]",  "]]]", "],", "],[", ",",         " ",    "a",  "aa",
                                     "a]", "a]]", "a],", "[[",  " ]", "] ]", "]]]]]]]]]", "[[[[", ",a", "a,a]"};
  auto tok = std::make_shared<TokenIndex>(pieces);
  std::mt19937 rng(GetParam());
  for (int walk = 0; walk < 40; ++walk) {
    Matcher m(*g, tok);
    ASSERT_TRUE(m.accept_bytes(std::string(1 + rng() % 10, '[')));
    for (int step = 0; step < 30; ++step) {
      const auto allowed = expect_mask_matches(m, "walk " + std::to_string(walk) + " step " + std::to_string(step));
      if (allowed.empty() || HasFailure()) return;
      ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(KeyDepths, FillMaskDepth, testing::Values(1u, 2u, detail::kDefaultKeyDepth));

struct Vocab {
  std::unique_ptr<tokenizer::Tokenizer> tok;
  TokenIndexPtr index;
};

Vocab load_vocab(const std::string& name) {
  Vocab v;
  auto file = format::read_gguf(edgelm::test::shared_path("vocab/ggml-vocab-" + name + ".gguf"));
  if (!file.ok()) return v;
  auto tok = tokenizer::load_tokenizer(file->metadata);
  if (!tok.ok()) return v;
  v.tok = std::move(tok).value();
  std::vector<std::string> pieces;
  for (int32_t id = 0; id < v.tok->vocab().n_tokens(); ++id) pieces.push_back(v.tok->token_to_piece(id));
  v.index = std::make_shared<TokenIndex>(std::move(pieces));
  return v;
}

class RealVocab : public testing::TestWithParam<std::string> {};

TEST_P(RealVocab, SchemaGrammarDocuments) {
  Vocab v = load_vocab(GetParam());
  if (!v.tok) GTEST_SKIP() << "vocabulary not found";
  auto g = parse_gbnf(test::kSchemaGrammar);
  ASSERT_TRUE(g.ok()) << g.error().message;
  test::SchemaDocGenerator gen(7);
  std::mt19937 rng(99);
  int checked = 0;
  for (int doc = 0; doc < 3; ++doc) {
    const std::string text = gen.document();
    const auto ids = v.tok->encode(text, false, false);
    Matcher m(*g, v.index);
    for (size_t i = 0; i < ids.size(); ++i) {
      if (rng() % 8 == 0) {
        expect_mask_matches(m, "doc " + std::to_string(doc) + " token " + std::to_string(i));
        ++checked;
        if (HasFailure()) return;
      }
      ASSERT_TRUE(m.accept_token(ids[i])) << "token " << i << " '" << v.index->piece(ids[i]) << "' of\n" << text;
    }
    EXPECT_TRUE(m.can_end());
  }
  EXPECT_GT(checked, 10);
}

TEST_P(RealVocab, JsonGrammarRandomWalks) {
  Vocab v = load_vocab(GetParam());
  if (!v.tok) GTEST_SKIP() << "vocabulary not found";
  auto g = parse_gbnf(test::kJsonGrammar);
  ASSERT_TRUE(g.ok()) << g.error().message;
  std::mt19937 rng(5);
  for (int walk = 0; walk < 3; ++walk) {
    Matcher m(*g, v.index);
    for (int step = 0; step < 6; ++step) {
      const auto allowed = expect_mask_matches(m, "walk " + std::to_string(walk) + " step " + std::to_string(step));
      if (allowed.empty() || HasFailure()) break;
      ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
    }
  }
}

TEST_P(RealVocab, DeepNestingShallowKeys) {
  Vocab v = load_vocab(GetParam());
  if (!v.tok) GTEST_SKIP() << "vocabulary not found";
  KeyDepth depth(2);
  auto g = parse_gbnf(test::kJsonGrammar);
  ASSERT_TRUE(g.ok()) << g.error().message;
  const char* prefixes[] = {"[[{\"a\": [{\"b\": \"x", "[[[[[1", "{\"k\": {\"k\": {\"k\": [tru", "[[[\"\\u00",
                            "[[[\"\xE4\xB8"};
  for (const char* p : prefixes) {
    Matcher m(*g, v.index);
    ASSERT_TRUE(m.accept_bytes(p)) << p;
    expect_mask_matches(m, p);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, RealVocab, testing::Values("llama-spm", "deepseek-llm"));

TEST(FillMask, SharedCacheAcrossMatchersAndThreads) {
  auto g = parse_gbnf(test::kJsonGrammar);
  ASSERT_TRUE(g.ok());
  std::vector<std::string> pieces = {"{", "}", "\"", "a", "\"a\"", ":", ",", "1", "[", "]", " ", "\": ", "true"};
  auto tok = std::make_shared<TokenIndex>(pieces);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      for (int walk = 0; walk < 20; ++walk) {
        Matcher m(*g, tok);
        for (int step = 0; step < 20; ++step) {
          std::vector<uint8_t> mask(pieces.size());
          m.fill_mask(mask);
          std::vector<int32_t> allowed;
          for (size_t i = 0; i < mask.size(); ++i) {
            if (mask[i] != (m.allows(static_cast<int32_t>(i)) ? 1 : 0)) ++failures;
            if (mask[i]) allowed.push_back(static_cast<int32_t>(i));
          }
          if (allowed.empty()) break;
          if (!m.accept_token(allowed[rng() % allowed.size()])) ++failures;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace edgelm::grammar
