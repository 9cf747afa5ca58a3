// `edgelm embed -m MODEL "text" ...`: sentence embeddings from a BERT-family GGUF (model/bert.h).
// Prints, per text, the token count, the dimension and the first values of the L2-normalized
// embedding (--all: every value); with --repeat N, the median latency of N runs.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/timer.h"
#include "model/bert.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

struct EmbedOptions {
  std::string model_path;
  std::vector<std::string> texts;
  bool all = false;
  int repeat = 1;
  int threads = 0;
  std::string cpu_affinity;
};

int run(const EmbedOptions& o) {
  if (o.repeat < 1) return report_error(make_error("--repeat must be at least 1"));
  auto model_or = model::BertModel::load(o.model_path);
  if (!model_or.ok()) return report_error(model_or.error());
  const model::BertModel& m = **model_or;
  auto pool_or = make_thread_pool(o.threads, o.cpu_affinity);
  if (!pool_or.ok()) return report_error(pool_or.error());
  ThreadPool& pool = **pool_or;
  const model::BertConfig& c = m.config();
  std::fprintf(stderr, "model: %s, dim %d, %d layers, context %d, %s pooling, %d threads\n", o.model_path.c_str(),
               c.n_embd, c.n_layer, c.n_ctx, c.pooling == model::BertPooling::cls ? "cls" : "mean",
               pool.n_threads());
  for (const std::string& text : o.texts) {
    auto ids = m.tokenize(text);
    if (!ids.ok()) return report_error(ids.error());
    std::vector<double> ms;
    std::vector<float> e;
    for (int r = 0; r < o.repeat; ++r) {
      Stopwatch watch;
      auto out = m.embed_tokens(*ids, &pool);
      ms.push_back(watch.seconds() * 1000.0);
      if (!out.ok()) return report_error(out.error());
      e = std::move(out).value();
    }
    std::sort(ms.begin(), ms.end());
    std::printf("tokens %zu, dim %zu, median %.2f ms over %d run(s):", ids->size(), e.size(), ms[ms.size() / 2],
                o.repeat);
    const size_t shown = o.all ? e.size() : std::min<size_t>(8, e.size());
    for (size_t i = 0; i < shown; ++i) std::printf(" %.6f", e[i]);
    std::printf("%s\n", shown < e.size() ? " ..." : "");
  }
  return 0;
}

}  // namespace

CommandRunner add_embed_command(CLI::App& app) {
  auto o = std::make_shared<EmbedOptions>();
  CLI::App* cmd = app.add_subcommand("embed", "Sentence embeddings from a BERT-family GGUF (L2-normalized)");
  cmd->add_option("-m,--model", o->model_path, "Embedding model (GGUF, general.architecture = bert)")->required();
  cmd->add_option("text", o->texts, "Texts to embed")->required();
  cmd->add_flag("--all", o->all, "Print every value, not the first 8");
  cmd->add_option("--repeat", o->repeat, "Embed each text N times and report the median latency")
      ->capture_default_str();
  add_thread_options(cmd, o->threads, o->cpu_affinity);
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
