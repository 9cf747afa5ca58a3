// `edgelm eval-cache`: how well the semantic response cache separates questions that should
// share an answer from near-misses that must not, and how fast it looks up.
//
// Accuracy (--pairs FILE, TSV with a header: query_a, query_b, should_hit 1/0, kind): each
// pair is scored as the cache would score query_b against a cached query_a: cosine similarity
// of the two embeddings (--embedding-model lexical | self (-m MODEL) | PATH of a BERT GGUF),
// and the guards. For thresholds 0.75..0.95 (step 0.05), with and without guards: the hit rate
// (share of should_hit pairs that hit) and the wrong-hit rate (share of must-not pairs that hit,
// overall and per kind). A table, or one JSON document with --json.
//
// Speed (--bench): a ResponseCache filled with N distinct synthetic customer questions (N from
// --bench-sizes, default 1000,10000), then --bench-lookups lookups of paraphrased and new
// questions; p50/p99 of the whole lookup (exact try, embedding, HNSW search, guards) and of the
// embedding alone, in microseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cache/guards.h"
#include "cache/lexical_embedder.h"
#include "cache/response_cache.h"
#include "cache/semantic_index.h"
#include "engine/loaded_model.h"
#include "engine/embeddings.h"
#include "tools/command.h"
#ifdef EDGELM_CACHE_HAS_BERT
#include "cache/bert_embedder.h"
#endif

namespace edgelm::tools {
namespace {

using nlohmann::json;

struct EvalCacheOptions {
  std::string pairs_path, embedding = "lexical", model_path, tokenizer_path;
  bool json_out = false, bench = false;
  std::string bench_sizes = "1000,10000";
  int bench_lookups = 2000;
  int threads = 0;
  std::string cpu_affinity;
};

struct Pair {
  std::string a, b, kind;
  bool should_hit = false;
};

Result<std::vector<Pair>> read_pairs(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("cannot read pairs file '{}'", path);
  std::vector<Pair> out;
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || (n == 1 && line.rfind("query_a", 0) == 0)) continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    std::string col;
    while (std::getline(ss, col, '\t')) cols.push_back(col);
    if (cols.size() != 4 || (cols[2] != "0" && cols[2] != "1"))
      return make_error("{}:{}: expected 4 tab-separated columns with should_hit 0 or 1", path, n);
    out.push_back({cols[0], cols[1], cols[3], cols[2] == "1"});
  }
  if (out.empty()) return make_error("pairs file '{}' has no pairs", path);
  return out;
}

// The embedder the options name; `holder` keeps a loaded model alive for "self".
struct EmbedderBundle {
  std::shared_ptr<cache::Embedder> embedder;
  std::shared_ptr<engine::LoadedModel> model;
  std::shared_ptr<ThreadPool> pool;
};

Result<EmbedderBundle> make_embedder(const EvalCacheOptions& o) {
  EmbedderBundle b;
  if (o.embedding == "lexical") {
    b.embedder = std::make_shared<cache::LexicalEmbedder>();
  } else if (o.embedding == "self") {
    if (o.model_path.empty()) return make_error("--embedding-model self needs -m MODEL");
    EDGELM_TRY(engine::LoadedModel lm, engine::load_model(o.model_path, o.tokenizer_path));
    b.model = std::make_shared<engine::LoadedModel>(std::move(lm));
    EDGELM_TRY(std::unique_ptr<ThreadPool> pool, make_thread_pool(o.threads, o.cpu_affinity));
    b.pool = std::move(pool);
    auto model = b.model;
    auto pool_ptr = b.pool;
    b.embedder = std::make_shared<cache::FunctionEmbedder>(
        "self", model->model->config().n_embd, [model, pool_ptr](std::string_view text) -> Result<std::vector<float>> {
          const std::vector<int32_t> tokens = model->tokenizer->encode(std::string(text), true, false);
          return engine::embed_tokens(*model->model, tokens, *pool_ptr);
        });
  } else {
#ifdef EDGELM_CACHE_HAS_BERT
    EDGELM_TRY(std::unique_ptr<cache::BertEmbedder> bert,
               cache::BertEmbedder::load(o.embedding, o.threads > 0 ? o.threads : default_threads()));
    b.embedder = std::move(bert);
#else
    return make_error("embedding model '{}': this build has no BERT support (use lexical or self)", o.embedding);
#endif
  }
  return b;
}

struct Row {
  double threshold;
  bool guards;
  double hit_rate, wrong_hit_rate;
  std::map<std::string, double> wrong_by_kind;
};

