// Evaluator: how much quality a model (typically a quantization) loses against a reference
// model of the same vocabulary, on one text and a list of prompts.
//
// Two measurements, both against the reference's own behaviour rather than against labels:
//  - Text: the text is tokenized once (with BOS) and run through each model one token at a time
//    (Model::forward only returns the last token's logits, so per-position logits need one call
//    per token) in consecutive, non-overlapping windows of n_ctx tokens, each starting from an
//    empty cache. Every token after the first is predicted exactly once, from the same context
//    in both models. Per position: the test model's log-prob of the true next token (-> PPL),
//    KL(P_ref || P_test) of the next-token distributions (-> mean and max KLD), and whether the
//    two argmax tokens agree (-> top-1).
//  - Generation: each prompt (with BOS) is continued greedily (argmax, lowest id on ties) by both
//    models until EOS/EOG or n_long = min(n_predict, n_ctx - prompt tokens) tokens; the test
//    outputs are scored against the reference outputs by corpus BLEU-4 and mean ROUGE-L on token
//    ids, once on the first n_short tokens of every output and once on the whole outputs.
//
// The reference is run once, at create(), and its per-position logits are kept
// ([n_scored, n_vocab] float32, bounded by kMaxReferenceBytes) so that many test models can be
// evaluated against it at the cost of running only the test model each time.
//
// Speed, reported alongside: decode tok/s is measured on the test model's own single-token
// forward calls (text pass and generation, each with the cache of its position); prefill tok/s
// is a short fixed measurement, one batched forward over the first n_prefill_bench text tokens
// (best of a few repetitions, at most ~1 s), because the text pass itself never batches.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "engine/quality_metrics.h"
#include "model/quantize.h"

namespace edgelm::engine {

struct EvalOptions {
  int32_t n_predict = 512;        // generation cap per prompt (further capped by the context)
  int32_t n_short = 128;          // the first cut of the outputs for BLEU@128 / ROUGE-L@128
  int32_t n_ctx = 0;              // window and generation context; 0: the reference's trained context
  int32_t max_text_tokens = 0;    // truncate the tokenized text (BOS included); 0: the whole text
  int32_t n_prefill_bench = 128;  // tokens of the prefill measurement (capped by text and window); 0: skip
  // Called as work progresses (stage "text" or "generate", units done, units total); may be empty.
  std::function<void(std::string_view stage, size_t done, size_t total)> on_progress;
};

struct SequenceScores {
  double bleu = 0.0;     // corpus BLEU-4, add-one smoothed for n > 1 (quality_metrics.h)
  double rouge_l = 0.0;  // mean ROUGE-L F1 over prompts
};

struct EvalResult {
  int32_t n_scored = 0;     // text positions scored (text tokens - 1)
  double perplexity = 0.0;  // the test model's, over the text
  double kld_mean = 0.0;    // nats, mean over positions of KL(P_ref || P_test)
  double kld_max = 0.0;
  double top1 = 0.0;              // fraction of positions with the same argmax
  SequenceScores first_n;         // over the first n_short generated tokens
  SequenceScores all;             // over all generated tokens (up to n_long)
  std::vector<TokenSeq> outputs;  // the test model's continuation of each prompt
  uint64_t weight_bytes = 0;      // bytes of the test model's tensors as stored
  double prefill_tok_s = 0.0;     // 0 when not measured
  double decode_tok_s = 0.0;
};

class Evaluator {
 public:
  // Reference logits beyond this size are refused (a shorter text or max_text_tokens helps).
  static constexpr uint64_t kMaxReferenceBytes = 2ull << 30;

  // Tokenizes `text`, runs the reference over it and greedily continues every prompt. `ref` is
  // borrowed and must outlive the Evaluator. Errors: fewer than 2 text tokens (empty text), no
  // prompts or an empty one, bad options, reference logits over kMaxReferenceBytes, forward errors.
  static Result<Evaluator> create(const LoadedModel& ref, std::string_view text, std::vector<std::string> prompts,
                                  EvalOptions options, ThreadPool& pool);

  // Runs `test` over the same text and prompts and compares it with the reference. Errors:
  // vocabulary mismatch (check_same_vocab), forward errors.
  Result<EvalResult> evaluate(const LoadedModel& test, ThreadPool& pool) const;

  int32_t n_text_tokens() const { return static_cast<int32_t>(text_tokens_.size()); }
  int32_t n_ctx() const { return n_ctx_; }
  int32_t n_windows() const { return (n_text_tokens() + n_ctx_ - 1) / n_ctx_; }
  double reference_perplexity() const { return ref_perplexity_; }
  // The effective generation cut-offs: n_short <= n_long <= n_predict.
  int32_t n_short() const { return n_short_; }
  int32_t n_long() const { return n_long_; }
  const std::vector<std::string>& prompts() const { return prompts_; }
  const std::vector<TokenSeq>& reference_outputs() const { return ref_outputs_; }

 private:
  Evaluator() = default;

  const LoadedModel* ref_ = nullptr;
  EvalOptions options_;
  int32_t n_ctx_ = 0;
  int32_t n_vocab_ = 0;
  int32_t n_short_ = 0, n_long_ = 0;
  std::vector<int32_t> text_tokens_;  // [n_text_tokens], BOS first
  std::vector<float> ref_logits_;     // [n_scored, n_vocab]
  std::vector<int32_t> ref_top1_;     // [n_scored]
  double ref_perplexity_ = 0.0;
  std::vector<std::string> prompts_;
  std::vector<TokenSeq> prompt_tokens_;    // [n_prompts], BOS first
  std::vector<int32_t> prompt_n_predict_;  // [n_prompts] min(n_long, n_ctx - prompt tokens)
  std::vector<TokenSeq> ref_outputs_;      // [n_prompts] greedy continuations, EOS excluded
};

// Errors unless both models have the same n_vocab and the same token texts (ids must mean the
// same thing for logits and outputs to be comparable); the message names the first difference.
Status check_same_vocab(const LoadedModel& ref, const LoadedModel& test);

// `ref`'s weights re-encoded in memory by `preset` (model/quantize.h), with the same tokenizer
// metadata. The result's metadata was copied from ref; keep `ref` alive while using it.
Result<LoadedModel> quantize_loaded_model(const LoadedModel& ref, model::QuantPreset preset, ThreadPool& pool);

}  // namespace edgelm::engine
