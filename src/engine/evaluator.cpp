#include "engine/evaluator.h"

#include <algorithm>

#include "core/timer.h"
#include "sample/candidates.h"

namespace edgelm::engine {
namespace {

// Time spent in single-token forward calls, the decode-speed sample.
struct DecodeClock {
  double seconds = 0.0;
  uint64_t n_tokens = 0;
};

Status forward_one(const model::Model& m, int32_t token, model::KvCache& cache, std::span<float> logits,
                   ThreadPool& pool, DecodeClock& clock) {
  Stopwatch watch;
  EDGELM_TRY_STATUS(m.forward(std::span(&token, 1), cache, logits, pool));
  clock.seconds += watch.seconds();
  ++clock.n_tokens;
  return ok_status();
}

// Runs `tokens` through `m` one at a time in non-overlapping windows of n_ctx, each from an empty
// cache, and calls on_position(j, logits) for every position j < n - 1 with the logits that
// predict tokens[j + 1].
Status run_text(const model::Model& m, std::span<const int32_t> tokens, int32_t n_ctx, ThreadPool& pool,
                DecodeClock& clock, const EvalOptions& options,
                const std::function<void(size_t, std::span<const float>)>& on_position) {
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));  // [n_vocab]
  const size_t n_scored = tokens.size() - 1;
  // Sized to what is used: a 2048-token cache of a 1B model is ~100 MiB to allocate and clear.
  model::KvCache cache(m.config(), static_cast<int32_t>(std::min(n_scored, static_cast<size_t>(n_ctx))));
  for (size_t j = 0; j < n_scored; ++j) {
    if (j % static_cast<size_t>(n_ctx) == 0) cache.clear();
    EDGELM_TRY_STATUS(forward_one(m, tokens[j], cache, logits, pool, clock));
    on_position(j, logits);
    if (options.on_progress && ((j + 1) % 64 == 0 || j + 1 == n_scored)) options.on_progress("text", j + 1, n_scored);
  }
  return ok_status();
}

// Greedy continuation of `prompt` (BOS included) by up to n_predict tokens; stops before an
// end-of-generation token, which is not part of the output.
// The caller keeps prompt + n_predict within the context.
Result<TokenSeq> generate_greedy(const LoadedModel& lm, const TokenSeq& prompt, int32_t n_predict, ThreadPool& pool,
                                 DecodeClock& clock) {
  const model::Model& m = *lm.model;
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));  // [n_vocab]
  model::KvCache cache(m.config(), static_cast<int32_t>(prompt.size()) + n_predict);
  EDGELM_TRY_STATUS(m.forward(prompt, cache, logits, pool));
  TokenSeq out;
  while (static_cast<int32_t>(out.size()) < n_predict) {
    const int32_t id = sample::argmax(logits);
    if (lm.tokenizer->vocab().is_eog(id)) break;
    out.push_back(id);
    if (static_cast<int32_t>(out.size()) == n_predict) break;  // no forward for a token we will not emit
    EDGELM_TRY_STATUS(forward_one(m, id, cache, logits, pool, clock));
  }
  return out;
}

// Prefill speed: best rate of a batched forward over `tokens`, repeated while the total stays
// under about a second (at least once), so tiny models get a stable figure and large ones
// are not timed for minutes.
Result<double> measure_prefill(const model::Model& m, std::span<const int32_t> tokens, ThreadPool& pool) {
  model::KvCache cache(m.config(), static_cast<int32_t>(tokens.size()));
  double best = 0.0, total = 0.0;
  for (int rep = 0; rep < 5 && total < 1.0; ++rep) {
    cache.clear();
    Stopwatch watch;
    EDGELM_TRY_STATUS(m.forward(tokens, cache, std::span<float>(), pool));
    const double s = watch.seconds();
    total += s;
    best = std::max(best, static_cast<double>(tokens.size()) / s);
  }
  return best;
}

SequenceScores score_outputs(const std::vector<TokenSeq>& test, const std::vector<TokenSeq>& ref, size_t cut) {
  std::vector<TokenSeq> t, r;
  for (size_t i = 0; i < test.size(); ++i) {
    t.emplace_back(test[i].begin(), test[i].begin() + static_cast<ptrdiff_t>(std::min(cut, test[i].size())));
    r.emplace_back(ref[i].begin(), ref[i].begin() + static_cast<ptrdiff_t>(std::min(cut, ref[i].size())));
  }
  return {corpus_bleu(t, r).bleu, mean_rouge_l(t, r)};
}

}  // namespace

