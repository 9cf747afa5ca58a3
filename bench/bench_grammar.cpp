// Grammar engine: parse/compile time of GBNF grammars, and fill_mask time per token while
// feeding tokenized random documents of a nested-object JSON-Schema-like grammar, for the 32k
// SentencePiece and 102k byte-level BPE vocabularies. The first document runs on a fresh
// grammar (cold mask cache); the next ones on the warm cache. Counters are microseconds.
// The schema_* benchmarks use what the server runs: a nested JSON Schema (an inspection record)
// compiled by schema::json_schema_to_gbnf, its compile time, and fill_mask per token along
// random walks (a uniformly random allowed token each step, seeded) on both vocabularies.
// Run: build/release/bench/bench_grammar
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <numeric>

#include "format/gguf_reader.h"
#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "schema/json_schema_grammar.h"
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

// Mask times per token (microseconds) of the cold first document and the warm rest.
void report_times(benchmark::State& state, const std::vector<double>& cold, const std::vector<double>& warm) {
  state.counters["cold_tokens"] = static_cast<double>(cold.size());
  state.counters["cold_mean_us"] = mean(cold);
  state.counters["cold_p99_us"] = percentile(cold, 0.99);
  state.counters["warm_tokens"] = static_cast<double>(warm.size());
  state.counters["warm_mean_us"] = mean(warm);
  state.counters["warm_p50_us"] = percentile(warm, 0.50);
  state.counters["warm_p99_us"] = percentile(warm, 0.99);
  state.counters["warm_max_us"] = percentile(warm, 1.0);
}

// The tokenizer of ../shared/vocab/ggml-vocab-NAME.gguf; null (and the benchmark skipped) on error.
std::unique_ptr<tokenizer::Tokenizer> load_vocab(benchmark::State& state, const std::string& vocab) {
  auto file = format::read_gguf(shared_dir() + "/vocab/ggml-vocab-" + vocab + ".gguf");
  if (!file.ok()) {
    state.SkipWithError(file.error().message.c_str());
    return nullptr;
  }
  auto tok = tokenizer::load_tokenizer(file->metadata);
  if (!tok.ok()) {
    state.SkipWithError(tok.error().message.c_str());
    return nullptr;
  }
  return std::move(*tok);
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
  auto tok = load_vocab(state, vocab);
  if (!tok) return;
  std::vector<std::string> pieces;
  for (int32_t id = 0; id < tok->vocab().n_tokens(); ++id) pieces.push_back(tok->token_to_piece(id));
  auto t0 = Clock::now();
  auto index = std::make_shared<grammar::TokenIndex>(std::move(pieces));
  const double index_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  grammar::test::SchemaDocGenerator gen(42);
  std::vector<std::vector<int32_t>> docs;
  for (int i = 0; i < 21; ++i) docs.push_back(tok->encode(gen.document(), false, false));
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
  report_times(state, cold, warm);
}

// An inspection station's record: nested objects, an array of objects, enums, integer ranges,
// a pattern, nullable strings, uuid and date-time formats.
constexpr const char* kInspectionSchema = R"({
  "type": "object",
  "properties": {
    "station": {"type": "string", "maxLength": 16},
    "verdict": {"enum": ["pass", "fail", "rework"]},
    "score": {"type": "integer", "minimum": 0, "maximum": 100},
    "defects": {"type": "array", "maxItems": 4, "items": {
      "type": "object",
      "properties": {
        "code": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
        "severity": {"enum": ["minor", "major", "critical"]},
        "box": {"type": "object", "properties": {
          "x": {"type": "integer", "minimum": 0, "maximum": 4095},
          "y": {"type": "integer", "minimum": 0, "maximum": 4095},
          "w": {"type": "integer", "minimum": 1, "maximum": 4096},
          "h": {"type": "integer", "minimum": 1, "maximum": 4096}},
          "required": ["x", "y", "w", "h"], "additionalProperties": false},
        "note": {"type": ["string", "null"], "maxLength": 40}},
      "required": ["code", "severity", "box", "note"], "additionalProperties": false}},
    "operator": {"type": "object", "properties": {
      "id": {"type": "string", "format": "uuid"},
      "shift": {"enum": ["day", "night"]}}, "required": ["id", "shift"], "additionalProperties": false},
    "timestamp": {"type": "string", "format": "date-time"}
  },
  "required": ["station", "verdict", "score", "defects", "operator", "timestamp"],
  "additionalProperties": false
})";

std::string inspection_gbnf() {
  return schema::json_schema_to_gbnf(nlohmann::ordered_json::parse(kInspectionSchema)).value();
}

void schema_compile(benchmark::State& state) {
  const auto schema = nlohmann::ordered_json::parse(kInspectionSchema);
  size_t bytes = 0;
  for (auto _ : state) {
    auto gbnf = schema::json_schema_to_gbnf(schema);
    auto g = grammar::parse_gbnf(gbnf.value());
    bytes = gbnf->size();
    benchmark::DoNotOptimize(g->get());
  }
  state.counters["gbnf_bytes"] = static_cast<double>(bytes);
}

// Documents per walk benchmark: the first cold, the rest warm.
constexpr int kWalkDocs = 101;

void schema_walk(benchmark::State& state, const std::string& vocab) {
  auto tok = load_vocab(state, vocab);
  if (!tok) return;
  std::vector<std::string> pieces;
  for (int32_t id = 0; id < tok->vocab().n_tokens(); ++id) pieces.push_back(tok->token_to_piece(id));
  auto index = std::make_shared<grammar::TokenIndex>(std::move(pieces));
  std::vector<uint8_t> mask(static_cast<size_t>(index->n_tokens()));
  std::vector<double> cold, warm;
  int docs_done = 0;
  for (auto _ : state) {
    auto g = grammar::parse_gbnf(inspection_gbnf());  // fresh grammar: empty cache
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    for (int d = 0; d < kWalkDocs; ++d) {
      grammar::Matcher m(*g, index);
      std::vector<double>& us = d == 0 ? cold : warm;
      for (int step = 0; step < 400 && !m.must_end(); ++step) {
        const auto t0 = Clock::now();
        m.fill_mask(mask);
        us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
        if (m.can_end()) break;
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < index->n_tokens(); ++id)
          if (mask[static_cast<size_t>(id)]) allowed.push_back(id);
        if (allowed.empty()) return state.SkipWithError("dead end");
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        // Prefer short tokens half of the time, as a model writing JSON does, so walks reach deep states.
        int32_t pick = allowed[rng % allowed.size()];
        if ((rng >> 32) & 1) {
          for (int k = 0; k < 8; ++k) {
            const int32_t c = allowed[(rng >> (k * 4)) % allowed.size()];
            if (index->piece(c).size() < index->piece(pick).size()) pick = c;
          }
        }
        if (!m.accept_token(pick)) return state.SkipWithError("an allowed token was refused");
      }
      ++docs_done;
    }
  }
  state.counters["docs"] = docs_done;
  report_times(state, cold, warm);
}

}  // namespace

BENCHMARK(schema_compile)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(schema_walk, spm_llama, std::string("llama-spm"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(schema_walk, bpe_deepseek_llm, std::string("deepseek-llm"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(parse, schema_grammar, grammar::test::kSchemaGrammar)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(parse, json_grammar, grammar::test::kJsonGrammar)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(mask, spm_llama, std::string("llama-spm"))->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK_CAPTURE(mask, bpe_deepseek_llm, std::string("deepseek-llm"))->Unit(benchmark::kMillisecond)->Iterations(1);

BENCHMARK_MAIN();
