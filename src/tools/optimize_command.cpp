// `edgelm optimize -m MODEL --sla "..." -o edgelm.yaml`: searches quantization, KV type,
// threads and pinning, speculation and batch limits for the configuration that meets the SLA
// on this machine (optimize/search.h), then writes the winner's `serve --config` YAML, its
// quantized model beside it, a report (Markdown + SVG) and the resumable state
// `<-o>.state.json`. Exit 0 with a winner; 2 when no candidate meets the SLA (the message names
// the binding constraint and the closest candidate; the report is still written); 1 on errors.
#include <filesystem>
#include <sstream>

#include "model/quantize.h"
#include "tools/command.h"
#include "tools/loadtest_command.h"
#include "tools/optimize/config_yaml.h"
#include "tools/optimize/report.h"
#include "tools/optimize/search.h"
#include "tools/optimize/serve_child.h"

namespace edgelm::tools {
namespace {

namespace fs = std::filesystem;
using namespace optimize;

struct OptimizeFlags {
  std::string model, sla, workload, output = "edgelm.yaml", prefer = "latency", quants, threads;
  int max_tokens = 0;
  double budget_minutes = 0, load_seconds = 0;
  bool quick = false;
};

Result<std::vector<std::string>> parse_quants(const std::string& list) {
  std::vector<std::string> out;
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) continue;
    if (item != "keep") {
      auto p = model::quant_preset_from_name(item);
      if (!p) return make_error("--quant-types: {}", p.error().message);
      item = std::string(model::quant_preset_name(*p));
    }
    out.push_back(item);
  }
  if (out.empty()) return make_error("--quant-types lists nothing (e.g. keep,q8_0,q4_k_m)");
  return out;
}

Result<SearchOptions> search_options(const OptimizeFlags& f) {
  SearchOptions o;
  std::error_code ec;
  if (!fs::is_regular_file(f.model, ec)) return make_error("-m: '{}' is not a readable model file", f.model);
  o.model_path = fs::weakly_canonical(fs::absolute(f.model), ec).string();
  EDGELM_TRY(o.sla, parse_sla(f.sla));
  o.quick = f.quick;
  o.max_tokens = f.max_tokens > 0 ? f.max_tokens : (f.quick ? 32 : 64);
  o.budget_s = 60 * (f.budget_minutes > 0 ? f.budget_minutes : (f.quick ? 2.5 : 10));
  o.load_duration_s = f.load_seconds;
  EDGELM_TRY(o.prefer, objective_from_name(f.prefer));
  if (!f.workload.empty()) {
    EDGELM_TRY(o.workload, read_loadtest_prompts(f.workload));
  } else {
    o.workload = loadtest_default_prompts();
  }
  if (!f.quants.empty()) {
    EDGELM_TRY(o.quants, parse_quants(f.quants));
  }
  if (!f.threads.empty()) {
    EDGELM_TRY(o.threads, parse_int_list(f.threads, 1, 1024, "--threads", "thread count", "1,2,4"));
  }
  const fs::path out = fs::absolute(f.output);
  if (out.extension() != ".yaml" && out.extension() != ".yml")
    return make_error("-o: '{}' should be a .yaml file (the serve --config it writes)", f.output);
  if (!fs::is_directory(out.parent_path(), ec))
    return make_error("-o: the folder '{}' does not exist", out.parent_path().string());
  o.output_yaml = out.string();
  o.exe = self_executable();
  return o;
}

// Removes the quantized files of the candidates that did not win (all of them without a winner).
void remove_losers(const SearchOptions& o, const SearchResult& r) {
  const std::string keep = r.winner >= 0 ? r.winner_model_path : "";
  for (const Row& row : r.rows) {
    if (row.m.cand.quant == "keep") continue;
    const std::string path = quantized_model_path(o.output_yaml, row.m.cand.quant);
    std::error_code ec;
    if (path != keep && fs::exists(path, ec)) fs::remove(path, ec);
  }
}

