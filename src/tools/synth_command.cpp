// `edgelm synth`: write a random-weight model with real shapes (for tests and benchmarks;
// the output is meaningless text, the speed and memory are those of the real architecture).
#include <cstdio>
#include <fstream>
#include <sstream>

#include "format/gguf_writer.h"
#include "model/synthetic.h"
#include "model/synthetic_gemma4_assistant.h"
#include "tokenizer/xlmr_vocab.h"
#include "tools/command.h"
#include "tools/synth_mmproj.h"

namespace edgelm::tools {
namespace {

struct SynthOptions {
  model::SyntheticSpec spec;
  // Given explicitly, these override a --shape's (a real shape with fewer layers, a shorter
  // context or a smaller vocabulary, for quick tests).
  CLI::Option* layers_opt = nullptr;
  CLI::Option* ctx_opt = nullptr;
  CLI::Option* vocab_opt = nullptr;
  CLI::Option* nextn_opt = nullptr;
  CLI::Option* dense_opt = nullptr;
  std::string type = "f32";
  std::string output;
  std::string shape;
  std::string pooling;
  std::string chat_template_file;  // written as tokenizer.chat_template
  std::string vocab_only;          // "xlmr": write only that synthetic vocabulary
  bool rerank_lm_rows = false;     // a reranker shape without cls.output (scores from the output rows)
  MmprojSynthOptions mmproj;       // --mmproj-output: a vision encoder beside the model
};

int run(SynthOptions& o) {
  if (!o.vocab_only.empty()) {
    if (o.vocab_only != "xlmr") return report_error(make_error("unknown --vocab-only '{}' (use xlmr)", o.vocab_only));
    auto file = model::make_xlmr_vocab_file(o.vocab_opt->count() > 0 ? o.spec.n_vocab : tokenizer::kXlmrVocabSize);
    if (!file.ok()) return report_error(file.error());
    if (auto st = format::write_gguf(o.output, *file); !st.ok()) return report_error(st.error());
    std::fprintf(stderr, "wrote %s: vocabulary only (synthetic XLM-RoBERTa)\n", o.output.c_str());
    return 0;
  }
  const auto type = dtype_from_name(o.type);
  if (!type) return report_error(make_error("unknown weight type '{}' (use f32, f16 or bf16)", o.type));
  o.spec.weight_type = *type;
  if (model::AssistantSynthSpec as; model::apply_gemma4_assistant_shape(as, o.shape)) {
    // A Gemma 4 assistant (gemma4_mtp) for the gemma4 shape of the same stem.
    as.weight_type = *type;
    as.seed = o.spec.seed;
    as.vocab_from = o.spec.vocab_from;
    if (o.vocab_opt->count() > 0) as.n_vocab = o.spec.n_vocab;
    if (o.layers_opt->count() > 0) as.n_layer = o.spec.n_layer;
    auto file = model::make_synthetic_gemma4_assistant(as);
    if (!file.ok()) return report_error(file.error());
    if (auto st = format::write_gguf(o.output, *file); !st.ok()) return report_error(st.error());
    std::fprintf(stderr, "wrote %s: gemma4_mtp (Gemma 4 assistant), %zu tensors\n", o.output.c_str(),
                 file->tensors.size());
    return 0;
  }
  if (!o.shape.empty()) {
    const model::SyntheticSpec given = o.spec;
    if (auto st = model::apply_synthetic_shape(o.spec, o.shape); !st.ok()) return report_error(st.error());
    if (o.layers_opt->count() > 0) {
      // gemma4: keep the shape's share of shared-KV layers, as far as the fewer layers allow.
      if (o.spec.arch == "gemma4")
        o.spec.n_shared_kv = model::gemma4_shared_kv_for(o.spec, given.n_layer, o.spec.n_layer, o.spec.n_shared_kv);
      o.spec.n_layer = given.n_layer;
    }
    if (o.ctx_opt->count() > 0) o.spec.n_ctx = given.n_ctx;
    if (o.vocab_opt->count() > 0) o.spec.n_vocab = given.n_vocab;
    if (o.nextn_opt->count() > 0) o.spec.n_nextn = given.n_nextn;
    if (o.dense_opt->count() > 0) o.spec.n_dense = given.n_dense;
  }
  if (o.rerank_lm_rows) o.spec.rerank_cls = false;
  if (o.pooling == "mean")
    o.spec.pooling_type = 1;
  else if (o.pooling == "cls")
    o.spec.pooling_type = 2;
  else if (o.pooling == "last")
    o.spec.pooling_type = 3;
  else if (o.pooling == "rank")
    o.spec.pooling_type = 4;  // bert: adds a classification head (a cross-encoder reranker)
  else if (!o.pooling.empty())
    return report_error(make_error("unknown pooling '{}' (use mean, cls, last or rank)", o.pooling));
  auto file = model::make_synthetic_model(o.spec);
  if (!file.ok()) return report_error(file.error());
  if (!o.chat_template_file.empty()) {
    std::ifstream in(o.chat_template_file, std::ios::binary);
    if (!in) return report_error(make_error("cannot read chat template file '{}'", o.chat_template_file));
    std::ostringstream ss;
    ss << in.rdbuf();
    file->metadata.set("tokenizer.chat_template", format::GgufValue::from_string(ss.str()));
  }
  if (auto st = format::write_gguf(o.output, *file); !st.ok()) return report_error(st.error());
  std::fprintf(stderr, "wrote %s: %s, %zu tensors\n", o.output.c_str(), o.spec.arch.c_str(), file->tensors.size());
  if (auto st = write_mmproj_synth(o.mmproj, o.shape, o.spec.n_embd, o.spec.weight_type, o.spec.seed); !st.ok())
    return report_error(st.error());
  return 0;
}

}  // namespace

CommandRunner add_synth_command(CLI::App& app) {
  auto o = std::make_shared<SynthOptions>();
  auto& s = o->spec;
  CLI::App* cmd = app.add_subcommand("synth", "Write a random-weight model with real shapes (tests, benchmarks)");
  cmd->add_option("-o,--output", o->output, "Output GGUF path")->required();
  cmd->add_option("--shape", o->shape,
                  "Named real-model shape (tinyllama-1.1b, qwen2-0.5b, qwen3-0.6b, llama3.2-1b, smollm2-360m, "
                  "gemma3-1b, smolvlm-256m, phi4-mini, qwen3.5-0.8b, qwen3.5-4b, gemma4-e2b, gemma4-e4b, gemma4-tiny, "
                  "gemma4-e2b-assistant, gemma4-tiny-assistant (Gemma 4 assistant drafts; --vocab TARGET.gguf copies its "
                  "vocabulary), "
                  "stories15m, bert-bge-small, bert-tiny, nomic-embed-text-v1.5, jina-embeddings-v2-small, "
                  "ms-marco-minilm-l6-reranker, nomic-tiny, jina-tiny, bert-reranker-tiny, bge-m3, bge-reranker-v2-m3, "
                  "xlmr-tiny, xlmr-reranker-tiny, embeddinggemma-300m, qwen3-embedding-0.6b, "
                  "qwen3-reranker-0.6b, ...); "
                  "overrides the sizes but "
                  "--layers, --ctx and --n-vocab given explicitly");
  cmd->add_option("--arch", s.arch,
                  "Architecture (llama, qwen2, qwen3, qwen35, gemma2, gemma3, phi3, bert, nomic-bert, jina-bert-v2; gemma4 only "
                  "through --shape)")
      ->capture_default_str();
  cmd->add_option("--dim", s.n_embd, "Embedding size")->capture_default_str();
  o->layers_opt = cmd->add_option("--layers", s.n_layer, "Number of layers")->capture_default_str();
  cmd->add_option("--ff", s.n_ff, "Feed-forward size")->capture_default_str();
  cmd->add_option("--heads", s.n_head, "Attention heads")->capture_default_str();
  cmd->add_option("--kv-heads", s.n_head_kv, "Key/value heads")->capture_default_str();
  o->vocab_opt = cmd->add_option("--n-vocab", s.n_vocab,
                                 "Vocabulary size (without --vocab; with a --shape and --vocab, "
                                 "the size it is padded to)")
                     ->capture_default_str();
  cmd->add_option("--vocab,--vocab-from", s.vocab_from, "Embed the vocabulary of this GGUF or llama2.c tokenizer.bin");
  add_mmproj_synth_options(cmd, o->mmproj);
  o->ctx_opt = cmd->add_option("--ctx", s.n_ctx, "Context length")->capture_default_str();
  cmd->add_option("--head-dim", s.head_dim, "Head size (0: dim / heads; else written as attention.key_length)")
      ->capture_default_str();
  cmd->add_option("--rope-base", s.rope_base, "RoPE frequency base (0: the architecture's default)");
  cmd->add_option("--rope-scaling", s.rope_scaling, "RoPE scaling type written to the file: linear or yarn");
  cmd->add_option("--rope-factor", s.rope_factor, "RoPE scaling factor")->capture_default_str();
  cmd->add_option("--rope-orig-ctx", s.rope_orig_ctx, "yarn: original context length (0: not written)");
  cmd->add_option("--llama3-rope", s.llama3_factor, "Write rope_freqs.weight of the llama3 rule with this factor");
  cmd->add_option("--sliding-window", s.sliding_window,
                  "Sliding-window size written as attention.sliding_window (0: 4096 for gemma2/gemma3, else none)");
  cmd->add_option("--attn-softcap", s.attn_softcap, "Attention logit soft-capping (0: 50 for gemma2, else none)");
  cmd->add_option("--final-softcap", s.final_softcap, "Final logit soft-capping (0: 30 for gemma2, else none)");
  cmd->add_option("--rope-dim", s.n_rot, "Rotary dimensions per head, rope.dimension_count (0: the head size)");
  cmd->add_option("--longrope-orig-ctx", s.longrope_orig_ctx,
                  "phi3: write LongRoPE factors (rope_factors_short/long) extending this original context to --ctx");
  cmd->add_flag("--tied", s.tied_output, "Share the embedding as the output matrix");
  cmd->add_option("--partial-rotary", s.partial_rotary,
                  "gemma4: fraction of the global heads' dimensions rotated (proportional RoPE, rope_freqs.weight)")
      ->capture_default_str();
  cmd->add_option("--type", o->type, "Weight type: f32, f16, bf16")->capture_default_str();
  cmd->add_option("--seed", s.seed, "Random seed")->capture_default_str();
  cmd->add_option("--chat-template-file", o->chat_template_file,
                  "Write this Jinja chat template as tokenizer.chat_template (e.g. a thinking model's)");
  cmd->add_option("--vocab-only", o->vocab_only,
                  "Write only a synthetic vocabulary, no tensors: xlmr (XLM-RoBERTa's 250002-token unigram "
                  "vocabulary; --n-vocab resizes it)");
  cmd->add_flag("--jina-norms", s.jina_norms, "jina-bert-v2: write the optional attn_q_norm / attn_k_norm / attn_norm_2");
  cmd->add_option("--pooling", o->pooling, "encoders only: mean, cls, last, or rank (bert: adds a classification head) (default: the "
                  "shape's, else mean)");
  o->dense_opt = cmd->add_option("--dense", s.n_dense,
                                 "Embedding decoders: width of the dense_2 / dense_3 projections (0: none; "
                                 "embeddinggemma-300m: 3072)");
  cmd->add_flag("--rerank-lm-rows", o->rerank_lm_rows,
                "qwen3-reranker shapes: no cls.output.weight (a plain qwen3 file with pooling_type rank)");
  cmd->add_option("--ssm-k-heads", s.ssm_k_heads, "qwen35: DeltaNet key heads (ssm.group_count)")
      ->capture_default_str();
  cmd->add_option("--ssm-v-heads", s.ssm_v_heads, "qwen35: DeltaNet value heads (ssm.time_step_rank)")
      ->capture_default_str();
  cmd->add_option("--ssm-head-dim", s.ssm_head_dim, "qwen35: DeltaNet head size (ssm.state_size)")
      ->capture_default_str();
  cmd->add_option("--ssm-conv", s.ssm_d_conv, "qwen35: convolution taps (ssm.conv_kernel)")->capture_default_str();
  o->nextn_opt = cmd->add_option("--nextn", s.n_nextn,
                  "qwen35: MTP (nextn) blocks after the main layers, for --draft mtp (the qwen3.5 shapes: 1)")
      ->capture_default_str();
  cmd->add_option("--attn-interval", s.full_attn_interval,
                  "qwen35: every N-th layer is full attention (full_attention_interval)")
      ->capture_default_str();
  return [o] { return run(*o); };
}

}  // namespace edgelm::tools
