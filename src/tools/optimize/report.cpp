#include "tools/optimize/report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/thread_pool.h"
#include "kernels/isa.h"

namespace edgelm::tools::optimize {
namespace {

std::string num(const std::optional<double>& v, const char* spec = "{:.2f}") {
  return v ? fmt::format(fmt::runtime(spec), *v) : std::string();
}
std::string mib(const std::optional<double>& v) { return v ? fmt::format("{:.1f}", *v / double(1 << 20)) : ""; }

bool is_predicted(const Row& r) { return r.m.stage == Stage::bench || r.m.stage == Stage::sweep; }

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|')
      out += "\\|";
    else
      out += c;
  }
  return out;
}

std::string xml(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '&')
      out += "&amp;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

Scores row_scores(const Row& r) {
  Scores s;
  s.latency_ms = r.observed.p95_ms;
  s.kld = r.observed.kld;
  s.rss_bytes = r.observed.rss_bytes;
  return s;
}

}  // namespace

std::string machine_description() {
  std::string model;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) model = line.substr(colon + 2);
      break;
    }
  }
  if (model.empty()) model = "unknown CPU";
  return fmt::format("{}, {} hardware threads, kernels {}", model, ThreadPool::hardware_threads(),
                     kernels::isa_name(kernels::active_isa()));
}

std::vector<int> pareto_rows(const SearchResult& r) {
  std::vector<int> pool;
  for (Stage stage : {Stage::load, Stage::bench}) {
    for (size_t i = 0; i < r.rows.size(); ++i)
      if (r.rows[i].m.stage == stage && r.rows[i].m.error.empty()) pool.push_back(static_cast<int>(i));
    if (!pool.empty()) break;
  }
  std::vector<Scores> points;
  for (const int i : pool) points.push_back(row_scores(r.rows[static_cast<size_t>(i)]));
  std::vector<int> out;
  for (const size_t k : pareto_front(points)) out.push_back(pool[k]);
  return out;
}

