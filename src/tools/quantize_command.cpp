// `edgelm quantize IN.gguf OUT.gguf TYPE`: re-encode a model's weights by a per-tensor policy
// (model/quantize.h); --imatrix FILE quantizes with an importance matrix (GGUF or legacy .dat,
// model/imatrix.h). Prints a progress bar on a terminal, a per-type summary at the end.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <optional>
#include <vector>

#include "core/timer.h"
#include "format/gguf_writer.h"
#include "format/model_file.h"
#include "model/quantize.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

struct QuantizeOptions {
  std::string input;
  std::string output;
  std::string type;
  std::string tokenizer_path;
  std::vector<std::string> tensor_types;  // --tensor-type PATTERN=TYPE
  std::string imatrix_path;               // --imatrix FILE
  int threads = 0;
  std::string cpu_affinity;
};

void print_progress(const model::QuantizeProgress& p) {
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * p.index / p.total);
  std::fprintf(stderr, "\r[%.*s%*s] %zu/%zu %-32.32s %-6s%s", filled, "##############################", kWidth - filled,
               "", p.index, p.total, p.tensor->name.c_str(), std::string(dtype_name(p.type)).c_str(),
               p.weighted ? " (imatrix)" : "          ");
  if (p.index == p.total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

int run(const QuantizeOptions& o) {
  auto preset = model::quant_preset_from_name(o.type);
  if (!preset.ok()) return report_error(preset.error());
  if (o.input == o.output) return report_error(make_error("input and output are the same file '{}'", o.input));
  if (o.imatrix_path.empty() && model::quant_preset_needs_imatrix(*preset))  // before loading the model
    return report_error(make_error("{} needs an importance matrix: pass --imatrix FILE (`edgelm imatrix` writes one)",
                                   model::quant_preset_name(*preset)));
  std::vector<model::TensorTypeOverride> overrides;
  for (const std::string& spec : o.tensor_types) {
    auto ov = model::parse_tensor_type_override(spec);
    if (!ov.ok()) return report_error(ov.error());
    overrides.push_back(std::move(ov).value());
  }
  std::optional<model::ImportanceMatrix> imatrix;
  if (!o.imatrix_path.empty()) {
    auto m = model::read_imatrix(o.imatrix_path);
    if (!m.ok()) return report_error(m.error());
    imatrix = std::move(m).value();
  }
  auto in = format::open_model_file(o.input, o.tokenizer_path);
  if (!in.ok()) return report_error(in.error());
  auto pool_or = make_thread_pool(o.threads, o.cpu_affinity);
  if (!pool_or.ok()) return report_error(pool_or.error());
  ThreadPool& pool = **pool_or;
  Stopwatch watch;
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  int n_weighted = 0;
  auto progress = [tty, &n_weighted](const model::QuantizeProgress& p) {
    n_weighted += p.weighted ? 1 : 0;
    if (tty) print_progress(p);
  };
  auto out = model::quantize_model(*in, *preset, pool, progress,
                                   overrides, model::ImatrixSource{imatrix ? &*imatrix : nullptr, o.imatrix_path});
  if (!out.ok()) {
    if (tty) std::fputc('\n', stderr);
    return report_error(out.error());
  }
  if (auto st = format::write_gguf(o.output, *out); !st.ok()) return report_error(st.error());

  uint64_t in_bytes = 0, out_bytes = 0;
  std::map<std::string, int> per_type;
  for (const auto& t : in->tensors) in_bytes += t.n_bytes;
  for (const auto& t : out->tensors) {
    out_bytes += t.n_bytes;
    ++per_type[std::string(dtype_name(t.type))];
  }
  std::string types;
  for (const auto& [name, n] : per_type) types += fmt::format("{}{} x{}", types.empty() ? "" : ", ", name, n);
  std::fprintf(stderr, "wrote %s (%s): %.2f MiB -> %.2f MiB in %.1f s; tensors: %s\n", o.output.c_str(),
               std::string(model::quant_preset_name(*preset)).c_str(), static_cast<double>(in_bytes) / (1 << 20),
               static_cast<double>(out_bytes) / (1 << 20), watch.seconds(), types.c_str());
  if (imatrix)
    std::fprintf(stderr, "%d tensors quantized with importance weights (imatrix %s: %zu entries, %d chunks)\n",
                 n_weighted, o.imatrix_path.c_str(), imatrix->entries.size(), imatrix->chunk_count);
  return 0;
}

}  // namespace

CommandRunner add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand("quantize", "Re-encode a model's weights (f32, f16, q8_0, q4_0, q4_k_m, q3_k_m, iq4_xs, ...)");
  cmd->add_option("input", o->input, "Input model (GGUF, or llama2.c checkpoint with --tokenizer)")->required();
  cmd->add_option("output", o->output, "Output GGUF path")->required();
  cmd->add_option("type", o->type, "f32 (dequantize), f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k_m, q5_k_m, q6_k, q2_k, "
                "q3_k_s, q3_k_m (q3_k), q3_k_l, iq4_nl, iq4_xs, tq1_0, tq2_0, mxfp4, nvfp4, iq3_m, iq3_s, iq3_xs, iq3_xxs, "
                "iq2_m, iq2_s, iq2_xs, iq2_xxs, iq1_m, iq1_s (iq2_s and below need --imatrix)")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (for .bin checkpoints)");
  cmd->add_option("--tensor-type", o->tensor_types,
                  "PATTERN=TYPE: 2-D tensors whose name matches the regex PATTERN get TYPE (repeatable; the first "
                  "match wins), e.g. 'attn_v=q8_0' or 'blk\\.[0-3]\\.ffn_down=q6_k'");
  cmd->add_option("--imatrix", o->imatrix_path,
                  "Importance matrix (llama.cpp's GGUF or legacy .dat format, e.g. from `edgelm imatrix`): the tensors "
                  "it covers are quantized with importance weights (Q2_K..Q6_K, Q4_0..Q5_1, IQ4_NL, IQ4_XS, IQ3_S, IQ3_XXS, "
                  "IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M)");
  add_thread_options(cmd, o->threads, o->cpu_affinity);
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
