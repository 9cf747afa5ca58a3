// The plain-logic pieces of `edgelm optimize`: the SLA grammar and its errors, checks against
// measurements, the objective order, the Pareto front, the closest candidate, the state file
// (round trip, fingerprint, bad files), the candidate YAML as `serve --config` reads it, and the
// default search spaces.
#include <gtest/gtest.h>

#include <fstream>

#include "serve/config.h"
#include "support/test_data.h"
#include "tools/optimize/config_yaml.h"
#include "tools/optimize/ranking.h"
#include "tools/optimize/search.h"
#include "tools/optimize/sla.h"
#include "tools/optimize/state_file.h"

namespace edgelm::tools::optimize {
namespace {

TEST(OptimizeSla, ParsesEveryKeyAndWritesItBack) {
  auto s = parse_sla(" p95_ms<=800, qps>=20,kld<=0.05,rss<=1.5G,ttft_p95_ms<=300 ");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_DOUBLE_EQ(*s->p95_ms, 800);
  EXPECT_DOUBLE_EQ(*s->qps, 20);
  EXPECT_DOUBLE_EQ(*s->kld, 0.05);
  EXPECT_DOUBLE_EQ(*s->rss_bytes, 1.5 * (1 << 30));
  EXPECT_DOUBLE_EQ(*s->ttft_p95_ms, 300);
  EXPECT_EQ(sla_text(*s), "p95_ms<=800,ttft_p95_ms<=300,qps>=20,kld<=0.05,rss<=1.5G");
  auto empty = parse_sla("");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  EXPECT_TRUE(parse_sla("kld<=0").ok());  // no loss at all: only "keep" can meet it
}

TEST(OptimizeSla, ErrorsNameTheItem) {
  auto msg = [](const char* text) {
    auto s = parse_sla(text);
    EXPECT_FALSE(s.ok()) << text;
    return s.ok() ? std::string() : s.error().message;
  };
  EXPECT_NE(msg("p99_ms<=800").find("unknown key 'p99_ms'"), std::string::npos);
  EXPECT_NE(msg("qps<=20").find("qps takes '>='"), std::string::npos);
  EXPECT_NE(msg("p95_ms>=20").find("p95_ms takes '<='"), std::string::npos);
  EXPECT_NE(msg("kld<0.05").find("kld takes '<='"), std::string::npos);
  EXPECT_NE(msg("kld<=abc").find("kld: 'abc' is not a number"), std::string::npos);
  EXPECT_NE(msg("p95_ms<=").find("p95_ms: '' is not a number"), std::string::npos);
  EXPECT_NE(msg("p95_ms<=-3").find("must be > 0"), std::string::npos);
  EXPECT_NE(msg("rss<=lots").find("rss:"), std::string::npos);
  EXPECT_NE(msg("p95_ms").find("has no operator"), std::string::npos);
  EXPECT_NE(msg("qps>=1,qps>=2").find("qps is given twice"), std::string::npos);
}

TEST(OptimizeSla, ChecksGiveRatiosAgainstTheLimits) {
  const Sla sla = *parse_sla("p95_ms<=100,qps>=10,rss<=1G");
  Observed o;
  o.p95_ms = 50;
  o.qps = 5;  // kept up with half the target
  auto checks = check_sla(sla, o);
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_TRUE(checks[0].met());
  EXPECT_DOUBLE_EQ(checks[0].ratio, 0.5);
  EXPECT_FALSE(checks[1].met());
  EXPECT_DOUBLE_EQ(checks[1].ratio, 2.0);
  EXPECT_FALSE(checks[2].met());  // not measured is not met
  EXPECT_FALSE(sla_met(checks));
  EXPECT_FALSE(sla_plausible(checks, 1.25));
  EXPECT_TRUE(sla_plausible(checks, 2.0));  // unmeasured counts as plausible
  Observed big;
  big.rss_bytes = 1.05 * (1 << 30);
  big.kld = 0.0;
  EXPECT_FALSE(sla_plausible(check_sla(sla, big), 2.0));  // rss has its own slack (default none)
  EXPECT_TRUE(sla_plausible(check_sla(sla, big), 2.0, 1.1));
  const Sla kld = *parse_sla("kld<=0.1");
  Observed lossy;
  lossy.kld = 0.105;
  EXPECT_FALSE(sla_plausible(check_sla(kld, lossy), 2.0, 2.0));  // kld is measured: no slack
  ASSERT_NE(worst_check(checks), nullptr);
  EXPECT_EQ(worst_check(checks)->text, "qps>=10");
  EXPECT_EQ(checks[2].text, "rss<=1G");
}

TEST(OptimizeRanking, ObjectiveThenNextMetricWithin5Percent) {
  Scores fast{10.0, 900.0, 0.1, std::nullopt}, small{10.3, 500.0, 0.1, std::nullopt}, slow{20.0, 100.0, 0.0, {}};
  EXPECT_TRUE(better(small, fast, Objective::latency));  // within 5%: memory decides
  EXPECT_TRUE(better(fast, slow, Objective::latency));
  EXPECT_TRUE(better(slow, small, Objective::memory));
  EXPECT_TRUE(better(slow, fast, Objective::quality));
  EXPECT_FALSE(better(fast, fast, Objective::latency));
  Scores unmeasured;
  EXPECT_TRUE(better(slow, unmeasured, Objective::energy));  // energy unset on both: latency decides
  EXPECT_TRUE(objective_from_name("memory").ok());
  EXPECT_NE(objective_from_name("speed").error().message.find("latency, memory, quality, energy"), std::string::npos);
}

TEST(OptimizeRanking, ParetoFrontAndClosestCandidate) {
  std::vector<Scores> pts = {
      {10, 100, 0.1, {}},  // 0: front (fastest)
      {20, 50, 0.1, {}},   // 1: front (smallest)
      {30, 200, 0.2, {}},  // 2: dominated by 0
      {40, 300, 0.0, {}},  // 3: front (best quality)
      {10, 100, 0.1, {}},  // 4: equal to 0: only the first stays
      {5, {}, 0.1, {}},    // 5: incomplete: left out
  };
  EXPECT_EQ(pareto_front(pts), (std::vector<size_t>{0, 1, 3}));
  const Sla sla = *parse_sla("p95_ms<=1,kld<=0.5");
  std::vector<std::vector<SlaCheck>> checks;
  for (double p95 : {30.0, 4.0, 9.0}) {
    Observed o;
    o.p95_ms = p95;
    o.kld = 0.1;
    checks.push_back(check_sla(sla, o));
  }
  EXPECT_EQ(closest_to_sla(checks), 1);
  EXPECT_EQ(closest_to_sla({}), -1);
}

Measurement sample_load() {
  Measurement m;
  m.stage = Stage::load;
  m.cand.quant = "q4_0";
  m.cand.kv_type = "q8_0";
  m.cand.threads = 2;
  m.cand.pinned = true;
  m.cand.spec = "ngram:3";
  m.cand.max_batch_size = 8;
  m.cand.max_batch_tokens = 512;
  m.cand.target_step_ms = 100;
  m.cand.kv_memory_bytes = 32 << 20;
  m.p95_ms = 123.5;
  m.keeps_up = true;
  m.rss_bytes = 1e8;
  m.seconds = 4.5;
  return m;
}

TEST(OptimizeState, RoundTripsAndRejectsAnotherFingerprint) {
  test::TempDir dir;
  const std::string path = dir.file("x.yaml.state.json");
  const nlohmann::json fp = {{"model", "/m.gguf"}, {"quick", true}};
  {
    StateFile s(path, fp);
    EXPECT_NE(s.load().find("no state file"), std::string::npos);
    s.put(sample_load());
    Measurement q;
    q.stage = Stage::quality;
    q.cand.quant = "q8_0";
    q.kld = 0.0123;
    s.put(q);
    ASSERT_TRUE(s.save().ok());
  }
  StateFile again(path, fp);
  EXPECT_NE(again.load().find("2 finished measurement"), std::string::npos);
  const Measurement* m = again.find(measurement_key(sample_load()));
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->cand, sample_load().cand);
  EXPECT_DOUBLE_EQ(*m->p95_ms, 123.5);
  EXPECT_TRUE(*m->keeps_up);
  EXPECT_FALSE(m->kld.has_value());
  ASSERT_NE(again.find("quality/q8_0"), nullptr);
  EXPECT_DOUBLE_EQ(*again.find("quality/q8_0")->kld, 0.0123);

