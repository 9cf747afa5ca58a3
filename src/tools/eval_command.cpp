// `edgelm eval`: the quality a model loses against a reference model of the same vocabulary
// (engine/evaluator.h): PPL, KLD and top-1 agreement over a text, BLEU and ROUGE-L of greedy
// continuations of prompts. `--quant f16,q8_0,...` quantizes the reference in memory to each
// preset and prints one row per preset, so a quantization's cost is one command away.
//
// Without --text / --prompts a built-in short story and four story openings are used
// (eval_inputs.h).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/timer.h"
#include "engine/evaluator.h"
#include "tools/command.h"
#include "tools/eval_inputs.h"

namespace edgelm::tools {
namespace {

struct EvalCmdOptions {
  std::string model_path;
  std::string ref_path;
  std::string tokenizer_path;
  std::string model_tokenizer_path;  // empty: tokenizer_path
  std::string text_path;
  std::string prompts_path;
  std::string quant;  // comma-separated presets
  int n_predict = 512;
  int n_ctx = 0;
  int max_tokens = 0;
  int threads = 0;
  std::string cpu_affinity;
  std::string output = "md";
};

struct Row {
  std::string label;
  engine::EvalResult result;
};

Result<std::vector<model::QuantPreset>> parse_presets(const std::string& list) {
  std::vector<model::QuantPreset> presets;
  std::istringstream items(list);
  for (std::string item; std::getline(items, item, ',');) {
    if (item.empty()) continue;
    EDGELM_TRY(model::QuantPreset p, model::quant_preset_from_name(item));
    presets.push_back(p);
  }
  if (presets.empty()) return make_error("--quant lists no quantization type");
  return presets;
}

void print_progress(std::string_view label, std::string_view stage, size_t done, size_t total) {
  std::fprintf(stderr, "\r%-8.*s %-8.*s %zu/%zu   ", static_cast<int>(label.size()), label.data(),
               static_cast<int>(stage.size()), stage.data(), done, total);
  std::fflush(stderr);
}

void print_markdown(const EvalCmdOptions& o, const engine::Evaluator& ev, const std::vector<Row>& rows, int threads) {
  std::printf(
      "reference: %s | text: %d tokens (%d scored) in %d window(s) of %d | %zu prompts, greedy, up to %d "
      "tokens | reference PPL %.4f | %d threads\n\n",
      o.ref_path.c_str(), ev.n_text_tokens(), ev.n_text_tokens() - 1, ev.n_windows(), ev.n_ctx(), ev.prompts().size(),
      ev.n_long(), ev.reference_perplexity(), threads);
  const bool two_cuts = ev.n_long() > ev.n_short();
  std::printf("| precision | size (MiB) | prefill tok/s | decode tok/s | PPL | KLD | top-1 | BLEU@%d | ROUGE-L@%d |",
              ev.n_short(), ev.n_short());
  if (two_cuts) std::printf(" BLEU@%d | ROUGE-L@%d |", o.n_predict, o.n_predict);
  std::printf("\n|---|---|---|---|---|---|---|---|---|%s\n", two_cuts ? "---|---|" : "");
  for (const auto& [label, r] : rows) {
    std::printf("| %s | %.3f | %.1f | %.1f | %.4f | %.6f | %.4f | %.4f | %.4f |", label.c_str(),
                static_cast<double>(r.weight_bytes) / (1 << 20), r.prefill_tok_s, r.decode_tok_s, r.perplexity,
                r.kld_mean, r.top1, r.first_n.bleu, r.first_n.rouge_l);
    if (two_cuts) std::printf(" %.4f | %.4f |", r.all.bleu, r.all.rouge_l);
    std::printf("\n");
  }
}

void print_json(const EvalCmdOptions& o, const engine::Evaluator& ev, const std::vector<Row>& rows, int threads) {
  nlohmann::ordered_json out;
  out["reference"] = o.ref_path;
  out["threads"] = threads;
  out["text_tokens"] = ev.n_text_tokens();
  out["scored_positions"] = ev.n_text_tokens() - 1;
  out["window"] = ev.n_ctx();
  out["prompts"] = ev.prompts();
  out["n_short"] = ev.n_short();
  out["n_long"] = ev.n_long();
  out["reference_perplexity"] = ev.reference_perplexity();
  out["results"] = nlohmann::ordered_json::array();
  for (const auto& [label, r] : rows) {
    out["results"].push_back({{"precision", label},
                              {"weight_bytes", r.weight_bytes},
                              {"size_mib", static_cast<double>(r.weight_bytes) / (1 << 20)},
                              {"prefill_tok_s", r.prefill_tok_s},
                              {"decode_tok_s", r.decode_tok_s},
                              {"perplexity", r.perplexity},
                              {"kld_mean", r.kld_mean},
                              {"kld_max", r.kld_max},
                              {"top1", r.top1},
                              {"bleu_short", r.first_n.bleu},
                              {"rouge_l_short", r.first_n.rouge_l},
                              {"bleu_long", r.all.bleu},
                              {"rouge_l_long", r.all.rouge_l}});
  }
  std::printf("%s\n", out.dump(2).c_str());
}

int run(const EvalCmdOptions& o) {
  std::vector<model::QuantPreset> presets;
  if (!o.quant.empty()) {
    auto p = parse_presets(o.quant);
    if (!p.ok()) return report_error(p.error());
    presets = std::move(p).value();
  }
  if (presets.empty() && o.model_path.empty()) return report_error(make_error("give -m MODEL or --quant TYPES"));

  std::string text = eval_default_text();
  if (!o.text_path.empty()) {
    auto t = read_text_file(o.text_path);
    if (!t.ok()) return report_error(t.error());
    text = std::move(t).value();
  }
  std::vector<std::string> prompts = eval_default_prompts();
  if (!o.prompts_path.empty()) {
    auto p = read_eval_prompts(o.prompts_path);
    if (!p.ok()) return report_error(p.error());
    prompts = std::move(p).value();
  }

  auto pool_or = make_thread_pool(o.threads, o.cpu_affinity);
  if (!pool_or.ok()) return report_error(pool_or.error());
  ThreadPool& pool = **pool_or;
  auto ref = engine::load_model(o.ref_path, o.tokenizer_path);
  if (!ref.ok()) return report_error(ref.error());
  engine::LoadedModel test_model;
  if (!o.model_path.empty()) {  // load and check it before spending time on the reference
    auto t =
        engine::load_model(o.model_path, o.model_tokenizer_path.empty() ? o.tokenizer_path : o.model_tokenizer_path);
    if (!t.ok()) return report_error(t.error());
    if (auto st = engine::check_same_vocab(*ref, *t); !st.ok()) return report_error(st.error());
    test_model = std::move(t).value();
  }

  engine::EvalOptions eo;
  eo.n_predict = o.n_predict;
  eo.n_ctx = o.n_ctx;
  eo.max_text_tokens = o.max_tokens;
  std::string label = "ref";
  const bool tty = ::isatty(STDERR_FILENO) != 0;  // a progress line only where someone watches it
  if (tty) {
    eo.on_progress = [&label](std::string_view stage, size_t done, size_t total) {
      print_progress(label, stage, done, total);
    };
  }
  Stopwatch watch;
  auto ev = engine::Evaluator::create(*ref, text, std::move(prompts), eo, pool);
  if (!ev.ok()) return report_error(ev.error());

  std::vector<Row> rows;
  auto evaluate = [&](const engine::LoadedModel& lm, std::string name) -> Status {
    label = name;
    EDGELM_TRY(engine::EvalResult r, ev->evaluate(lm, pool));
    rows.push_back({std::move(name), std::move(r)});
    return ok_status();
  };
  for (const model::QuantPreset preset : presets) {
    label = std::string(model::quant_preset_name(preset));
    if (tty) print_progress(label, "quantize", 0, 1);
    auto q = engine::quantize_loaded_model(*ref, preset, pool);
    if (!q.ok()) return report_error(q.error());
    if (auto st = evaluate(*q, label); !st.ok()) return report_error(st.error());
  }
  if (test_model.model) {
    if (auto st = evaluate(test_model, dominant_type(test_model)); !st.ok()) return report_error(st.error());
  }
  std::fprintf(stderr, "%sevaluated %zu model(s) in %.1f s\n", tty ? "\r\033[K" : "", rows.size(), watch.seconds());

  if (o.output == "json")
    print_json(o, *ev, rows, pool.n_threads());
  else
    print_markdown(o, *ev, rows, pool.n_threads());
  return 0;
}

}  // namespace

CommandRunner add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalCmdOptions>();
  CLI::App* cmd = app.add_subcommand("eval", "Measure the quality loss of a (quantized) model against a reference");
  cmd->add_option("-m,--model", o->model_path, "Model to evaluate (optional with --quant: then one more row)");
  cmd->add_option("--ref", o->ref_path, "Reference model (e.g. the F32 original)")->required();
  cmd->add_option("--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (for .bin checkpoints)");
  cmd->add_option("--model-tokenizer", o->model_tokenizer_path,
                  "tokenizer.bin of a .bin -m model (default: --tokenizer)");
  cmd->add_option("--text", o->text_path, "Text file for PPL/KLD/top-1 (default: a built-in short story)");
  cmd->add_option("--prompts", o->prompts_path, "Prompts file, one per line (default: four built-in story openings)");
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate per prompt (BLEU/ROUGE-L at 128 and at n)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-c,--ctx-size", o->n_ctx, "Window/context size (default: the reference's trained context)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-tokens", o->max_tokens, "Use at most this many tokens of the text (0: all)")
      ->check(CLI::NonNegativeNumber);
  add_thread_options(cmd, o->threads, o->cpu_affinity);
  cmd->add_option("--quant", o->quant, "Quantize the reference in memory to each of these (e.g. f16,q8_0,q4_k_m,q4_0)");
  cmd->add_option("-o,--output", o->output, "Output format")
      ->check(CLI::IsMember({"md", "json"}))
      ->capture_default_str();
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
