// Constrained decoding in the engine (engine/constraint.h): on stories260K, whose free text never
// looks like the grammar, every output of greedy and seeded sampled decoding is a sentence of
// the grammar and ends where the grammar must end; speculative decoding (prompt lookup and a
// draft model) under a grammar gives exactly the tokens of plain decoding; lazy grammars start
// at their trigger; end-of-generation is allowed only where the grammar may end.
#include <gtest/gtest.h>

#include <memory>

#include "core/thread_pool.h"
#include "engine/constraint.h"
#include "engine/engine.h"
#include "engine/engine_runs.h"
#include "engine/loaded_model.h"
#include "grammar/grammar.h"
#include "support/test_data.h"

namespace edgelm::engine {
namespace {

using test::Outcome;

grammar::GrammarPtr compile(const std::string& gbnf) {
  Result<grammar::GrammarPtr> g = grammar::parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return g.ok() ? *g : nullptr;
}

struct Stories {
  Stories() : lm(load_model(edgelm::test::shared_path("models/stories260K-f32.gguf")).value()), pool(1) {}
  LoadedModel lm;
  ThreadPool pool;
};

std::unique_ptr<Engine> make_engine(Stories& s, StepModel& runner, SpecOptions spec = {}) {
  EngineOptions o;
  o.kv_type = kv::KvType::f32;
  o.kv_memory_bytes = size_t{8} << 20;
  o.check_invariants = true;
  o.scheduler.target_step_ms = 0;
  o.spec = spec;
  return Engine::create(runner, s.lm.tokenizer.get(), o).value();
}

std::string text_of(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string out;
  for (const int32_t id : ids) out += tok.token_to_piece(id);
  return out;
}

// Whether `text` is a complete sentence of g.
bool complete_sentence(const grammar::GrammarPtr& g, const std::string& text) {
  grammar::Matcher m(g, std::make_shared<const grammar::TokenIndex>(std::vector<std::string>{}));
  return m.accept_bytes(text) && m.can_end();
}

constexpr const char* kRecordGrammar =
    R"(root ::= "{\"id\": " [0-9]{1,3} ", \"tag\": \"" [a-z]{1,8} "\", \"ok\": " ("true" | "false") "}")";

TEST(EngineGrammar, GreedyAndSampledOutputsAreSentencesEndedByTheGrammar) {
  Stories s;
  ModelRunner runner(*s.lm.model, s.pool);
  auto e = make_engine(s, runner);
  const grammar::GrammarPtr g = compile(kRecordGrammar);
  ASSERT_TRUE(g);
  const std::vector<int32_t> prompt = s.lm.tokenizer->encode("Once upon a time, there was", true, false);
  std::vector<RequestId> ids;
  for (int i = 0; i < 9; ++i) {
    Request r;
    r.prompt = prompt;
    r.max_new_tokens = 120;
    r.grammar = g;
    r.sampling.temperature = i == 0 ? 0.0f : 1.0f;  // one greedy, eight seeded samples
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = static_cast<uint64_t>(i);
    ids.push_back(e->add_request(std::move(r)).value());
  }
  const auto got = test::run_all(*e);
  for (const RequestId id : ids) {
    const Outcome& o = got.at(id);
    const std::string text = text_of(*s.lm.tokenizer, o.tokens);
    EXPECT_EQ(o.finish, Finish::stop) << text;
    EXPECT_TRUE(complete_sentence(g, text)) << "request " << id << ": " << text;
  }
  const EngineStats st = e->stats();
  EXPECT_GT(st.mask_time.count, 0);
  int64_t in_buckets = 0;
  for (const int64_t b : st.mask_time.buckets) in_buckets += b;
  EXPECT_EQ(in_buckets, st.mask_time.count);
  EXPECT_EQ(st.kv_blocks_used, 0);
}

TEST(EngineGrammar, WithoutTheGrammarTheModelDoesNotWriteIt) {
  // The control for the test above: the same prompt unconstrained is not a record.
  Stories s;
  ModelRunner runner(*s.lm.model, s.pool);
  auto e = make_engine(s, runner);
  const grammar::GrammarPtr g = compile(kRecordGrammar);
  ASSERT_TRUE(g);
  const RequestId id =
      e->add_request(test::greedy(s.lm.tokenizer->encode("Once upon a time, there was", true, false), 60)).value();
  const auto got = test::run_all(*e);
  EXPECT_FALSE(complete_sentence(g, text_of(*s.lm.tokenizer, got.at(id).tokens)));
}

TEST(EngineGrammar, SpeculativeGreedyEqualsGrammarAlone) {
  Stories s;
  ModelRunner runner(*s.lm.model, s.pool);
  ModelRunner draft_runner(*s.lm.model, s.pool);  // the target as its own draft: long accepted runs
  // A list the model repeats itself in, so prompt lookup finds drafts too.
  const grammar::GrammarPtr g = compile(R"(root ::= "[" item (", " item){1,12} "]"
item ::= "\"" [a-z ]{1,10} "\"")");
  ASSERT_TRUE(g);
  const std::vector<int32_t> prompt = s.lm.tokenizer->encode("Lily and Ben went to the park", true, false);
  for (const int32_t budget : {150, 24}) {  // 24: the budget rule closes the list early
    auto run = [&](SpecOptions spec) {
      auto e = make_engine(s, runner, spec);
      Request r = test::greedy(prompt, budget);
      r.grammar = g;
      const RequestId id = e->add_request(std::move(r)).value();
      auto got = test::run_all(*e);
      return std::make_pair(got.at(id), e->stats());
    };
    const auto [plain, plain_st] = run({});
    EXPECT_TRUE(complete_sentence(g, text_of(*s.lm.tokenizer, plain.tokens))) << text_of(*s.lm.tokenizer, plain.tokens);
    SpecOptions ngram;
    ngram.mode = SpecMode::ngram;
    ngram.cost_gate = false;
    ngram.draft_min = 1;
    SpecOptions model = ngram;
    model.mode = SpecMode::draft;
    model.draft_model = &draft_runner;
    for (const auto& [name, spec] : {std::pair{"ngram", ngram}, std::pair{"draft model", model}}) {
      const auto [o, st] = run(spec);
      EXPECT_EQ(o.tokens, plain.tokens) << name;
      EXPECT_EQ(o.finish, plain.finish) << name;
      EXPECT_GT(st.spec_draft_tokens, 0) << name;
      EXPECT_GT(st.spec_accepted_tokens, 0) << name;
    }
    EXPECT_EQ(plain.finish, Finish::stop) << "budget " << budget;
    EXPECT_LE(plain.tokens.size(), static_cast<size_t>(budget));
  }
}

TEST(EngineGrammar, UnboundedGrammarsCloseWithinTheTokenBudget) {
  // Free-form strings the model would fill for ever: the budget rule ends each output in time.
  Stories s;
  ModelRunner runner(*s.lm.model, s.pool);
  auto e = make_engine(s, runner);
  const grammar::GrammarPtr g = compile(R"(root ::= "{\"story\": \"" [a-zA-Z ,.]* "\", \"more\": [" [0-9]* "]}")");
  ASSERT_TRUE(g);
  std::vector<std::pair<RequestId, int32_t>> ids;
  for (int i = 0; i < 12; ++i) {
    Request r;
    r.prompt = s.lm.tokenizer->encode("Once upon a time", true, false);
    r.max_new_tokens = 30 + 7 * i;  // the shortest sentence has 25 bytes
    r.grammar = g;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<uint64_t>(100 + i);
    ids.emplace_back(e->add_request(std::move(r)).value(), 30 + 7 * i);
  }
  const auto got = test::run_all(*e);
  for (const auto& [id, budget] : ids) {
    const Outcome& o = got.at(id);
    const std::string text = text_of(*s.lm.tokenizer, o.tokens);
    EXPECT_EQ(o.finish, Finish::stop) << text;
    EXPECT_LE(o.tokens.size(), static_cast<size_t>(budget));
    EXPECT_TRUE(complete_sentence(g, text)) << text;
  }
}

// A toy vocabulary: pieces by id, id 0 the end-of-generation token.
std::shared_ptr<const GrammarVocab> toy_vocab(std::vector<std::string> pieces) {
  auto v = std::make_shared<GrammarVocab>();
  pieces[0].clear();
  v->index = std::make_shared<const grammar::TokenIndex>(std::move(pieces));
  v->eog = {0};
  return v;
}

std::vector<int32_t> allowed(const Constraint& c, int32_t n) {
  std::vector<float> logits(static_cast<size_t>(n), 1.0f);
  std::vector<uint8_t> scratch;
  c.mask(logits, scratch);
  std::vector<int32_t> out;
  for (int32_t i = 0; i < n; ++i)
    if (logits[static_cast<size_t>(i)] > 0) out.push_back(i);
  return out;
}

TEST(Constraint, EndOfGenerationOnlyWhereTheGrammarMayEnd) {
  auto v = toy_vocab({"</s>", "x", "xx", "y"});
  Constraint c(compile(R"(root ::= "x"{1,3})"), v, "");
  EXPECT_EQ(allowed(c, 4), (std::vector<int32_t>{1, 2})) << "nothing yet: no end, no y";
  ASSERT_TRUE(c.accept(1));
  EXPECT_EQ(allowed(c, 4), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(c.allows(0));
  ASSERT_TRUE(c.accept(2));
  EXPECT_TRUE(c.must_end());
  EXPECT_EQ(allowed(c, 4), (std::vector<int32_t>{0}));
  EXPECT_FALSE(c.accept(3));
  EXPECT_TRUE(c.broken());
}

TEST(Constraint, LazyGrammarStartsAtItsTriggerAcrossTokens) {
  auto v = toy_vocab({"</s>", "hi ", "<to", "ol>", "{", "}", "ol>{"});
  Constraint c(compile(R"(root ::= "<tool>" "{" "}")"), v, "<tool>");
  EXPECT_FALSE(c.active());
  EXPECT_EQ(allowed(c, 7).size(), 7u) << "free text before the trigger";
  ASSERT_TRUE(c.accept(1));
  ASSERT_TRUE(c.accept(2));
  EXPECT_FALSE(c.active());
  ASSERT_TRUE(c.accept(3));  // "<to" + "ol>": the trigger, split over two tokens
  EXPECT_TRUE(c.active());
  EXPECT_EQ(allowed(c, 7), (std::vector<int32_t>{4}));
  ASSERT_TRUE(c.accept(4));
  ASSERT_TRUE(c.accept(5));
  EXPECT_TRUE(c.must_end());

  Constraint d(compile(R"(root ::= "<tool>" "{" "}")"), v, "<tool>");
  ASSERT_TRUE(d.accept(2));
  ASSERT_TRUE(d.accept(6));  // the trigger's end and the grammar's next symbol in one token
  EXPECT_TRUE(d.active());
  EXPECT_EQ(allowed(d, 7), (std::vector<int32_t>{5}));

  Constraint e(compile(R"(root ::= "<tool>" "{" "}")"), v, "<tool>");
  ASSERT_TRUE(e.accept(2));
  ASSERT_TRUE(e.accept(3));
  EXPECT_FALSE(e.accept(5)) << "text after the trigger that the grammar rejects";
  EXPECT_TRUE(e.broken());
  EXPECT_EQ(allowed(e, 7).size(), 7u) << "a broken lazy grammar no longer constrains";
}

}  // namespace
}  // namespace edgelm::engine
