#include "tools/optimize/candidate.h"

#include <sched.h>

#include <vector>

namespace edgelm::tools::optimize {

std::string cpu_list(int threads) {
  std::vector<int> allowed;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set)) allowed.push_back(cpu);
  }
  std::string out;
  for (int i = 0; i < threads; ++i) {
    const int cpu = allowed.empty() ? i : allowed[static_cast<size_t>(i) % allowed.size()];
    out += fmt::format("{}{}", out.empty() ? "" : ",", cpu);
  }
  return out;
}

engine::DraftSpec draft_spec(const Candidate& c) {
  engine::DraftSpec ds;
  if (c.spec.rfind("draft:", 0) == 0)
    ds.draft_quant = c.spec.substr(6);
  else
    ds.spec = c.spec;
  return ds;
}

std::string candidate_label(const Candidate& c) {
  std::string out =
      fmt::format("{} kv={} t={}{} spec={}", c.quant, c.kv_type, c.threads, c.pinned ? " pin" : "", c.spec);
  if (c.max_batch_size > 0)
    out += fmt::format(" bs={} bt={} step={:g}", c.max_batch_size, c.max_batch_tokens, c.target_step_ms);
  return out;
}

std::string_view stage_name(Stage s) {
  switch (s) {
    case Stage::quality: return "quality";
    case Stage::bench: return "bench";
    case Stage::sweep: return "sweep";
    case Stage::load: return "load";
  }
  return "?";
}

std::string measurement_key(const Measurement& m) {
  const Candidate& c = m.cand;
  switch (m.stage) {
    case Stage::quality: return "quality/" + c.quant;
    case Stage::bench:
      return fmt::format("bench/{}/{}/t{}{}/{}", c.quant, c.kv_type, c.threads, c.pinned ? "p" : "", c.spec);
    case Stage::sweep:
      return fmt::format("sweep/{}/{}/t{}{}/{}/c{}", c.quant, c.kv_type, c.threads, c.pinned ? "p" : "", c.spec,
                         m.concurrency);
    case Stage::load:
      return fmt::format("load/{}/{}/t{}{}/{}/bs{}/bt{}/st{:g}/kv{}", c.quant, c.kv_type, c.threads,
                         c.pinned ? "p" : "", c.spec, c.max_batch_size, c.max_batch_tokens, c.target_step_ms,
                         c.kv_memory_bytes);
  }
  return "?";
}

namespace {

// The optional fields, by name, for both directions.
template <typename F>
void for_each_number(Measurement& m, F&& f) {
  f("kld", m.kld);
  f("kld_max", m.kld_max);
  f("ppl", m.ppl);
  f("top1", m.top1);
  f("weight_bytes", m.weight_bytes);
  f("prefill_tok_s", m.prefill_tok_s);
  f("decode_tok_s", m.decode_tok_s);
  f("latency_ms", m.latency_ms);
  f("ttft_ms", m.ttft_ms);
  f("tok_s", m.tok_s);
  f("accept_rate", m.accept_rate);
  f("p50_ms", m.p50_ms);
  f("p95_ms", m.p95_ms);
  f("ttft_p95_ms", m.ttft_p95_ms);
  f("offered_qps", m.offered_qps);
  f("achieved_qps", m.achieved_qps);
  f("capacity_qps", m.capacity_qps);
  f("sent", m.sent);
  f("ok", m.ok);
  f("rss_bytes", m.rss_bytes);
  f("cpu_s_per_token", m.cpu_s_per_token);
  f("joules_per_token", m.joules_per_token);
}

}  // namespace

nlohmann::json to_json(const Measurement& m_in) {
  Measurement m = m_in;
  const Candidate& c = m.cand;
  nlohmann::json j = {{"stage", stage_name(m.stage)},
                      {"quant", c.quant},
                      {"kv_type", c.kv_type},
                      {"threads", c.threads},
                      {"pinned", c.pinned},
                      {"spec", c.spec},
                      {"max_batch_size", c.max_batch_size},
                      {"max_batch_tokens", c.max_batch_tokens},
                      {"target_step_ms", c.target_step_ms},
                      {"kv_memory_bytes", c.kv_memory_bytes},
                      {"concurrency", m.concurrency},
                      {"seconds", m.seconds}};
  if (!m.error.empty()) j["error"] = m.error;
  for_each_number(m, [&](const char* name, const std::optional<double>& v) {
    if (v) j[name] = *v;
  });
  if (m.keeps_up) j["keeps_up"] = *m.keeps_up;
  return j;
}

Result<Measurement> measurement_from_json(const nlohmann::json& j) {
  try {
    Measurement m;
    const std::string stage = j.at("stage").get<std::string>();
    bool known = false;
    for (Stage s : {Stage::quality, Stage::bench, Stage::sweep, Stage::load})
      if (stage == stage_name(s)) m.stage = s, known = true;
    if (!known) return make_error("unknown stage '{}'", stage);
    Candidate& c = m.cand;
    c.quant = j.at("quant").get<std::string>();
    c.kv_type = j.at("kv_type").get<std::string>();
    c.threads = j.at("threads").get<int>();
    c.pinned = j.at("pinned").get<bool>();
    c.spec = j.at("spec").get<std::string>();
    c.max_batch_size = j.at("max_batch_size").get<int>();
    c.max_batch_tokens = j.at("max_batch_tokens").get<int>();
    c.target_step_ms = j.at("target_step_ms").get<double>();
    c.kv_memory_bytes = j.at("kv_memory_bytes").get<size_t>();
    m.concurrency = j.at("concurrency").get<int>();
    m.seconds = j.at("seconds").get<double>();
    if (j.contains("error")) m.error = j["error"].get<std::string>();
    for_each_number(m, [&](const char* name, std::optional<double>& v) {
      if (j.contains(name)) v = j[name].get<double>();
    });
    if (j.contains("keeps_up")) m.keeps_up = j["keeps_up"].get<bool>();
    return m;
  } catch (const nlohmann::json::exception& e) {
    return make_error("{}", e.what());
  }
}

}  // namespace edgelm::tools::optimize