Status check_same_vocab(const LoadedModel& ref, const LoadedModel& test) {
  const int32_t n_ref = ref.model->config().n_vocab, n_test = test.model->config().n_vocab;
  if (n_ref != n_test)
    return make_error("vocabulary mismatch: the reference has {} tokens, the test model {}", n_ref, n_test);
  const tokenizer::Vocab& a = ref.tokenizer->vocab();
  const tokenizer::Vocab& b = test.tokenizer->vocab();
  if (a.n_tokens() != b.n_tokens())
    return make_error("vocabulary mismatch: the reference has {} tokens, the test model {}", a.n_tokens(),
                      b.n_tokens());
  for (int32_t id = 0; id < a.n_tokens(); ++id) {
    if (a.text(id) != b.text(id))
      return make_error("vocabulary mismatch at token {}: '{}' in the reference, '{}' in the test model", id,
                        a.text(id), b.text(id));
  }
  return ok_status();
}

Result<LoadedModel> quantize_loaded_model(const LoadedModel& ref, model::QuantPreset preset, ThreadPool& pool) {
  Stopwatch watch;
  if (!ref.model->file().metadata.contains("tokenizer.ggml.tokens"))
    return make_error("the reference model's vocabulary metadata was released at load "
                      "(format::LoadOptions::release_vocabulary): it cannot be quantized in memory");
  EDGELM_TRY(format::ModelFile file, model::quantize_model(ref.model->file(), preset, pool));
  auto tok = tokenizer::load_tokenizer(file.metadata);
  if (!tok.ok()) return tok.error();
  auto m = model::Model::load(std::move(file));
  if (!m.ok()) return make_error("{}: {}", model::quant_preset_name(preset), m.error().message);
  LoadedModel out;
  out.model = std::move(m).value();
  out.tokenizer = std::move(tok).value();
  out.load_seconds = watch.seconds();
  return out;
}

Result<Evaluator> Evaluator::create(const LoadedModel& ref, std::string_view text, std::vector<std::string> prompts,
                                    EvalOptions options, ThreadPool& pool) {
  if (options.n_predict < 0)
    return make_error("the number of tokens to generate must be >= 0, got {}", options.n_predict);
  if (options.n_short < 0) return make_error("the short cut must be >= 0, got {}", options.n_short);
  if (options.n_ctx < 0) return make_error("the context size must be >= 0, got {}", options.n_ctx);
  if (options.max_text_tokens < 0)
    return make_error("the text token limit must be >= 0, got {}", options.max_text_tokens);
  if (prompts.empty()) return make_error("no prompts to generate from");

  const model::Model& m = *ref.model;
  Evaluator ev;
  ev.ref_ = &ref;
  ev.options_ = std::move(options);
  const EvalOptions& o = ev.options_;
  ev.n_ctx_ = o.n_ctx > 0 ? o.n_ctx : m.config().n_ctx_train;
  if (ev.n_ctx_ < 2) return make_error("the context size must be at least 2, got {}", ev.n_ctx_);
  ev.n_vocab_ = m.config().n_vocab;

  ev.text_tokens_ = ref.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/false);
  if (o.max_text_tokens > 0 && static_cast<int32_t>(ev.text_tokens_.size()) > o.max_text_tokens)
    ev.text_tokens_.resize(static_cast<size_t>(o.max_text_tokens));
  if (ev.text_tokens_.size() < 2) return make_error("the evaluation text is empty (nothing to predict)");
  const size_t n_scored = ev.text_tokens_.size() - 1;
  const uint64_t logits_bytes = static_cast<uint64_t>(n_scored) * static_cast<uint64_t>(ev.n_vocab_) * sizeof(float);
  if (logits_bytes > kMaxReferenceBytes) {
    return make_error(
        "the text has {} tokens: the reference logits would take {} MiB (limit {} MiB); use a shorter "
        "text or a token limit",
        ev.text_tokens_.size(), logits_bytes >> 20, kMaxReferenceBytes >> 20);
  }

  ev.prompts_ = std::move(prompts);
  for (const auto& p : ev.prompts_) {
    TokenSeq t = ref.tokenizer->encode(p, /*add_special=*/true, /*parse_special=*/false);
    if (t.empty()) return make_error("a prompt is empty and the vocabulary adds no BOS token");
    if (static_cast<int32_t>(t.size()) >= ev.n_ctx_)
      return make_error("a prompt has {} tokens, leaving no room in the context of {}", t.size(), ev.n_ctx_);
    ev.n_long_ = std::max(ev.n_long_, std::min(o.n_predict, ev.n_ctx_ - static_cast<int32_t>(t.size())));
    ev.prompt_n_predict_.push_back(std::min(o.n_predict, ev.n_ctx_ - static_cast<int32_t>(t.size())));
    ev.prompt_tokens_.push_back(std::move(t));
  }
  ev.n_short_ = std::min(o.n_short, ev.n_long_);

  // Reference text pass: keep the logits (for KLD) and argmax (for top-1) of every position.
  ev.ref_logits_.resize(n_scored * static_cast<size_t>(ev.n_vocab_));
  ev.ref_top1_.resize(n_scored);
  std::vector<double> log_probs(n_scored);
  DecodeClock clock;
  EDGELM_TRY_STATUS(run_text(m, ev.text_tokens_, ev.n_ctx_, pool, clock, o, [&](size_t j, std::span<const float> l) {
    std::copy(l.begin(), l.end(), ev.ref_logits_.begin() + static_cast<ptrdiff_t>(j * l.size()));
    ev.ref_top1_[j] = sample::argmax(l);
    log_probs[j] = log_prob_of(l, ev.text_tokens_[j + 1]);
  }));
  ev.ref_perplexity_ = perplexity(log_probs);

  for (size_t i = 0; i < ev.prompt_tokens_.size(); ++i) {
    EDGELM_TRY(TokenSeq out, generate_greedy(ref, ev.prompt_tokens_[i], ev.prompt_n_predict_[i], pool, clock));
    ev.ref_outputs_.push_back(std::move(out));
    if (o.on_progress) o.on_progress("generate", i + 1, ev.prompt_tokens_.size());
  }
  return ev;
}

