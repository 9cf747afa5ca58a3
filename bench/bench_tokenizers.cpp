// Tokenizer throughput on 1 MiB of text: the reference test strings of shared/vocab repeated
// (English prose, code, numbers, CJK, emoji, whitespace runs). Reports tokens/s and bytes/s per
// tokenizer type (ugm_xlmr: the unigram tokenizer on the synthetic XLM-R vocabulary).
// Run: build/release/bench/bench_tokenizers [--benchmark_repetitions=3]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "format/gguf_reader.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/xlmr_vocab.h"

namespace {

std::string shared_dir() {
  const char* env = std::getenv("EDGELM_TEST_DATA");
  return env != nullptr ? env : EDGELM_SHARED_DIR_DEFAULT;
}

// 1 MiB of the vocabulary's own test strings.
std::string corpus(const std::string& vocab_path) {
  std::ifstream in(vocab_path + ".inp", std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str(), out;
  if (text.empty()) return out;
  while (out.size() < (1u << 20)) out += text;
  out.resize(1u << 20);
  return out;
}

void run(benchmark::State& state, const edgelm::tokenizer::Tokenizer& tok, const std::string& text) {
  size_t n_tokens = 0;
  for (auto _ : state) {
    const auto ids = tok.encode(text, false, false);
    n_tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n_tokens), benchmark::Counter::kIsIterationInvariantRate);
}

void tokenize(benchmark::State& state, const std::string& vocab) {
  const std::string path = shared_dir() + "/vocab/ggml-vocab-" + vocab + ".gguf";
  auto file = edgelm::format::read_gguf(path);
  if (!file.ok()) {
    state.SkipWithError(file.error().message.c_str());
    return;
  }
  auto tok = edgelm::tokenizer::load_tokenizer(file->metadata);
  if (!tok.ok()) {
    state.SkipWithError(tok.error().message.c_str());
    return;
  }
  run(state, **tok, corpus(path));
}

// The unigram ("t5") tokenizer on the synthetic XLM-RoBERTa vocabulary (250002 tokens, made
// in-process), over the llama-spm test strings.
void tokenize_xlmr(benchmark::State& state) {
  edgelm::format::GgufMetadata md;
  if (auto st = edgelm::tokenizer::write_xlmr_vocab(md); !st.ok()) {
    state.SkipWithError(st.error().message.c_str());
    return;
  }
  auto tok = edgelm::tokenizer::load_tokenizer(md);
  if (!tok.ok()) {
    state.SkipWithError(tok.error().message.c_str());
    return;
  }
  run(state, **tok, corpus(shared_dir() + "/vocab/ggml-vocab-llama-spm.gguf"));
}

}  // namespace

BENCHMARK_CAPTURE(tokenize, spm_llama, std::string("llama-spm"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(tokenize, bpe_gpt2, std::string("gpt-2"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(tokenize, bpe_deepseek_llm, std::string("deepseek-llm"))->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(tokenize, wordpiece_bert, std::string("bert-bge"))->Unit(benchmark::kMillisecond);
BENCHMARK(tokenize_xlmr)->Name("tokenize/ugm_xlmr")->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
