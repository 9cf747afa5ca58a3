// `edgelm embed -m MODEL "text" ...`: embeddings (or rerank scores) from any embedding/reranker
// GGUF that embed::open_text_encoder() takes (bert, nomic-bert, jina-bert-v2, XLM-R, and the
// decoder embedders). Texts come from the arguments and/or --file (one per line); they are encoded
// --batch at a time, each batch in one TextEncoder::encode() call (one batched pass). Prints per
// text the token count, the dimension and the first values (--all: every value), L2-normalized
// unless --raw; with --rerank QUERY, each text is a document scored against QUERY (rank pooling).
// --repeat N encodes everything N times and reports the median time and texts per second.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>

#include "core/timer.h"
#include "embed/text_encoder.h"
#include "tools/command.h"

namespace edgelm::tools {
namespace {

struct EmbedOptions {
  std::string model_path;
  std::vector<std::string> texts;
  std::string file;
  std::string pooling;  // "": the file's
  std::string rerank_query;
  int batch = 32;
  bool all = false;
  bool raw = false;
  int repeat = 1;
  int threads = 0;
  std::string cpu_affinity;
};

Status read_lines(const std::string& path, std::vector<std::string>& out) {
  std::ifstream in(path);
  if (!in) return make_error("--file {}: cannot open it", path);
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(line);
  return ok_status();
}

int run(EmbedOptions o) {
  if (o.repeat < 1) return report_error(make_error("--repeat must be at least 1"));
  if (o.batch < 1) return report_error(make_error("--batch must be at least 1"));
  if (!o.file.empty())
    if (auto st = read_lines(o.file, o.texts); !st.ok()) return report_error(st.error());
  if (o.texts.empty()) return report_error(make_error("no texts: give them as arguments or with --file"));
  auto enc_or = embed::open_text_encoder(o.model_path);
  if (!enc_or.ok()) return report_error(enc_or.error());
  const embed::TextEncoder& enc = **enc_or;
  const embed::EncoderInfo& info = enc.info();
  embed::Pooling pooling = info.pooling;
  if (!o.pooling.empty()) {
    auto p = embed::parse_pooling(o.pooling);
    if (!p.ok()) return report_error(make_error("--pooling: {}", p.error().message));
    pooling = *p;
  }
  const bool rerank = !o.rerank_query.empty();
  if (rerank) pooling = embed::Pooling::rank;
  if (pooling == embed::Pooling::rank && !rerank)
    return report_error(
        make_error("rank pooling scores (query, document) pairs: give --rerank QUERY (or --pooling "
                   "mean|cls|last for vectors)"));
  auto pool_or = make_thread_pool(o.threads, o.cpu_affinity);
  if (!pool_or.ok()) return report_error(pool_or.error());
  ThreadPool& pool = **pool_or;
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& text : o.texts) {
    auto t = rerank ? enc.tokenize_pair(o.rerank_query, text) : enc.tokenize(text);
    if (!t.ok()) return report_error(t.error());
    ids.push_back(std::move(t).value());
  }
  std::vector<std::vector<float>> out;
  std::vector<double> secs;
  for (int r = 0; r < o.repeat; ++r) {
    out.clear();
    Stopwatch watch;
    for (size_t b = 0; b < ids.size(); b += static_cast<size_t>(o.batch)) {
      const size_t n = std::min(ids.size() - b, static_cast<size_t>(o.batch));
      auto v = enc.encode(std::span(ids).subspan(b, n), pooling, pool);
      if (!v.ok()) return report_error(v.error());
      for (auto& e : *v) out.push_back(std::move(e));
    }
    secs.push_back(watch.seconds());
  }
  for (size_t t = 0; t < out.size(); ++t) {
    std::vector<float>& e = out[t];
    if (rerank) {
      std::printf("tokens %zu, score %.6f\n", ids[t].size(), e[0]);
      continue;
    }
    if (!o.raw) {
      double n2 = 0.0;
      for (const float x : e) n2 += static_cast<double>(x) * x;
      const double inv = n2 > 0.0 ? 1.0 / std::sqrt(n2) : 0.0;
      for (float& x : e) x = static_cast<float>(x * inv);
    }
    std::printf("tokens %zu, dim %zu:", ids[t].size(), e.size());
    const size_t shown = o.all ? e.size() : std::min<size_t>(8, e.size());
    for (size_t i = 0; i < shown; ++i) std::printf(" %.6f", e[i]);
    std::printf("%s\n", shown < e.size() ? " ..." : "");
  }
  std::fprintf(stderr, "model: %s (%s), dim %d, context %d, %s pooling, batch %d, %d threads\n", o.model_path.c_str(),
               info.arch.c_str(), info.n_embd, info.n_ctx, std::string(embed::pooling_name(pooling)).c_str(), o.batch,
               pool.n_threads());
  std::sort(secs.begin(), secs.end());
  const double med = secs[secs.size() / 2];
  std::fprintf(stderr, "%zu texts, median %.2f ms over %d run(s), %.1f texts/s\n", ids.size(), med * 1000.0, o.repeat,
               med > 0.0 ? static_cast<double>(ids.size()) / med : 0.0);
  return 0;
}

}  // namespace

CommandRunner add_embed_command(CLI::App& app) {
  auto o = std::make_shared<EmbedOptions>();
  CLI::App* cmd = app.add_subcommand(
      "embed", "Embeddings or rerank scores from an embedding/reranker GGUF (bert, nomic-bert, jina-bert-v2, ...)");
  cmd->add_option("-m,--model", o->model_path, "Embedding or reranker model (GGUF)")->required();
  cmd->add_option("text", o->texts, "Texts to embed (or documents to rerank)");
  cmd->add_option("--file", o->file, "Read texts from this file, one per line (after the arguments)");
  cmd->add_option("--pooling", o->pooling, "mean, cls, last or rank (default: the file's pooling_type)");
  cmd->add_option("--rerank", o->rerank_query, "Score every text as a document against this query (rank pooling)");
  cmd->add_option("--batch", o->batch, "Texts per batched encoder pass")->capture_default_str();
  cmd->add_flag("--all", o->all, "Print every value, not the first 8");
  cmd->add_flag("--raw", o->raw, "Print the pooled vectors as they are (default: L2-normalized)");
  cmd->add_option("--repeat", o->repeat, "Encode all texts N times and report the median time")->capture_default_str();
  add_thread_options(cmd, o->threads, o->cpu_affinity);
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