int run_accuracy(const EvalCacheOptions& o, cache::Embedder& embedder) {
  auto pairs = read_pairs(o.pairs_path);
  if (!pairs.ok()) return report_error(pairs.error());
  std::map<std::string, std::vector<float>> vectors;
  std::map<std::string, cache::GuardFeatures> features;
  auto vec = [&](const std::string& t) -> Result<const std::vector<float>*> {
    auto it = vectors.find(t);
    if (it == vectors.end()) {
      EDGELM_TRY(std::vector<float> v, embedder.embed(t));
      it = vectors.emplace(t, std::move(v)).first;
      features.emplace(t, cache::guard_features(t));
    }
    return &it->second;
  };
  std::vector<float> sims;
  for (const Pair& p : *pairs) {
    auto va = vec(p.a);
    if (!va.ok()) return report_error(va.error());
    auto vb = vec(p.b);
    if (!vb.ok()) return report_error(vb.error());
    sims.push_back(cache::dot(**va, **vb));
  }
  std::vector<Row> rows;
  for (int ti = 0; ti <= 4; ++ti) {
    const double t = 0.75 + 0.05 * ti;
    for (const bool guards : {false, true}) {
      size_t pos = 0, pos_hit = 0, neg = 0, neg_hit = 0;
      std::map<std::string, std::pair<size_t, size_t>> by_kind;  // kind -> (hits, total)
      for (size_t i = 0; i < pairs->size(); ++i) {
        const Pair& p = (*pairs)[i];
        bool hit = sims[i] >= static_cast<float>(t) - 1e-6f;
        if (hit && guards) hit = cache::guard_check(features[p.a], features[p.b], {}).empty();
        if (p.should_hit) {
          ++pos;
          pos_hit += hit;
        } else {
          ++neg;
          neg_hit += hit;
          by_kind[p.kind].first += hit;
          ++by_kind[p.kind].second;
        }
      }
      Row r{t, guards, pos ? double(pos_hit) / pos : 0, neg ? double(neg_hit) / neg : 0, {}};
      for (const auto& [k, hv] : by_kind) r.wrong_by_kind[k] = hv.second ? double(hv.first) / hv.second : 0;
      rows.push_back(std::move(r));
    }
  }
  size_t n_pos = 0;
  for (const Pair& p : *pairs) n_pos += p.should_hit;
  if (o.json_out) {
    json j = {{"pairs", pairs->size()}, {"should_hit", n_pos}, {"must_not", pairs->size() - n_pos},
              {"embedding", embedder.name()}, {"rows", json::array()}};
    for (const Row& r : rows)
      j["rows"].push_back({{"threshold", r.threshold}, {"guards", r.guards}, {"hit_rate", r.hit_rate},
                           {"wrong_hit_rate", r.wrong_hit_rate}, {"wrong_hit_rate_by_kind", r.wrong_by_kind}});
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("%zu pairs (%zu should hit, %zu must not), embedding %s\n\n", pairs->size(), n_pos,
              pairs->size() - n_pos, embedder.name().c_str());
  std::vector<std::string> kinds;
  if (!rows.empty())
    for (const auto& [k, v] : rows[0].wrong_by_kind) kinds.push_back(k);
  std::printf("| threshold | guards | hit rate | wrong-hit rate |");
  for (const auto& k : kinds) std::printf(" wrong %s |", k.c_str());
  std::printf("\n|---|---|---|---|");
  for (size_t i = 0; i < kinds.size(); ++i) std::printf("---|");
  std::printf("\n");
  for (const Row& r : rows) {
    std::printf("| %.2f | %s | %.1f%% | %.1f%% |", r.threshold, r.guards ? "on" : "off", 100 * r.hit_rate,
                100 * r.wrong_hit_rate);
    for (const auto& k : kinds) std::printf(" %.1f%% |", 100 * r.wrong_by_kind.at(k));
    std::printf("\n");
  }
  return 0;
}

// Synthetic distinct customer questions: template x subject x place x number.
std::vector<std::string> synthetic_queries(size_t n, uint64_t seed) {
  static const char* templates[] = {"Can I return the {} I bought in {} after {} days?",
                                    "How long does shipping of a {} to {} take for {} items?",
                                    "Is the {} in stock at the {} store, I need {}?",
                                    "Does the warranty of the {} cover repairs in {} after {} months?",
                                    "What does delivery of {} {} to {} cost?"};
  static const char* subjects[] = {"jacket", "phone", "laptop", "kettle", "sofa", "lamp", "printer", "bike",
                                   "watch", "camera", "blender", "tent", "guitar", "monitor", "helmet", "stroller"};
  static const char* places[] = {"Berlin", "Paris", "Madrid", "Vienna", "Oslo", "Lisbon", "Dublin", "Prague",
                                 "Warsaw", "Zurich", "Milan", "Lyon", "Porto", "Munich", "Leeds", "Bergen"};
  std::mt19937_64 rng(seed);
  std::vector<std::string> out;
  std::set<std::string> seen;
  while (out.size() < n) {
    const size_t t = rng() % 5;
    const std::string s = subjects[rng() % 16], p = places[rng() % 16], k = std::to_string(1 + rng() % 120);
    std::string q = t == 4 ? fmt::format(fmt::runtime(templates[t]), k, s, p)
                           : fmt::format(fmt::runtime(templates[t]), s, p, k);
    if (seen.insert(q).second) out.push_back(std::move(q));
  }
  return out;
}

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

int run_bench(const EvalCacheOptions& o, const std::shared_ptr<cache::Embedder>& embedder) {
  std::vector<size_t> sizes;
  {
    std::stringstream ss(o.bench_sizes);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) sizes.push_back(std::stoul(item));
  }
  json results = json::array();
  if (!o.json_out)
    std::printf("\n| entries | lookups | hits | lookup p50 us | lookup p99 us | embed p50 us | insert s/1k |\n"
                "|---|---|---|---|---|---|---|\n");
  for (const size_t n : sizes) {
    cache::CacheOptions co;
    co.mode = cache::CacheMode::semantic;
    co.capacity = n;
    co.max_bytes = size_t{1} << 34;
    std::vector<std::string> warnings;
    auto c = cache::ResponseCache::create(co, embedder, warnings);
    if (!c.ok()) return report_error(c.error());
    const std::vector<std::string> stored = synthetic_queries(n, 1);
    const auto t0 = std::chrono::steady_clock::now();
    for (const std::string& q : stored) {
      cache::CacheRequest r;
      r.parts = {"bench", q, "t=0"};
      r.query = q;
      (*c)->insert(r, {"an answer of typical length for a cached question, a sentence or two", "stop", 20, 16});
    }
    const double insert_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // Half paraphrases of stored questions ("please" added: no exact hit), half new questions.
    const std::vector<std::string> fresh = synthetic_queries(n + static_cast<size_t>(o.bench_lookups), 2);
    std::vector<double> lookup_us, embed_us;
    size_t hits = 0;
    std::mt19937_64 rng(3);
    for (int i = 0; i < o.bench_lookups; ++i) {
      cache::CacheRequest r;
      r.query = i % 2 == 0 ? stored[rng() % stored.size()] + " Please tell me." : fresh[n + static_cast<size_t>(i)];
      r.parts = {"bench", r.query, "t=0"};
      const auto e0 = std::chrono::steady_clock::now();
      (void)embedder->embed(r.query);
      embed_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - e0).count());
      cache::CacheLookup l = (*c)->lookup(r);
      lookup_us.push_back(l.seconds * 1e6);
      hits += l.level != cache::CacheLevel::miss;
    }
    const json row = {{"entries", n},
                      {"lookups", o.bench_lookups},
                      {"hits", hits},
                      {"lookup_us_p50", pct(lookup_us, 50)},
                      {"lookup_us_p99", pct(lookup_us, 99)},
                      {"embed_us_p50", pct(embed_us, 50)},
                      {"insert_s_per_1k", insert_s * 1000.0 / static_cast<double>(n)}};
    results.push_back(row);
    if (!o.json_out)
      std::printf("| %zu | %d | %zu | %.1f | %.1f | %.1f | %.3f |\n", n, o.bench_lookups, hits, pct(lookup_us, 50),
                  pct(lookup_us, 99), pct(embed_us, 50), insert_s * 1000.0 / static_cast<double>(n));
  }
  if (o.json_out) std::printf("%s\n", json{{"bench", results}, {"embedding", embedder->name()}}.dump(2).c_str());
  return 0;
}

