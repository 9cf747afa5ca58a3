// Grammar engine: parse/compile time of GBNF grammars, and fill_mask time per token while
// feeding tokenized random documents of a nested-object JSON-Schema-like grammar, for the 32k
// SentencePiece and 102k byte-level BPE vocabularies. The first document runs on a fresh
// grammar (cold mask cache); the next ones on the warm cache. Counters are microseconds.
// Run: build/release/bench/bench_grammar
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>

#include "format/gguf_reader.h"
#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "test_grammars.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace edgelm;
using Clock = std::chrono::steady_clock;

std::string shared_dir() {
  const char* env = std::getenv("EDGELM_TEST_DATA");
  return env != nullptr ? env : EDGELM_SHARED_DIR_DEFAULT;
}

void parse(benchmark::State& state, const char* text) {
  for (auto _ : state) {
    auto g = grammar::parse_gbnf(text);
    if (!g.ok()) {
      state.SkipWithError(g.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(g->get());
  }
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Feeds `ids`, timing fill_mask before each token; returns false if a token is refused.
bool run_doc(const grammar::Matcher& proto, const std::vector<int32_t>& ids, std::vector<uint8_t>& mask,
             std::vector<double>& us) {
  grammar::Matcher m = proto;
  for (int32_t id : ids) {
    const auto t0 = Clock::now();
    m.fill_mask(mask);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (!mask[static_cast<size_t>(id)] || !m.accept_token(id)) return false;
  }
  return m.can_end();
}

void mask(benchmark::State& state, const std::string& vocab) {
  auto file = format::read_gguf(shared_dir() + "/vocab/ggml-vocab-" + vocab + ".gguf");
  if (!file.ok()) {
    state.SkipWithError(file.error().message.c_str());
    return;
  }
  auto tok = tokenizer::load_tokenizer(file->metadata);
  if (!tok.ok()) {
    state.SkipWithError(tok.error().message.c_str());
    return;
  }
  std::vector<std::string> pieces;
  for (int32_t id = 0; id < (*tok)->vocab().n_tokens(); ++id) pieces.push_back((*tok)->token_to_piece(id));
  auto t0 = Clock::now();
  auto index = std::make_shared<grammar::TokenIndex>(std::move(pieces));
  const double index_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  grammar::test::SchemaDocGenerator gen(42);
  std::vector<std::vector<int32_t>> docs;
  for (int i = 0; i < 21; ++i) docs.push_back((*tok)->encode(gen.document(), false, false));
  std::vector<uint8_t> mask(static_cast<size_t>(index->n_tokens()));
  std::vector<double> cold, warm;
  double cold_total_ms = 0;
  for (auto _ : state) {
    cold.clear();
    warm.clear();
    auto g = grammar::parse_gbnf(grammar::test::kSchemaGrammar);  // fresh grammar: empty cache
    grammar::Matcher proto(*g, index);
    t0 = Clock::now();
    if (!run_doc(proto, docs[0], mask, cold)) state.SkipWithError("document 0 rejected");
    cold_total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    for (size_t d = 1; d < docs.size(); ++d)
      if (!run_doc(proto, docs[d], mask, warm)) state.SkipWithError("a document was rejected");
    const auto stats = (*g)->mask_cache(index)->stats();
    state.counters["cache_entries"] = static_cast<double>(stats.entries);
    state.counters["cache_MB"] = static_cast<double>(stats.bytes) / 1e6;
    state.counters["build_ms"] = stats.build_ms;
  }
  state.counters["index_ms"] = index_ms;
  state.counters["cold_doc_ms"] = cold_total_ms;
  state.counters["cold_tokens"] = static_cast<double>(cold.size());
  state.counters["cold_mean_us"] = mean(cold);
  state.counters["cold_p99_us"] = percentile(cold, 0.99);
  state.counters["warm_tokens"] = static_cast<double>(warm.size());
  state.counters["warm_mean_us"] = mean(warm);
  state.counters["warm_p50_us"] = percentile(warm, 0.50);
  state.counters["warm_p99_us"] = percentile(warm, 0.99);
  state.counters["warm_max_us"] = percentile(warm, 1.0);
}

}  // namespace

BENCHMARK_CAPTURE(parse, schema_grammar, grammar::test::kSchemaGrammar)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(parse, json_grammar, grammar::test::kJsonGrammar)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask, spm_llama, std::string("llama-spm"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(mask, bpe_deepseek_llm, std::string("deepseek-llm"))->Unit(benchmark::kMillisecond)->Iterations(1);

BENCHMARK_MAIN();