std::string report_markdown(const SearchOptions& o, const SearchResult& r, const std::string& svg_name) {
  std::string md;
  md += "# edgelm optimize report\n\n";
  md += fmt::format("- model: `{}`\n", o.model_path);
  md += fmt::format("- machine: {}\n", machine_description());
  md += fmt::format("- SLA: `{}`{}\n", sla_text(o.sla).empty() ? "(none)" : sla_text(o.sla),
                    o.sla.qps ? "" : " (no qps: latency at concurrency 1)");
  const double d = o.load_duration_s > 0 ? o.load_duration_s : (o.quick ? 3.0 : 8.0);
  md += fmt::format(
      "- workload: {} prompt(s), {} generated tokens each; load tests of {:g} to {:g} s (long enough for "
      "{} requests){}\n",
      o.workload.size(), o.max_tokens, d, 3 * d, o.quick ? 8 : 20,
      o.sla.qps ? fmt::format(", open loop at {:g} req/s", *o.sla.qps) : ", one request at a time");
  md += fmt::format("- search: {}{}, prefer {}, {:.1f} s of a {:.0f} s budget; {} measurement(s) new, {} reused ({})\n",
                    o.quick ? "--quick" : "full", r.budget_ran_out ? " (budget ran out)" : "", objective_name(o.prefer),
                    r.elapsed_s, o.budget_s, r.measured, r.reused, r.state_note);
  md += fmt::format("- energy: {}\n\n", r.energy);

  md += "## Result\n\n";
  if (r.winner >= 0) {
    const Row& w = r.rows[static_cast<size_t>(r.winner)];
    md += fmt::format("**Winner: {}** (model `{}`)\n\n", esc(candidate_label(w.m.cand)), r.winner_model_path);
  } else {
    md += fmt::format("**No candidate meets the SLA.** Binding constraint: `{}`.\n\n",
                      r.binding.empty() ? "(none measured)" : r.binding);
  }
  md += esc(r.why) + "\n\n";
  for (const std::string& n : r.notes) md += "- " + esc(n) + "\n";
  if (!r.notes.empty()) md += "\n";

  md += "## Device preset for this CPU\n\n";
  md += fmt::format("threads: **{}**{}, max_batch_size: **{}**. {}.\n\n", r.preset.threads,
                    r.preset.pinned ? " (pinned)" : "", r.preset.batch,
                    r.preset.basis.empty() ? "Not measured" : esc(r.preset.basis));

  md += "## Every candidate measured\n\n";
  md +=
      "Values marked `~` are predictions from the in-process bench (one request at a time), not load tests. KLD "
      "is against the given model on a short built-in text (engine/evaluator.h, F32 KV: the KV type's own loss is "
      "not in it); on a model with random weights it means nothing. RSS of a bench row is weights + KV pool + 24 "
      "MiB; of a load row the server's peak (VmHWM).\n\n";
  md +=
      "| # | stage | quant | kv | threads | pin | spec | batch | batch tokens | step ms | KV pool MiB | weights MiB | "
      "KLD | PPL | top-1 | prefill tok/s | decode tok/s | tok/s (all) | p50 ms | p95 ms | TTFT p95 ms | capacity req/s "
      "| "
      "RSS MiB | CPU-s/token | J/token | spec accept | s | verdict |\n";
  md += "|" + std::string() + [] {
    std::string s;
    for (int i = 0; i < 28; ++i) s += "---|";
    return s;
  }() + "\n";
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    const Measurement& m = row.m;
    const Candidate& c = m.cand;
    const bool serving = m.stage == Stage::load;
    const bool engine_row = m.stage != Stage::quality;
    const std::string pre = is_predicted(row) ? "~" : "";
    const std::optional<double> weights = m.weight_bytes ? m.weight_bytes : std::optional<double>();
    std::string stage(stage_name(m.stage));
    if (m.stage == Stage::sweep) stage += fmt::format(" x{}", m.concurrency);
    std::string verdict = row.verdict + (row.reused ? " (reused)" : "");
    if (static_cast<int>(i) == r.winner) verdict = "**winner**";
    md += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | "
        "{} | {} | {} | {} | {} | {:.1f} | {} |\n",
        i + 1, stage, c.quant, engine_row ? c.kv_type : "", engine_row ? std::to_string(c.threads) : "",
        engine_row && c.pinned ? "yes" : "", engine_row ? c.spec : "", serving ? std::to_string(c.max_batch_size) : "",
        serving ? std::to_string(c.max_batch_tokens) : "", serving ? fmt::format("{:g}", c.target_step_ms) : "",
        serving ? mib(static_cast<double>(c.kv_memory_bytes)) : "", mib(weights), num(row.observed.kld, "{:.6f}"),
        num(m.ppl, "{:.3f}"), num(m.top1, "{:.3f}"), num(m.prefill_tok_s, "{:.1f}"), num(m.decode_tok_s, "{:.1f}"),
        num(m.tok_s, "{:.1f}"), num(m.p50_ms), row.observed.p95_ms ? pre + num(row.observed.p95_ms) : "",
        row.observed.ttft_p95_ms ? pre + num(row.observed.ttft_p95_ms) : "",
        row.observed.qps ? pre + num(row.observed.qps, "{:.1f}") : "",
        row.observed.rss_bytes && m.stage != Stage::quality ? pre + mib(row.observed.rss_bytes) : "",
        num(m.cpu_s_per_token, "{:.5f}"), num(m.joules_per_token, "{:.4f}"), num(m.accept_rate, "{:.2f}"), m.seconds,
        esc(verdict));
  }
  md += "\n## Pareto front: latency vs quality vs memory\n\n";
  const std::vector<int> front = pareto_rows(r);
  md += "Candidates no other candidate beats on p95 latency, KLD and RSS at once (among the ";
  md += (!front.empty() && r.rows[static_cast<size_t>(front.front())].m.stage == Stage::load) ? "load-tested ones"
                                                                                              : "bench runs: predicted";
  md += ").\n\n| # | candidate | p95 ms | KLD | RSS MiB | meets the SLA |\n|---|---|---|---|---|---|\n";
  for (const int i : front) {
    const Row& row = r.rows[static_cast<size_t>(i)];
    md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", i + 1, esc(candidate_label(row.m.cand)),
                      num(row.observed.p95_ms), num(row.observed.kld, "{:.6f}"), mib(row.observed.rss_bytes),
                      sla_met(row.checks) ? (i == r.winner ? "yes (winner)" : "yes") : "no");
  }
  md += fmt::format("\n![p95 latency vs KLD, marker area ~ RSS]({})\n", svg_name);
  return md;
}

