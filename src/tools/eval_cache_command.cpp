// `edgelm eval-cache`: how well the semantic response cache separates questions that should
// share an answer from near-misses that must not, and how fast it looks up.
//
// Accuracy (--pairs FILE, the tuning part, and --held-out FILE, the held-out part; TSV with a
// header: query_a, query_b, should_hit 1/0, kind): each pair is scored as the cache would score
// query_b against a cached query_a: cosine similarity of the two embeddings (--embedding-model
// lexical (WordNet lemmas and synonyms) | lexical-plain (issue 7's) | self (-m MODEL) | PATH of a
// embedding GGUF: any embed::TextEncoder, with --embedding-prefix), then the guards (--guards). Per part, in one run:
//  - the baseline: issue 7's cache (lexical-plain, guards negation,numbers,entities, threshold
//    0.80) next to the configured one (--threshold, default the server's), paraphrase hit rate
//    and wrong-hit rate overall and per kind, and the ratio of the paraphrase hit rates;
//  - thresholds 0.50..0.95 (step 0.05), with and without guards: the same rates;
//  - the error-bound mode's curve (error_bound.h) for --error-rates: each pair in file order is
//    a lookup against the entry of query_a, accepted where the entry's error bound allows at
//    that similarity (and the guards pass); every hit gets its true label as feedback (as from
//    POST /v1/cache/feedback), so later pairs of that entry see it. Hit and wrong-hit rates.
//  - the calibration (cache/calibration.h): the threshold and error-bound prior slope tuned on the
//    tuning part for --max-wrong-hit, and the held-out part's rates under them; --calibrate-out
//    FILE writes it for `serve --cache-calibration`.
// A table per part, or one JSON document with --json.
//
// Speed (--bench): a ResponseCache filled with N distinct synthetic customer questions (N from
// --bench-sizes, default 1000,10000), then --bench-lookups lookups of paraphrased and new
// questions; p50/p99 of the whole lookup (exact try, embedding, HNSW search, guards; wall time, and
// the p99 of its thread CPU time, which a loaded machine does not inflate) and of the embedding
// alone, in microseconds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <span>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cache/calibration.h"
#include "cache/encoder_embedder.h"
#include "cache/error_bound.h"
#include "cache/guards.h"
#include "cache/lexical_embedder.h"
#include "cache/response_cache.h"
#include "cache/semantic_index.h"
#include "cache/wordnet.h"
#include "engine/embeddings.h"
#include "engine/loaded_model.h"
#include "serve/config.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

using nlohmann::json;