int run(const OptimizeFlags& f) {
  auto o = search_options(f);
  if (!o) return report_error(o.error());
  auto r = run_search(*o);
  if (!r) return report_error(r.error());
  const fs::path yaml(o->output_yaml);
  const std::string md = (yaml.parent_path() / (yaml.stem().string() + ".report.md")).string();
  const std::string svg = (yaml.parent_path() / (yaml.stem().string() + ".report.svg")).string();
  remove_losers(*o, *r);
  if (auto st = write_report(*o, *r, md, svg); !st) return report_error(st.error());
  if (r->winner < 0) {
    std::error_code ec;
    fs::remove(o->output_yaml, ec);  // a config from an earlier run would not meet this SLA
    std::fprintf(stderr, "edgelm optimize: report: %s\n", md.c_str());
    report_error(make_error("{} (report: {})", r->why, md));
    return 2;
  }
  const Row& w = r->rows[static_cast<size_t>(r->winner)];
  std::vector<std::string> comment = {
      fmt::format("edgelm optimize --sla \"{}\" on {}", sla_text(o->sla), machine_description()),
      fmt::format("winner: {}", candidate_label(w.m.cand)),
      fmt::format("measured: p95 {:.1f} ms, TTFT p95 {:.1f} ms, {:.1f} req/s, KLD {:.6f}, peak RSS {:.1f} MiB",
                  w.m.p95_ms.value_or(0), w.m.ttft_p95_ms.value_or(0), w.m.achieved_qps.value_or(0),
                  w.observed.kld.value_or(0), w.m.rss_bytes.value_or(0) / double(1 << 20)),
      "report: " + md,
  };
  if (auto st = write_candidate_yaml(o->output_yaml, w.m.cand, r->winner_model_path, comment); !st)
    return report_error(st.error());
  std::printf("winner: %s\nconfig: %s (edgelm serve --config %s)\nmodel: %s\nreport: %s\nplot: %s\nstate: %s\n",
              candidate_label(w.m.cand).c_str(), o->output_yaml.c_str(), o->output_yaml.c_str(),
              r->winner_model_path.c_str(), md.c_str(), svg.c_str(), (o->output_yaml + ".state.json").c_str());
  std::fprintf(stderr, "edgelm optimize: %zu measurement(s) new, %zu reused, %.1f s\n", r->measured, r->reused,
               r->elapsed_s);
  return 0;
}

}  // namespace

CommandRunner add_optimize_command(CLI::App& app) {
  auto f = std::make_shared<OptimizeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "optimize", "Search quantization, KV type, threads, batching and speculation for an SLA on this machine");
  cmd->add_option("-m,--model", f->model, "The model (GGUF); its weights are the quality reference")->required();
  cmd->add_option("--sla", f->sla,
                  "Targets, each optional: p95_ms<=MS,ttft_p95_ms<=MS,qps>=Q,kld<=K,rss<=SIZE (e.g. "
                  "\"p95_ms<=800,qps>=20,kld<=0.05,rss<=1.5G\")");
  cmd->add_option("--workload", f->workload, "Prompts file, one per line (the loadtest --prompts format)");
  cmd->add_option("--max-tokens", f->max_tokens, "Generated tokens per request (default 64; --quick 32)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--budget-minutes", f->budget_minutes, "Time budget of the search (default 10; --quick 2.5)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--quick", f->quick,
                "A small space (keep, q8_0, q4_0; two thread counts; short runs): minutes, not tens of minutes");
  cmd->add_option("-o,--output", f->output,
                  "The serve --config YAML to write; beside it: <stem>-<quant>.gguf, <stem>.report.md/.svg, and "
                  "<-o>.state.json")
      ->capture_default_str();
  cmd->add_option("--prefer", f->prefer,
                  "Among candidates that meet the SLA: latency | memory | quality | energy (J or CPU-s per token)")
      ->capture_default_str();
  cmd->add_option("--quant-types", f->quants, "Quantizations to search instead of the default space (keep,q8_0,...)");
  cmd->add_option("--threads", f->threads, "Thread counts to search instead of the default space (e.g. 1,2,4)");
  cmd->add_option("--load-seconds", f->load_seconds, "Duration of each load test (default 8; --quick 3)")
      ->check(CLI::PositiveNumber);
  return [f] { return run(*f); };
}

}  // namespace edgelm::tools