int run_eval_cache(const EvalCacheOptions& o) {
  if (o.pairs_path.empty() && !o.bench) return report_error(make_error("give --pairs FILE, --bench, or both"));
  auto b = make_embedder(o);
  if (!b.ok()) return report_error(b.error());
  if (!o.pairs_path.empty()) {
    const int rc = run_accuracy(o, *b->embedder);
    if (rc != 0) return rc;
  }
  if (o.bench) return run_bench(o, b->embedder);
  return 0;
}

}  // namespace

CommandRunner add_eval_cache_command(CLI::App& app) {
  auto o = std::make_shared<EvalCacheOptions>();
  CLI::App* cmd = app.add_subcommand("eval-cache", "Evaluate the semantic response cache: hit and wrong-hit rates, lookup speed");
  cmd->add_option("--pairs", o->pairs_path, "Labelled pairs (TSV: query_a, query_b, should_hit, kind)");
  cmd->add_option("--embedding-model", o->embedding, "lexical | self | PATH of a BERT GGUF")->capture_default_str();
  cmd->add_option("-m,--model", o->model_path, "Model whose hidden state embeds, for --embedding-model self");
  cmd->add_option("--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (for .bin checkpoints)");
  cmd->add_flag("--json", o->json_out, "One JSON document instead of tables");
  cmd->add_flag("--bench", o->bench, "Measure lookup latency in a filled cache");
  cmd->add_option("--bench-sizes", o->bench_sizes, "Cache sizes for --bench, comma-separated")->capture_default_str();
  cmd->add_option("--bench-lookups", o->bench_lookups, "Lookups per size for --bench")->capture_default_str();
  add_thread_options(cmd, o->threads, o->cpu_affinity);
  return [o] { return run_eval_cache(*o); };
}

}  // namespace edgelm::tools