struct EvalCacheOptions {
  std::string pairs_path, heldout_path, embedding = "lexical", model_path, tokenizer_path;
  std::string wordnet_dir = cache::WordNet::kDefaultDir, guards = "all", lexical_weights;
  double threshold = serve::ServeConfig{}.cache_threshold;
  std::string error_rates = "0.002,0.005,0.01,0.02,0.05,0.1";
  std::string scores_path;  // --scores: every pair's similarity and guard verdict, TSV
  std::string embedding_prefix = "auto";  // --embedding-prefix (an embedding GGUF's query instruction)
  std::string calibrate_out;              // --calibrate-out: the tuning part's calibration, JSON
  double max_wrong_hit = 0.01;            // --max-wrong-hit: the bound the calibration tunes for
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

// The embedder the options name; the bundle keeps a loaded model alive for "self".
struct EmbedderBundle {
  std::shared_ptr<cache::Embedder> embedder;
  std::shared_ptr<const cache::WordNet> wordnet;
  std::shared_ptr<engine::LoadedModel> model;
  std::shared_ptr<ThreadPool> pool;
};

Result<EmbedderBundle> make_embedder(const EvalCacheOptions& o, const cache::GuardOptions& guards) {
  EmbedderBundle b;
  if (o.embedding == "lexical" || guards.opposites) {
    EDGELM_TRY(b.wordnet, cache::WordNet::load(o.wordnet_dir));
  }
  if (o.embedding == "lexical") {
    EDGELM_TRY(cache::LexicalWeights w, cache::parse_lexical_weights(o.lexical_weights));
    b.embedder = std::make_shared<cache::LexicalEmbedder>(1024, b.wordnet, w);
  } else if (o.embedding == "lexical-plain") {
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
    cache::EncoderEmbedder::Options eo;
    eo.threads = o.threads > 0 ? o.threads : default_threads();
    eo.prefix = cache::EncoderEmbedder::prefix_from_flag(o.embedding_prefix);
    EDGELM_TRY(std::unique_ptr<cache::EncoderEmbedder> enc, cache::EncoderEmbedder::load(o.embedding, eo));
    b.embedder = std::move(enc);
  }
  return b;
}

// Each pair's similarity and both queries' guard features, under one embedder.
struct Scored {
  std::vector<float> sims;
  std::vector<cache::GuardFeatures> fa, fb;
};

Result<Scored> score_pairs(const std::vector<Pair>& pairs, cache::Embedder& embedder, const cache::WordNet* wordnet) {
  // Every distinct query once, in batches (a model-backed embedder runs each batch in one pass).
  constexpr size_t kBatch = 32;
  std::vector<std::string> distinct;
  std::map<std::string, size_t> index;
  for (const Pair& p : pairs)
    for (const std::string* t : {&p.a, &p.b})
      if (index.emplace(*t, distinct.size()).second) distinct.push_back(*t);
  std::vector<std::vector<float>> vecs;
  std::vector<cache::GuardFeatures> feats;
  for (size_t i = 0; i < distinct.size(); i += kBatch) {
    const size_t n = std::min(kBatch, distinct.size() - i);
    EDGELM_TRY(std::vector<std::vector<float>> v,
               embedder.embed_batch(std::span<const std::string>(distinct.data() + i, n)));
    for (std::vector<float>& x : v) vecs.push_back(std::move(x));
  }
  for (const std::string& t : distinct) feats.push_back(cache::guard_features(t, wordnet));
  Scored s;
  for (const Pair& p : pairs) {
    const size_t a = index.at(p.a), b = index.at(p.b);
    s.sims.push_back(cache::dot(vecs[a], vecs[b]));
    s.fa.push_back(feats[a]);
    s.fb.push_back(feats[b]);
  }
  return s;
}

// The pairs as the cache scores them under `guards` (calibration.h's input).
std::vector<cache::ScoredPair> scored_pairs(const std::vector<Pair>& pairs, const Scored& s,
                                            const cache::GuardOptions& guards) {
  std::vector<cache::ScoredPair> out;
  out.reserve(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i)
    out.push_back({pairs[i].a, s.sims[i], cache::guard_check(s.fa[i], s.fb[i], guards).empty(), pairs[i].should_hit});
  return out;
}

// Hit rate of the should-hit pairs, wrong-hit rates of the must-not ones (overall, per kind).
struct Rates {
  size_t pos = 0, pos_hit = 0, neg = 0, neg_hit = 0;
  std::map<std::string, std::pair<size_t, size_t>> by_kind;  // kind -> (hits, pairs), must-not kinds
  double hit_rate() const { return pos ? double(pos_hit) / double(pos) : 0; }
  double wrong_rate() const { return neg ? double(neg_hit) / double(neg) : 0; }
  void add(const Pair& p, bool hit) {
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
  json to_json() const {
    json kinds = json::object();
    for (const auto& [k, v] : by_kind) kinds[k] = v.second ? double(v.first) / double(v.second) : 0.0;
    return {{"paraphrase_hit_rate", hit_rate()},
            {"paraphrase_hits", pos_hit},
            {"wrong_hit_rate", wrong_rate()},
            {"wrong_hits", neg_hit},
            {"wrong_hit_rate_by_kind", kinds}};
  }
};

Rates rates_at(const std::vector<Pair>& pairs, const Scored& s, double threshold, const cache::GuardOptions* guards) {
  Rates r;
  for (size_t i = 0; i < pairs.size(); ++i) {
    bool hit = s.sims[i] >= static_cast<float>(threshold) - 1e-6f;
    if (hit && guards) hit = cache::guard_check(s.fa[i], s.fb[i], *guards).empty();
    r.add(pairs[i], hit);
  }
  return r;
}

// The error-bound mode over the pairs in order, with true-label feedback on every hit
// (cache::replay_error_bound), as per-kind rates.
Rates rates_error_bound(const std::vector<Pair>& pairs, const Scored& s, const cache::ErrorBound& bound,
                        const cache::GuardOptions& guards) {
  const std::vector<bool> hits = cache::replay_error_bound(scored_pairs(pairs, s, guards), bound);
  Rates r;
  for (size_t i = 0; i < pairs.size(); ++i) r.add(pairs[i], hits[i]);
  return r;
}

std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

std::string kinds_cells(const Rates& r, const std::vector<std::string>& kinds) {
  std::string out;
  for (const std::string& k : kinds) {
    auto it = r.by_kind.find(k);
    out += " " +
           (it == r.by_kind.end() || it->second.second == 0 ? std::string("-")
                                                            : pct(double(it->second.first) / it->second.second)) +
           " |";
  }
  return out;
}

Result<json> eval_part(const EvalCacheOptions& o, const std::string& name, const std::string& path,
                       const EmbedderBundle& b, const cache::GuardOptions& guards, const std::vector<double>& deltas,
                       const cache::ErrorBound& bound, std::optional<cache::CacheCalibration>& calibration) {
  EDGELM_TRY(std::vector<Pair> pairs, read_pairs(path));
  EDGELM_TRY(Scored s, score_pairs(pairs, *b.embedder, b.wordnet.get()));
  // Issue 7's cache on the same pairs: the baseline.
  cache::LexicalEmbedder plain;
  EDGELM_TRY(Scored s0, score_pairs(pairs, plain, nullptr));
  cache::GuardOptions old_guards;
  old_guards.opposites = false;
  const Rates base = rates_at(pairs, s0, 0.80, &old_guards);
  if (!o.scores_path.empty()) {
    std::ofstream out(o.scores_path, std::ios::app);
    if (!out) return make_error("cannot write --scores file '{}'", o.scores_path);
    for (size_t i = 0; i < pairs.size(); ++i)
      out << name << '\t' << pairs[i].kind << '\t' << pairs[i].should_hit << '\t' << fmt::format("{:.4f}", s.sims[i])
          << '\t' << cache::guard_check(s.fa[i], s.fb[i], guards) << '\t' << fmt::format("{:.4f}", s0.sims[i]) << '\t'
          << pairs[i].a << '\t' << pairs[i].b << '\n';
  }
  const Rates mine = rates_at(pairs, s, o.threshold, &guards);
  std::set<std::string> kind_set;
  for (const Pair& p : pairs)
    if (!p.should_hit) kind_set.insert(p.kind);
  const std::vector<std::string> kinds(kind_set.begin(), kind_set.end());
  json j = {{"part", name},
            {"file", path},
            {"pairs", pairs.size()},
            {"should_hit", base.pos},
            {"must_not", base.neg},
            {"baseline", base.to_json()},
            {"configured", mine.to_json()},
            {"hit_ratio", base.hit_rate() > 0 ? mine.hit_rate() / base.hit_rate() : 0.0},
            {"rows", json::array()},
            {"error_bound", json::array()}};
  j["baseline"]["embedding"] = plain.name();
  j["baseline"]["guards"] = cache::guard_list(old_guards);
  j["baseline"]["threshold"] = 0.80;
  j["configured"]["embedding"] = b.embedder->name();
  j["configured"]["guards"] = cache::guard_list(guards);
  j["configured"]["threshold"] = o.threshold;
  std::string text = fmt::format("## {} part: {} ({} pairs: {} should hit, {} must not)\n\n", name, path, pairs.size(),
                                 base.pos, base.neg);
  std::string head = "| paraphrase hit | wrong-hit |";
  std::string rule = "|---|---|";
  for (const std::string& k : kinds) {
    head += " wrong " + k + " |";
    rule += "---|";
  }
  text += "| cache | embedding | guards | threshold " + head + "\n|---|---|---|---" + rule + "\n";
  auto line = [&](const char* what, const std::string& emb, const std::string& g, double t, const Rates& r) {
    return fmt::format("| {} | {} | {} | {:.2f} | {} ({}/{}) | {} ({}/{}) |{}\n", what, emb, g.empty() ? "none" : g, t,
                       pct(r.hit_rate()), r.pos_hit, r.pos, pct(r.wrong_rate()), r.neg_hit, r.neg,
                       kinds_cells(r, kinds));
  };
  text += line("issue 7 (baseline)", plain.name(), cache::guard_list(old_guards), 0.80, base);
  text += line("configured", b.embedder->name(), cache::guard_list(guards), o.threshold, mine);
  text += fmt::format("\nParaphrase hit rate: {:.2f}x the baseline's.\n\n", j["hit_ratio"].get<double>());
  text += "| threshold | guards " + head + "\n|---|---" + rule + "\n";
  for (int ti = 0; ti <= 9; ++ti) {
    const double t = 0.50 + 0.05 * ti;
    for (const bool g : {false, true}) {
      const Rates r = rates_at(pairs, s, t, g ? &guards : nullptr);
      json row = r.to_json();
      row["threshold"] = t;
      row["guards"] = g;
      j["rows"].push_back(row);
      text += fmt::format("| {:.2f} | {} | {} | {} |{}\n", t, g ? "on" : "off", pct(r.hit_rate()), pct(r.wrong_rate()),
                          kinds_cells(r, kinds));
    }
  }
  text += fmt::format("\nError-bound mode (prior threshold {:.2f}, slope {}, feedback on every hit):\n\n", o.threshold,
                      bound.slope);
  text += "| max error rate " + head + "\n|---" + rule + "\n";
  for (const double d : deltas) {
    cache::ErrorBound eb = bound;
    eb.max_error_rate = d;
    const Rates r = rates_error_bound(pairs, s, eb, guards);
    json row = r.to_json();
    row["max_error_rate"] = d;
    j["error_bound"].push_back(row);
    text += fmt::format("| {} | {} | {} |{}\n", d, pct(r.hit_rate()), pct(r.wrong_rate()), kinds_cells(r, kinds));
  }
  // Calibration (cache/calibration.h): tuned on the tuning part, checked on the held-out part.
  const std::vector<cache::ScoredPair> sp = scored_pairs(pairs, s, guards);
  if (name == "tuning") calibration = cache::calibrate(sp, b.embedder->name(), o.max_wrong_hit);
  if (calibration) {
    cache::ErrorBound eb = bound;
    eb.threshold = calibration->threshold;
    eb.slope = calibration->prior_slope;
    eb.max_error_rate = calibration->max_wrong_hit;
    const cache::PairRates at = cache::rates_of(sp, cache::hits_at(sp, calibration->threshold));
    const cache::PairRates er = cache::rates_of(sp, cache::replay_error_bound(sp, eb));
    j["calibration"] = {{"threshold", calibration->threshold},
                        {"prior_slope", calibration->prior_slope},
                        {"max_wrong_hit", calibration->max_wrong_hit},
                        {"at_threshold", {{"paraphrase_hit_rate", at.hit_rate()}, {"wrong_hit_rate", at.wrong_rate()}}},
                        {"error_bound", {{"paraphrase_hit_rate", er.hit_rate()}, {"wrong_hit_rate", er.wrong_rate()}}}};
    text += fmt::format(
        "\nCalibration (tuned on the tuning part for wrong-hit rate <= {}): threshold {:.3f}: paraphrase hit {} "
        "({}/{}), wrong-hit {} ({}/{}); error bound with prior slope {}: paraphrase hit {}, wrong-hit {}.\n",
        pct(calibration->max_wrong_hit), calibration->threshold, pct(at.hit_rate()), at.pos_hit, at.pos,
        pct(at.wrong_rate()), at.neg_hit, at.neg, calibration->prior_slope, pct(er.hit_rate()), pct(er.wrong_rate()));
  }
  j["text"] = text;
  return j;
}

int run_accuracy(const EvalCacheOptions& o, const EmbedderBundle& b, const cache::GuardOptions& guards) {
  std::vector<double> deltas;
  {
    std::stringstream ss(o.error_rates);
    std::string item;
    while (std::getline(ss, item, ',')) {
      try {
        deltas.push_back(std::stod(item));
      } catch (const std::exception&) {
        return report_error(make_error("--error-rates: '{}' is not a number", item));
      }
      if (!(deltas.back() > 0 && deltas.back() < 1))
        return report_error(make_error("--error-rates: {} is not in (0, 1)", deltas.back()));
    }
  }
  cache::ErrorBound bound;
  bound.threshold = o.threshold;
  bound.slope = cache::CacheOptions{}.prior_slope;
  json parts = json::array();
  std::optional<cache::CacheCalibration> calibration;
  for (const auto& [name, path] : {std::pair<std::string, std::string>{"tuning", o.pairs_path},
                                   std::pair<std::string, std::string>{"held-out", o.heldout_path}}) {
    if (path.empty()) continue;
    Result<json> part = eval_part(o, name, path, b, guards, deltas, bound, calibration);
    if (!part.ok()) return report_error(part.error());
    parts.push_back(std::move(*part));
  }
  if (!o.calibrate_out.empty()) {
    if (!calibration) return report_error(make_error("--calibrate-out needs the tuning pairs (--pairs FILE)"));
    const Status st = cache::write_calibration(o.calibrate_out, *calibration);
    if (!st.ok()) return report_error(st.error());
    std::fprintf(stderr, "wrote the calibration for %s to %s\n", calibration->embedder.c_str(), o.calibrate_out.c_str());
  }
  if (o.json_out) {
    for (json& p : parts) p.erase("text");
    std::printf("%s\n", json{{"embedding", b.embedder->name()}, {"parts", parts}}.dump(2).c_str());
    return 0;
  }
  for (const json& p : parts) std::printf("%s\n", p["text"].get<std::string>().c_str());
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

// This thread's CPU time: unlike wall time, not inflated when a loaded machine preempts the bench.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

int run_bench(const EvalCacheOptions& o, const std::shared_ptr<cache::Embedder>& embedder,
              const cache::GuardOptions& guards) {
  std::vector<size_t> sizes;
  {
    std::stringstream ss(o.bench_sizes);
    std::string item;
    while (std::getline(ss, item, ','))
      if (!item.empty()) sizes.push_back(std::stoul(item));
  }
  json results = json::array();
  if (!o.json_out)
    std::printf(
        "\n| entries | lookups | hits | lookup p50 us | lookup p99 us | lookup CPU p99 us | embed p50 us | "
        "insert s/1k |\n|---|---|---|---|---|---|---|---|\n");
  for (const size_t n : sizes) {
    cache::CacheOptions co;
    co.mode = cache::CacheMode::semantic;
    co.capacity = n;
    co.max_bytes = size_t{1} << 34;
    co.threshold = o.threshold;
    co.guard_options = guards;
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
    std::vector<double> lookup_us, embed_us, cpu_us;
    size_t hits = 0;
    std::mt19937_64 rng(3);
    for (int i = 0; i < o.bench_lookups; ++i) {
      cache::CacheRequest r;
      r.query = i % 2 == 0 ? stored[rng() % stored.size()] + " Please tell me." : fresh[n + static_cast<size_t>(i)];
      r.parts = {"bench", r.query, "t=0"};
      const auto e0 = std::chrono::steady_clock::now();
      (void)embedder->embed(r.query);
      embed_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - e0).count());
      const double c0 = thread_cpu_us();
      cache::CacheLookup l = (*c)->lookup(r);
      cpu_us.push_back(thread_cpu_us() - c0);
      lookup_us.push_back(l.seconds * 1e6);
      hits += l.level != cache::CacheLevel::miss;
    }
    const json row = {{"entries", n},
                      {"lookups", o.bench_lookups},
                      {"hits", hits},
                      {"lookup_us_p50", percentile(lookup_us, 50)},
                      {"lookup_us_p99", percentile(lookup_us, 99)},
                      {"lookup_cpu_us_p99", percentile(cpu_us, 99)},
                      {"embed_us_p50", percentile(embed_us, 50)},
                      {"insert_s_per_1k", insert_s * 1000.0 / static_cast<double>(n)}};
    results.push_back(row);
    if (!o.json_out)
      std::printf("| %zu | %d | %zu | %.1f | %.1f | %.1f | %.1f | %.3f |\n", n, o.bench_lookups, hits,
                  percentile(lookup_us, 50), percentile(lookup_us, 99), percentile(cpu_us, 99),
                  percentile(embed_us, 50), insert_s * 1000.0 / static_cast<double>(n));
  }
  if (o.json_out) std::printf("%s\n", json{{"bench", results}, {"embedding", embedder->name()}}.dump(2).c_str());
  return 0;
}

int run_eval_cache(const EvalCacheOptions& o) {
  if (o.pairs_path.empty() && o.heldout_path.empty() && !o.bench)
    return report_error(make_error("give --pairs FILE, --held-out FILE, --bench, or several"));
  Result<cache::GuardOptions> guards = cache::parse_guard_list(o.guards);
  if (!guards.ok()) return report_error(make_error("--guards: {}", guards.error().message));
  auto b = make_embedder(o, *guards);
  if (!b.ok()) return report_error(b.error());
  guards->wordnet = b->wordnet;
  if (!o.pairs_path.empty() || !o.heldout_path.empty()) {
    const int rc = run_accuracy(o, *b, *guards);
    if (rc != 0) return rc;
  }
  if (o.bench) return run_bench(o, b->embedder, *guards);
  return 0;
}

}  // namespace

