// Embeddings and rerank scores of a TextEncoder (embed/text_encoder.h) from the command line, and
// its speed: texts per second of one batched encode() call. For comparing with another engine on
// the same file and the same token ids.
//
//   bench_text_encode -m F.gguf --text "a" --text "b" [--pooling mean|cls|last|rank]
//       prints each text's token ids and its raw pooled vector (or rank score) in full
//   bench_text_encode -m F.gguf --ids ids.txt        (one text per line: space-separated token ids)
//   bench_text_encode -m F.gguf --pair "query" "document"   (a reranker's prompt and P(yes))
//   bench_text_encode -m F.gguf --batch 32 --len 64 --reps 5 --threads 2
//       speed: 32 texts of 64 random tokens per encode() call, median of 5 calls
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "embed/text_encoder.h"
#include "tokenizer/tokenizer.h"

using namespace edgelm;

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "bench_text_encode: %s\n", message.c_str());
  return 1;
}

void print_row(const std::vector<int32_t>& ids, const std::vector<float>& v) {
  std::printf("ids:");
  for (const int32_t id : ids) std::printf(" %d", id);
  std::printf("\nvec %zu:", v.size());
  for (const float x : v) std::printf(" %.9g", x);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, ids_path, pooling_name;
  std::vector<std::string> texts;
  std::vector<std::pair<std::string, std::string>> pairs;
  int threads = 2, batch = 0, len = 64, reps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "-m")
      model_path = next();
    else if (a == "--text")
      texts.push_back(next());
    else if (a == "--ids")
      ids_path = next();
    else if (a == "--pair") {
      std::string q = next();
      pairs.emplace_back(q, next());
    } else if (a == "--pooling")
      pooling_name = next();
    else if (a == "--threads")
      threads = std::stoi(next());
    else if (a == "--batch")
      batch = std::stoi(next());
    else if (a == "--len")
      len = std::stoi(next());
    else if (a == "--reps")
      reps = std::stoi(next());
    else
      return fail("unknown argument " + a);
  }
  if (model_path.empty()) return fail("-m MODEL is required");
  auto enc_or = embed::open_text_encoder(model_path);
  if (!enc_or.ok()) return fail(enc_or.error().message);
  const embed::TextEncoder& enc = **enc_or;
  embed::Pooling pooling = enc.info().pooling;
  if (!pooling_name.empty()) {
    auto p = embed::parse_pooling(pooling_name);
    if (!p.ok()) return fail(p.error().message);
    pooling = *p;
  }
  if (!pairs.empty()) pooling = embed::Pooling::rank;
  ThreadPool pool(threads);
  std::fprintf(stderr, "%s: arch %s, dim %d, ctx %d, pooling %s, can_rank %d, %d threads\n", model_path.c_str(),
               enc.info().arch.c_str(), enc.info().n_embd, enc.info().n_ctx,
               std::string(embed::pooling_name(pooling)).c_str(), enc.info().can_rank ? 1 : 0, threads);

  std::vector<std::vector<int32_t>> inputs;
  for (const std::string& t : texts) {
    auto ids = enc.tokenize(t);
    if (!ids.ok()) return fail(ids.error().message);
    inputs.push_back(*ids);
  }
  for (const auto& [q, d] : pairs) {
    auto ids = enc.tokenize_pair(q, d);
    if (!ids.ok()) return fail(ids.error().message);
    inputs.push_back(*ids);
  }
  if (!ids_path.empty()) {
    std::ifstream in(ids_path);
    if (!in) return fail("cannot read " + ids_path);
    for (std::string line; std::getline(in, line);) {
      std::istringstream ls(line);
      std::vector<int32_t> ids;
      for (int32_t x; ls >> x;) ids.push_back(x);
      if (!ids.empty()) inputs.push_back(std::move(ids));
    }
  }
  if (batch > 0) {  // speed: random ids away from the first (special) tokens
    const int32_t n_vocab = static_cast<int32_t>(enc.tokenizer().vocab().n_tokens());
    std::mt19937 rng(42);
    std::uniform_int_distribution<int32_t> dist(std::min(1000, n_vocab / 2), n_vocab - 1);
    std::vector<std::vector<int32_t>> b(static_cast<size_t>(batch));
    for (auto& t : b)
      for (int j = 0; j < len; ++j) t.push_back(dist(rng));
    std::vector<double> secs;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      auto out = enc.encode(b, pooling, pool);
      secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      if (!out.ok()) return fail(out.error().message);
    }
    std::sort(secs.begin(), secs.end());
    std::printf("batch %d x %d tokens: median %.3f s (min %.3f) over %d calls, %.2f texts/s\n", batch, len,
                secs[secs.size() / 2], secs.front(), reps, batch / secs[secs.size() / 2]);
  }
  if (!inputs.empty()) {
    auto out = enc.encode(inputs, pooling, pool);
    if (!out.ok()) return fail(out.error().message);
    for (size_t i = 0; i < inputs.size(); ++i) print_row(inputs[i], (*out)[i]);
  }
  return 0;
}