  StateFile other(path, {{"model", "/other.gguf"}, {"quick", true}});
  EXPECT_NE(other.load().find("another model"), std::string::npos);
  EXPECT_TRUE(other.all().empty());

  test::write_file(path, "{ not json");
  StateFile broken(path, fp);
  EXPECT_NE(broken.load().find("does not parse"), std::string::npos);
  EXPECT_TRUE(broken.all().empty());
}

TEST(OptimizeState, KeysNameWhatTheStageVaries) {
  Measurement b = sample_load();
  b.stage = Stage::bench;
  EXPECT_EQ(measurement_key(b), "bench/q4_0/q8_0/t2p/ngram:3");
  b.stage = Stage::sweep;
  b.concurrency = 4;
  EXPECT_EQ(measurement_key(b), "sweep/q4_0/q8_0/t2p/ngram:3/c4");
  EXPECT_EQ(measurement_key(sample_load()), "load/q4_0/q8_0/t2p/ngram:3/bs8/bt512/st100/kv33554432");
}

TEST(OptimizeYaml, ServeConfigLoadsTheCandidate) {
  test::TempDir dir;
  const std::string yaml = dir.file("c.yaml");
  Candidate c = sample_load().cand;
  ASSERT_TRUE(write_candidate_yaml(yaml, c, "/abs/model.gguf", {"a comment"}).ok());
  auto cfg = serve::load_config_file(yaml, serve::ServeConfig{});
  ASSERT_TRUE(cfg.ok()) << cfg.error().message << "\n" << test::read_file(yaml);
  EXPECT_EQ(cfg->model_path, "/abs/model.gguf");
  EXPECT_EQ(cfg->threads, 2);
  EXPECT_EQ(cfg->cpu_affinity, cpu_list(2));
  EXPECT_EQ(cfg->kv_type, "q8_0");
  EXPECT_EQ(cfg->kv_memory, "32M");
  EXPECT_EQ(cfg->max_batch_size, 8);
  EXPECT_EQ(cfg->max_batch_tokens, 512);
  EXPECT_DOUBLE_EQ(cfg->target_step_ms, 100);
  EXPECT_EQ(cfg->spec, "ngram:3");
  EXPECT_TRUE(serve::validate(*cfg).ok());
  c.spec = "draft:q4_0";
  ASSERT_TRUE(write_candidate_yaml(yaml, c, "/abs/model.gguf").ok());
  cfg = serve::load_config_file(yaml, serve::ServeConfig{});
  ASSERT_TRUE(cfg.ok());
  EXPECT_EQ(cfg->draft_quant, "q4_0");
  EXPECT_EQ(cfg->spec, "off");
}

TEST(OptimizeSpace, DefaultsSkipTypesThatCannotBeatTheGivenModel) {
  EXPECT_EQ(default_quant_space("f32", true), (std::vector<std::string>{"keep", "q8_0", "q4_0"}));
  EXPECT_EQ(default_quant_space("q8_0", true), (std::vector<std::string>{"keep", "q4_0"}));
  EXPECT_EQ(default_quant_space("q4_0", true), (std::vector<std::string>{"keep"}));
  EXPECT_EQ(default_quant_space("f16", false),
            (std::vector<std::string>{"keep", "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0"}));
  EXPECT_EQ(default_thread_space(8, true), (std::vector<int>{4, 8}));
  EXPECT_EQ(default_thread_space(1, true), (std::vector<int>{1}));
  EXPECT_EQ(default_thread_space(6, false), (std::vector<int>{1, 2, 4, 6}));
  EXPECT_EQ(quantized_model_path("/a/b/edgelm.yaml", "q4_0"), "/a/b/edgelm-q4_0.gguf");
}

}  // namespace
}  // namespace edgelm::tools::optimize