Result<EvalResult> Evaluator::evaluate(const LoadedModel& test, ThreadPool& pool) const {
  EDGELM_TRY_STATUS(check_same_vocab(*ref_, test));
  const model::Model& m = *test.model;
  const size_t n_scored = text_tokens_.size() - 1;
  const size_t n_vocab = static_cast<size_t>(n_vocab_);

  EvalResult r;
  r.n_scored = static_cast<int32_t>(n_scored);
  r.weight_bytes = m.weights().n_bytes_file;
  std::vector<double> log_probs(n_scored);
  std::vector<int32_t> top1(n_scored);
  double kld_sum = 0.0;
  DecodeClock clock;
  EDGELM_TRY_STATUS(run_text(m, text_tokens_, n_ctx_, pool, clock, options_, [&](size_t j, std::span<const float> l) {
    const std::span<const float> ref(ref_logits_.data() + j * n_vocab, n_vocab);
    const double kld = kl_divergence(ref, l);
    kld_sum += kld;
    r.kld_max = std::max(r.kld_max, kld);
    top1[j] = sample::argmax(l);
    log_probs[j] = log_prob_of(l, text_tokens_[j + 1]);
  }));
  r.perplexity = perplexity(log_probs);
  r.kld_mean = kld_sum / static_cast<double>(n_scored);
  r.top1 = top1_agreement(ref_top1_, top1);

  if (options_.n_prefill_bench > 0) {
    const size_t n =
        std::min({text_tokens_.size(), static_cast<size_t>(options_.n_prefill_bench), static_cast<size_t>(n_ctx_)});
    EDGELM_TRY(r.prefill_tok_s, measure_prefill(m, std::span(text_tokens_).first(n), pool));
  }

  for (size_t i = 0; i < prompt_tokens_.size(); ++i) {
    EDGELM_TRY(TokenSeq out, generate_greedy(test, prompt_tokens_[i], prompt_n_predict_[i], pool, clock));
    r.outputs.push_back(std::move(out));
    if (options_.on_progress) options_.on_progress("generate", i + 1, prompt_tokens_.size());
  }
  r.first_n = score_outputs(r.outputs, ref_outputs_, static_cast<size_t>(n_short_));
  r.all = score_outputs(r.outputs, ref_outputs_, static_cast<size_t>(n_long_));
  r.decode_tok_s = clock.seconds > 0 ? static_cast<double>(clock.n_tokens) / clock.seconds : 0.0;
  return r;
}

}  // namespace edgelm::engine
