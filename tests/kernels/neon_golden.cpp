// One golden run through the NEON kernels, as a standalone program for qemu-user
// (scripts/test-aarch64.sh): loads the llama2.c checkpoint stories260K.bin with tok512.bin,
// greedy-decodes every case of golden/greedy.json with the reference forward (Model::forward,
// f32 KV) and compares the text byte for byte. No GoogleTest and no engine: it links the core,
// format, kernels, model and SentencePiece tokenizer sources only (the host's -dev packages are
// x86-64 only; fmt and nlohmann/json are used header-only).
//
// The matrices go through kernels::matmul with the active ISA, which on AArch64 is neon (the
// program checks that, and which GEMM level it got). Model::load packs every matrix the active
// level has a packed form for (model/weights.cpp pack_matrices, gemm_neon_packed.h; F32 has one),
// so the prompt (n_tok >= 2) and every decode step run the packed kernels; the program checks
// that the matrices were packed. With EDGELM_PACK=0 in the environment nothing is packed and the
// prompt takes the per-call GEMM, every decode step the NEON vec_dot.
//
// Usage: neon_golden DATA_DIR (the shared test data: models/, golden/). Exits 1 on a mismatch.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "format/llama2c.h"
#include "kernels/isa.h"
#include "kernels/kernels_neon.h"
#include "model/model.h"
#include "tokenizer/spm.h"
#include "tokenizer/vocab.h"

namespace {

using edgelm::model::TokenId;

struct Case {
  std::string prompt;
  int n_predict;
  std::string text;
};

// Greedy continuation of `prompt` (BOS + dummy prefix, as the goldens): the pieces of the
// generated tokens (none follows BOS, so no leading space is stripped), up to EOS.
std::string greedy(const edgelm::model::Model& m, const edgelm::tokenizer::SpmTokenizer& tok, const Case& c,
                   edgelm::ThreadPool& pool, bool* ok) {
  const auto& cfg = m.config();
  std::vector<TokenId> ids = tok.encode(c.prompt, /*add_special=*/true, /*parse_special=*/false);
  edgelm::model::KvCache cache(cfg, static_cast<int32_t>(ids.size()) + c.n_predict + 1);
  std::vector<float> logits(static_cast<size_t>(cfg.n_vocab));
  std::string text;
  std::vector<TokenId> step = ids;  // the whole prompt first: the multi-token path
  for (int i = 0; i < c.n_predict; ++i) {
    const auto st = m.forward(step, cache, logits, pool);
    if (!st.ok()) {
      std::printf("FAIL: forward: %s\n", st.error().message.c_str());
      *ok = false;
      return text;
    }
    TokenId best = 0;
    for (TokenId v = 1; v < cfg.n_vocab; ++v)
      if (logits[static_cast<size_t>(v)] > logits[static_cast<size_t>(best)]) best = v;
    if (best == tok.vocab().eos()) break;
    text += tok.token_to_piece(best);
    step.assign(1, best);
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();  // the goldens trim trailing newlines
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace edgelm;
  if (argc < 2) {
    std::fprintf(stderr, "usage: neon_golden DATA_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  int failed = 0;
  const kernels::IsaKernels* k = kernels::isa_kernels(kernels::active_isa());
  if (kernels::active_isa() != kernels::Isa::neon || k == nullptr) {
    std::printf("FAIL: the active ISA is %s, not neon\n", std::string(kernels::isa_name(kernels::active_isa())).c_str());
    return 1;
  }
  const char* level = k == kernels::neon::neon_kernels(kernels::neon::NeonLevel::i8mm)      ? "i8mm"
                      : k == kernels::neon::neon_kernels(kernels::neon::NeonLevel::dotprod) ? "dotprod"
                                                                                            : "base";
  std::printf("[ info ] active ISA neon, GEMM level %s\n", level);
  if (k->gemm(DType::f32) == nullptr) {  // the checkpoint is F32: its prompts must take the NEON GEMM
    std::printf("FAIL: the neon table has no F32 GEMM\n");
    return 1;
  }

  auto file = format::read_llama2c(dir + "/models/stories260K.bin", dir + "/models/tok512.bin");
  if (!file.ok()) {
    std::printf("FAIL: %s\n", file.error().message.c_str());
    return 1;
  }
  auto vocab = tokenizer::Vocab::from_metadata(file->metadata);
  if (!vocab.ok()) {
    std::printf("FAIL: %s\n", vocab.error().message.c_str());
    return 1;
  }
  const tokenizer::SpmTokenizer tok(std::move(*vocab));
  auto model = model::Model::load(std::move(*file));
  if (!model.ok()) {
    std::printf("FAIL: %s\n", model.error().message.c_str());
    return 1;
  }

  {  // packed at load unless EDGELM_PACK=0 (then the per-call GEMM and the vec_dot rows run)
    const char* env = std::getenv("EDGELM_PACK");
    const bool want_packed = env == nullptr || std::string(env) != "0";
    const kernels::WeightMatrix& wq = (*model)->weights().layers.at(0).wq;
    const bool packed = wq.packed != nullptr && wq.packed_kernel == k->gemm(wq.type);
    std::printf("[ info ] matrices packed at load: %s\n", packed ? "yes" : "no");
    if (packed != want_packed) {
      std::printf("FAIL: the layer 0 query matrix is %spacked (EDGELM_PACK %s)\n", packed ? "" : "not ",
                  env == nullptr ? "unset" : env);
      return 1;
    }
  }
  std::ifstream in(dir + "/golden/greedy.json");
  const auto j = nlohmann::json::parse(in);
  std::vector<Case> cases;
  for (const auto& c : j.at("cases")) cases.push_back({c.at("prompt"), c.at("n_predict"), c.at("text")});
  if (cases.size() < 2) {
    std::printf("FAIL: %zu golden cases\n", cases.size());
    return 1;
  }
  ThreadPool pool(2);
  for (const Case& c : cases) {
    bool ok = true;
    const std::string got = greedy(**model, tok, c, pool, &ok);
    size_t same = 0;
    while (same < got.size() && same < c.text.size() && got[same] == c.text[same]) ++same;
    if (!ok || got != c.text) {
      ++failed;
      std::printf("FAIL: \"%s\": first %zu of %zu bytes equal; got \"%s\"\n", c.prompt.c_str(), same, c.text.size(),
                  got.c_str());
    } else {
      std::printf("[ ok ] \"%s\": %zu bytes byte-exact\n", c.prompt.c_str(), got.size());
    }
  }
  std::printf("%zu golden cases, %d failed\n", cases.size(), failed);
  return failed == 0 ? 0 : 1;
}
