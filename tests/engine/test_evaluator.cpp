// The evaluator on the real stories260K model: a model against itself must show no loss at all
// (KLD exactly 0, top-1 1, BLEU = ROUGE-L = 1, its own perplexity), and a Q4_0 quantization must
// show some loss while staying a working model.
#include <gtest/gtest.h>

#include "engine/evaluator.h"
#include "support/test_data.h"

namespace edgelm::engine {
namespace {

constexpr const char* kText =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. One day, she saw "
    "a big red ball in the park. She ran to the ball and kicked it. The ball went very high. Lily laughed and "
    "her friend Tom laughed too. They played with the ball all day long and were very happy.";

const std::vector<std::string> kPrompts = {"Once upon a time", "Tom and his dog"};

LoadedModel load_stories() {
  auto lm = load_model(test::shared_path("models/stories260K.bin"), test::shared_path("models/tok512.bin"));
  EDGELM_CHECK(lm.ok(), lm.error().message);
  return std::move(lm).value();
}

EvalOptions small_options() {
  EvalOptions o;
  o.n_predict = 64;
  o.n_short = 16;
  return o;
}

TEST(Evaluator, ModelAgainstItselfLosesNothing) {
  ThreadPool pool(2);
  const LoadedModel lm = load_stories();
  auto ev = Evaluator::create(lm, kText, kPrompts, small_options(), pool);
  ASSERT_TRUE(ev.ok()) << ev.error().message;
  EXPECT_GT(ev->n_text_tokens(), 50);
  EXPECT_EQ(ev->n_windows(), 1);
  EXPECT_EQ(ev->n_long(), 64);
  EXPECT_EQ(ev->n_short(), 16);
  ASSERT_EQ(ev->reference_outputs().size(), kPrompts.size());
  for (const auto& out : ev->reference_outputs()) EXPECT_FALSE(out.empty());
  // A story model on a simple story: far better than uniform over 512 tokens, not perfect.
  EXPECT_GT(ev->reference_perplexity(), 1.5);
  EXPECT_LT(ev->reference_perplexity(), 50.0);

  auto r = ev->evaluate(lm, pool);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->n_scored, ev->n_text_tokens() - 1);
  EXPECT_EQ(r->kld_mean, 0.0);
  EXPECT_EQ(r->kld_max, 0.0);
  EXPECT_EQ(r->top1, 1.0);
  EXPECT_DOUBLE_EQ(r->perplexity, ev->reference_perplexity());
  EXPECT_DOUBLE_EQ(r->first_n.bleu, 1.0);
  EXPECT_DOUBLE_EQ(r->first_n.rouge_l, 1.0);
  EXPECT_DOUBLE_EQ(r->all.bleu, 1.0);
  EXPECT_DOUBLE_EQ(r->all.rouge_l, 1.0);
  EXPECT_EQ(r->outputs, ev->reference_outputs());
  EXPECT_EQ(r->weight_bytes, lm.model->weights().n_bytes_file);
  EXPECT_GT(r->prefill_tok_s, 0.0);
  EXPECT_GT(r->decode_tok_s, 0.0);
}

TEST(Evaluator, SmallWindowsStillScoreEveryPosition) {
  ThreadPool pool(1);
  const LoadedModel lm = load_stories();
  EvalOptions o = small_options();
  o.n_ctx = 32;
  auto ev = Evaluator::create(lm, kText, kPrompts, o, pool);
  ASSERT_TRUE(ev.ok()) << ev.error().message;
  EXPECT_EQ(ev->n_windows(), (ev->n_text_tokens() + 31) / 32);
  EXPECT_GT(ev->n_windows(), 1);
  EXPECT_LE(ev->n_long(), 32);  // generation capped by the context
  auto r = ev->evaluate(lm, pool);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->n_scored, ev->n_text_tokens() - 1);
  EXPECT_EQ(r->kld_mean, 0.0);
  for (const auto& out : r->outputs) EXPECT_LE(out.size(), static_cast<size_t>(ev->n_long()));
}

TEST(Evaluator, F32CopyIsLosslessAndQ4_0LosesALittle) {
  ThreadPool pool(2);
  const LoadedModel ref = load_stories();
  auto ev = Evaluator::create(ref, kText, kPrompts, small_options(), pool);
  ASSERT_TRUE(ev.ok()) << ev.error().message;

  auto f32 = quantize_loaded_model(ref, model::QuantPreset::f32, pool);
  ASSERT_TRUE(f32.ok()) << f32.error().message;
  auto same = ev->evaluate(*f32, pool);
  ASSERT_TRUE(same.ok()) << same.error().message;
  EXPECT_EQ(same->kld_mean, 0.0);
  EXPECT_EQ(same->top1, 1.0);

  auto q4 = quantize_loaded_model(ref, model::QuantPreset::q4_0, pool);
  ASSERT_TRUE(q4.ok()) << q4.error().message;
  auto r = ev->evaluate(*q4, pool);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_LT(r->weight_bytes, ref.model->weights().n_bytes_file / 2);
  EXPECT_GT(r->kld_mean, 1e-4);  // 4-bit weights of a 260K model move the distributions
  EXPECT_LT(r->kld_mean, 1.0);   // but do not break the model
  EXPECT_GE(r->kld_max, r->kld_mean);
  EXPECT_GT(r->top1, 0.6);
  EXPECT_LE(r->top1, 1.0);
  EXPECT_GT(r->perplexity, ev->reference_perplexity() * 0.8);
  EXPECT_LT(r->perplexity, ev->reference_perplexity() * 2.0);
  EXPECT_GE(r->first_n.bleu, 0.0);
  EXPECT_LE(r->first_n.bleu, 1.0);
  EXPECT_GE(r->all.rouge_l, 0.0);
  EXPECT_LE(r->all.rouge_l, 1.0);
}

TEST(Evaluator, RejectsAnotherVocabulary) {
  ThreadPool pool(1);
  const LoadedModel ref = load_stories();
  auto other =
      load_model(test::shared_path("models/aidreams260K.bin"), test::shared_path("models/aidreams-tok512.bin"));
  ASSERT_TRUE(other.ok()) << other.error().message;
  const Status st = check_same_vocab(ref, *other);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("vocabulary mismatch"), std::string::npos) << st.error().message;
  auto ev = Evaluator::create(ref, kText, kPrompts, small_options(), pool);
  ASSERT_TRUE(ev.ok()) << ev.error().message;
  EXPECT_FALSE(ev->evaluate(*other, pool).ok());
}

TEST(Evaluator, RejectsEmptyTextAndNoPrompts) {
  ThreadPool pool(1);
  const LoadedModel lm = load_stories();
  auto empty = Evaluator::create(lm, "", kPrompts, small_options(), pool);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("empty"), std::string::npos) << empty.error().message;
  EXPECT_FALSE(Evaluator::create(lm, kText, {}, small_options(), pool).ok());
}

}  // namespace
}  // namespace edgelm::engine