std::string pareto_svg(const SearchOptions& o, const SearchResult& r) {
  constexpr double W = 720, H = 440, L = 70, R = 200, T = 40, B = 50;
  std::vector<int> pts;
  const std::vector<int> front = pareto_rows(r);
  const Stage stage = front.empty() ? Stage::load : r.rows[static_cast<size_t>(front.front())].m.stage;
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const Row& row = r.rows[i];
    if (row.m.stage == stage && row.m.error.empty() && row.observed.p95_ms && row.observed.kld)
      pts.push_back(static_cast<int>(i));
  }
  double xmax = o.sla.p95_ms.value_or(0), ymax = o.sla.kld.value_or(0), rmax = 1;
  for (const int i : pts) {
    const Row& row = r.rows[static_cast<size_t>(i)];
    xmax = std::max(xmax, *row.observed.p95_ms);
    ymax = std::max(ymax, *row.observed.kld);
    rmax = std::max(rmax, row.observed.rss_bytes.value_or(0));
  }
  xmax = xmax > 0 ? xmax * 1.1 : 1;
  ymax = ymax > 0 ? ymax * 1.15 : 1e-3;
  auto X = [&](double v) { return L + (W - L - R) * v / xmax; };
  auto Y = [&](double v) { return H - B - (H - T - B) * v / ymax; };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      W, H);
  s += fmt::format(
      "<text x=\"{}\" y=\"22\" font-size=\"14\">edgelm optimize: p95 latency vs KLD ({}), marker area ~ "
      "RSS</text>\n",
      L, stage == Stage::load ? "load tests" : "bench predictions");
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n", L, H - B, W - R);
  s += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n", L, H - B, T);
  for (int k = 0; k <= 4; ++k) {
    const double xv = xmax * k / 4, yv = ymax * k / 4;
    s += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.3g}</text>\n", X(xv), H - B + 16, xv);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.3g}</text>\n", L - 6, Y(yv) + 4, yv);
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">p95 latency (ms)</text>\n", (L + W - R) / 2, H - 12);
  s += fmt::format("<text x=\"16\" y=\"{}\" transform=\"rotate(-90 16 {})\" text-anchor=\"middle\">KLD (nats)</text>\n",
                   (T + H - B) / 2, (T + H - B) / 2);
  if (o.sla.p95_ms)
    s += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#c00\" stroke-dasharray=\"4 3\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" fill=\"#c00\">p95_ms limit</text>\n",
        X(*o.sla.p95_ms), H - B, T, T - 4);
  if (o.sla.kld)
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#c00\" stroke-dasharray=\"4 3\"/>"
        "<text x=\"{2}\" y=\"{3:.1f}\" fill=\"#c00\"> kld limit</text>\n",
        L, Y(*o.sla.kld), W - R, Y(*o.sla.kld) + 4);
  for (const int i : pts) {
    const Row& row = r.rows[static_cast<size_t>(i)];
    const bool on_front = std::find(front.begin(), front.end(), i) != front.end();
    const double radius = 4 + 10 * std::sqrt(row.observed.rss_bytes.value_or(0) / rmax);
    const char* fill = i == r.winner ? "#2a2" : on_front ? "#d62" : "#999";
    s += fmt::format(
        "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:.1f}\" fill=\"{}\" fill-opacity=\"0.6\" "
        "stroke=\"black\" stroke-width=\"{}\"><title>#{} {}</title></circle>\n",
        X(*row.observed.p95_ms), Y(*row.observed.kld), radius, fill, i == r.winner ? 2 : 0.5, i + 1,
        xml(candidate_label(row.m.cand)));
    if (on_front || i == r.winner)
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">#{}</text>\n", X(*row.observed.p95_ms) + radius + 2,
                       Y(*row.observed.kld) - 2, i + 1);
  }
  // Legend: the front and the winner, by row number.
  double ly = T + 10;
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-weight=\"bold\">Pareto front</text>\n", W - R + 12, ly);
  for (const int i : front) {
    ly += 15;
    const Row& row = r.rows[static_cast<size_t>(i)];
    s += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">#{} {}</text>\n", W - R + 12, ly,
                     i == r.winner ? "#2a2" : "#d62", i + 1,
                     xml(row.m.cand.quant + " kv=" + row.m.cand.kv_type + " t=" + std::to_string(row.m.cand.threads) +
                         (row.m.cand.spec == "off" ? "" : " " + row.m.cand.spec)));
  }
  s += "</svg>\n";
  return s;
}

Status write_report(const SearchOptions& o, const SearchResult& r, const std::string& md_path,
                    const std::string& svg_path) {
  const std::string svg_name = std::filesystem::path(svg_path).filename().string();
  for (const auto& [path, text] :
       {std::pair{md_path, report_markdown(o, r, svg_name)}, std::pair{svg_path, pareto_svg(o, r)}}) {
    std::ofstream out(path, std::ios::trunc);
    if (!out) return make_error("cannot write '{}'", path);
    out << text;
    if (!out.flush()) return make_error("cannot write '{}'", path);
  }
  return ok_status();
}

}  // namespace edgelm::tools::optimize
