// `edgelm imatrix -m MODEL -f TEXT [-o FILE]`: an importance matrix from a calibration text, as
// llama.cpp's llama-imatrix computes it, for `edgelm quantize --imatrix`.
//
// The text runs through the model in chunks of -c tokens exactly as `edgelm perplexity` runs it
// (engine/perplexity.h: each chunk from an empty cache, its first token BOS when the vocabulary
// adds one); meanwhile a LinearObserver (model/ops.h) collects, for every blk.* weight, the sum
// of x^2 per input column and the number of rows (model/imatrix.h ImatrixCollector). Prints the
// running perplexity like llama-imatrix. Writes GGUF (upstream's current format) or the legacy
// .dat (--format, default by the extension: .dat -> dat, else gguf).
#include <cstdio>

#include "core/timer.h"
#include "engine/loaded_model.h"
#include "engine/perplexity.h"
#include "model/imatrix.h"
#include "tools/command.h"
#include "tools/eval_inputs.h"

namespace edgelm::tools {
namespace {

struct ImatrixOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string text_path;
  std::string output = "imatrix.gguf";
  std::string format;  // gguf | dat; empty: by the output's extension
  int n_ctx = 512;
  int n_batch = 512;
  int chunks = 0;      // --chunks: at most this many (0: all)
  int skip_chunks = 0; // --chunk: start at this chunk
  int threads = 0;
  std::string cpu_affinity;
};

// Installs an observer for the lifetime of the guard.
class ObserverGuard {
 public:
  explicit ObserverGuard(model::LinearObserver* o) : previous_(model::set_linear_observer(o)) {}
  ~ObserverGuard() { model::set_linear_observer(previous_); }
  ObserverGuard(const ObserverGuard&) = delete;
  ObserverGuard& operator=(const ObserverGuard&) = delete;

 private:
  model::LinearObserver* previous_;
};

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int run(const ImatrixOptions& o) {
  const std::string format_name = !o.format.empty() ? o.format : ends_with(o.output, ".dat") ? "dat" : "gguf";
  const model::ImatrixFormat format = format_name == "dat" ? model::ImatrixFormat::dat : model::ImatrixFormat::gguf;
  auto text = read_text_file(o.text_path);
  if (!text.ok()) return report_error(text.error());
  auto pool = make_thread_pool(o.threads, o.cpu_affinity);
  if (!pool.ok()) return report_error(pool.error());
  auto lm = engine::load_model(o.model_path, o.tokenizer_path);
  if (!lm.ok()) return report_error(lm.error());
  const tokenizer::Vocab& vocab = lm->tokenizer->vocab();
  std::vector<int32_t> tokens = lm->tokenizer->encode(*text, /*add_special=*/true, /*parse_special=*/false);
  const auto skip = static_cast<size_t>(o.skip_chunks) * static_cast<size_t>(o.n_ctx);
  if (skip >= tokens.size())
    return report_error(make_error("imatrix: --chunk {} skips {} tokens, but the text has only {}", o.skip_chunks,
                                   skip, tokens.size()));
  tokens.erase(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(skip));
  if (tokens.size() < static_cast<size_t>(o.n_ctx))
    return report_error(make_error("imatrix: the text has {} tokens{}, fewer than one chunk of {} (-c); give a longer "
                                   "text or a smaller -c",
                                   tokens.size(), skip > 0 ? " after --chunk" : "", o.n_ctx));

  engine::PerplexityOptions po;
  po.n_ctx = o.n_ctx;
  po.n_batch = o.n_batch;
  po.max_chunks = o.chunks;
  po.bos = vocab.add_bos() ? vocab.bos() : -1;
  bool printed = false;
  po.on_chunk = [&printed](int32_t i, int32_t, double ppl) {
    printed = true;
    std::printf("[%d]%.4f,", i, ppl);
    std::fflush(stdout);
  };
  std::fprintf(stderr, "imatrix: %zu tokens, chunks of %d (-c), %d threads\n", tokens.size(), o.n_ctx,
               (*pool)->n_threads());
  model::ImatrixCollector collector(lm->model->file());
  Stopwatch watch;
  Result<engine::PerplexityResult> r = [&] {
    ObserverGuard guard(&collector);
    return engine::perplexity(*lm->model, tokens, po, **pool);
  }();
  if (printed) std::printf("\n");
  if (!r.ok()) return report_error(r.error());
  model::ImportanceMatrix& m = collector.matrix();
  if (m.entries.empty())
    return report_error(make_error("imatrix: no blk.* weight of '{}' was seen in a product (weights converted at load?)",
                                   o.model_path));
  m.chunk_count = r->n_chunks;
  m.chunk_size = o.n_ctx;
  m.datasets = {o.text_path};
  if (auto st = model::write_imatrix(o.output, m, format); !st.ok()) return report_error(st.error());
  std::printf("Final estimate: PPL = %.4f +/- %.5f\n", r->ppl, r->ppl_error);
  std::fprintf(stderr, "wrote %s (%s): %zu entries from %d chunks of %d tokens in %.1f s\n", o.output.c_str(),
               format_name.c_str(), m.entries.size(), r->n_chunks, o.n_ctx, watch.seconds());
  return 0;
}

}  // namespace

CommandRunner add_imatrix_command(CLI::App& app) {
  auto o = std::make_shared<ImatrixOptions>();
  CLI::App* cmd = app.add_subcommand(
      "imatrix", "Importance matrix from a calibration text (llama-imatrix), for quantize --imatrix");
  cmd->add_option("-m,--model", o->model_path, "Model (GGUF, or a llama2.c checkpoint with --tokenizer)")->required();
  cmd->add_option("--tokenizer", o->tokenizer_path, "llama2.c tokenizer.bin (for .bin checkpoints)");
  cmd->add_option("-f,--file", o->text_path, "Calibration text file")->required();
  cmd->add_option("-o,--output", o->output, "Output file")->capture_default_str();
  cmd->add_option("--format", o->format, "gguf or dat (llama.cpp's legacy format); default: dat for a .dat output, "
                                         "else gguf")
      ->check(CLI::IsMember({"gguf", "dat"}));
  cmd->add_option("-c,--ctx-size", o->n_ctx, "Chunk size in tokens (each chunk starts from an empty cache)")
      ->capture_default_str()
      ->check(CLI::Range(4, 1 << 20));
  cmd->add_option("-b,--batch-size", o->n_batch, "Tokens per forward step")->capture_default_str()->check(
      CLI::PositiveNumber);
  cmd->add_option("--chunks", o->chunks, "Use at most this many chunks (0: all)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--chunk", o->skip_chunks, "Start at this chunk (skip the text's first N chunks)")
      ->check(CLI::NonNegativeNumber);
  add_thread_options(cmd, o->threads, o->cpu_affinity);
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