CommandRunner add_eval_cache_command(CLI::App& app) {
  auto o = std::make_shared<EvalCacheOptions>();
  CLI::App* cmd = app.add_subcommand("eval-cache", "Evaluate the semantic response cache: hit and wrong-hit rates, lookup speed");
  cmd->add_option("--pairs", o->pairs_path, "Tuning pairs (TSV: query_a, query_b, should_hit, kind)");
  cmd->add_option("--held-out", o->heldout_path, "Held-out pairs (same format), reported separately");
  cmd->add_option("--embedding-model", o->embedding, "lexical | lexical-plain | self | PATH of an embedding GGUF")
      ->capture_default_str();
  cmd->add_option("--embedding-prefix", o->embedding_prefix,
                  "Instruction prepended to queries for an embedding GGUF: auto (the model card's) | none | TEXT")
      ->capture_default_str();
  cmd->add_option("--calibrate-out", o->calibrate_out,
                  "Write the threshold and prior slope tuned on --pairs for this embedder (JSON for serve "
                  "--cache-calibration)");
  cmd->add_option("--max-wrong-hit", o->max_wrong_hit, "Wrong-hit rate the calibration tunes for")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--threshold", o->threshold, "Similarity threshold of the configured cache (the prior)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--guards", o->guards, "Guards: all | none | a list of negation,numbers,entities,opposites")
      ->capture_default_str();
  cmd->add_option("--error-rates", o->error_rates, "Max error rates of the error-bound curve, comma-separated")
      ->capture_default_str();
  cmd->add_option("--scores", o->scores_path,
                  "Append every pair's scores to this TSV (part, kind, should_hit, similarity, failed guard, "
                  "baseline similarity, query_a, query_b)");
  cmd->add_option("--wordnet-dir", o->wordnet_dir, "WordNet 3.0 database folder (Debian: wordnet-base)")
      ->capture_default_str();
  cmd->add_option("--lexical-weights", o->lexical_weights,
                  "Override weights of the lexical embedder: stop=,question=,bigram=,trigram=,synonym=,senses=");
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
