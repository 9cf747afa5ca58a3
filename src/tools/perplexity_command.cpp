// `edgelm perplexity -m MODEL -f TEXT [-c 512]`: perplexity over a text, scored as llama.cpp's
// llama-perplexity scores it (engine/perplexity.h), so that its figure and edgelm's on the same
// file and text compare directly. Prints the running PPL after each chunk ("[1]x,[2]y,...")
// and "Final estimate: PPL = X +/- E", or one JSON object with -o json.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "core/timer.h"
#include "engine/loaded_model.h"
#include "engine/perplexity.h"
#include "tools/command.h"
#include "tools/eval_inputs.h"

namespace edgelm::tools {
namespace {

struct PerplexityCmdOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string text_path;
  std::string kv_type = "f16";
  int n_ctx = 512;
  int n_batch = 512;
  int chunks = 0;
  int threads = 0;
  std::string cpu_affinity;
  std::string output = "text";
};

int run(const PerplexityCmdOptions& o) {
  auto kv_type = kv::kv_type_from_name(o.kv_type);
  if (!kv_type.ok()) return report_error(kv_type.error());
  auto text = read_text_file(o.text_path);
  if (!text.ok()) return report_error(text.error());
  auto pool = make_thread_pool(o.threads, o.cpu_affinity);
  if (!pool.ok()) return report_error(pool.error());
  auto lm = engine::load_model(o.model_path, o.tokenizer_path);
  if (!lm.ok()) return report_error(lm.error());
  const tokenizer::Vocab& vocab = lm->tokenizer->vocab();
  const std::vector<int32_t> tokens = lm->tokenizer->encode(*text, /*add_special=*/true, /*parse_special=*/false);

  engine::PerplexityOptions po;
  po.n_ctx = o.n_ctx;
  po.n_batch = o.n_batch;
  po.max_chunks = o.chunks;
  po.kv_type = *kv_type;
  po.bos = vocab.add_bos() ? vocab.bos() : -1;
  const bool text_out = o.output == "text";
  if (text_out) {
    po.on_chunk = [](int32_t i, int32_t, double ppl) {
      std::printf("[%d]%.4f,", i, ppl);
      std::fflush(stdout);
    };
  }
  std::fprintf(stderr, "perplexity: %zu tokens, chunks of %d (-c), %d threads\n", tokens.size(), o.n_ctx,
               (*pool)->n_threads());
  Stopwatch watch;
  auto r = engine::perplexity(*lm->model, tokens, po, **pool);
  if (!r.ok()) {
    if (text_out) std::printf("\n");
    return report_error(r.error());
  }
  const double seconds = watch.seconds();
  if (text_out) {
    std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", r->ppl, r->ppl_error);
    std::fflush(stdout);
    std::fprintf(stderr, "%d chunks, %lld positions scored, %.1f s (%.1f tokens/s)\n", r->n_chunks,
                 static_cast<long long>(r->n_scored), seconds,
                 static_cast<double>(r->n_chunks) * o.n_ctx / std::max(seconds, 1e-9));
  } else {
    nlohmann::json j{{"model", o.model_path},     {"text_tokens", tokens.size()}, {"n_ctx", o.n_ctx},
                     {"chunks", r->n_chunks},     {"scored", r->n_scored},        {"ppl", r->ppl},
                     {"ppl_error", r->ppl_error}, {"running_ppl", r->running_ppl}, {"seconds", seconds},
                     {"kv_type", o.kv_type}};
    std::printf("%s\n", j.dump(2).c_str());
  }
  return 0;
}

}  // namespace

CommandRunner add_perplexity_command(CLI::App& app) {
  auto o = std::make_shared<PerplexityCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "perplexity", "Perplexity over a text, scored as llama-perplexity does (second half of each chunk)");
  cmd->add_option("-m,--model", o->model_path, "Model (GGUF, or a llama2.c checkpoint with --tokenizer)")->required();
  cmd->add_option("--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (for .bin checkpoints)");
  cmd->add_option("-f,--file", o->text_path, "Text file")->required();
  cmd->add_option("-c,--ctx-size", o->n_ctx, "Chunk size in tokens; the second half of each chunk is scored")
      ->capture_default_str()
      ->check(CLI::Range(4, 1 << 20));
  cmd->add_option("-b,--batch-size", o->n_batch, "Tokens per forward step in each chunk's unscored half")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--chunks", o->chunks, "Score at most this many chunks (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--kv-type", o->kv_type, "KV cache type: f32, f16 or q8_0")->capture_default_str();
  add_thread_options(cmd, o->threads, o->cpu_affinity);
  cmd->add_option("-o,--output", o->output, "Output format")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
