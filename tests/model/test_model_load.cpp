// Model loading: config from metadata, shape checks, and clear errors for what a file can get
// wrong (missing or misshapen tensors, unknown architecture or tensor type, absurd sizes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/thread_pool.h"
#include "format/gguf_reader.h"
#include "format/gguf_writer.h"
#include "model/model.h"
#include "model/quantize.h"
#include "model/synthetic.h"
#include "support/test_data.h"

namespace edgelm::model {
namespace {

std::string load_error(format::ModelFile f) {
  auto m = Model::load(std::move(f));
  EXPECT_FALSE(m.ok());
  return m.ok() ? std::string() : m.error().message;
}

format::ModelFile synthetic() {
  auto f = make_synthetic_model(SyntheticSpec{});
  EXPECT_TRUE(f.ok());
  return std::move(f).value();
}

TEST(ModelLoad, ReferenceStoriesGguf) {
  for (const char* name : {"models/stories260K-f32.gguf", "models/stories260K-f16.gguf"}) {
    auto f = format::read_gguf(test::shared_path(name));
    ASSERT_TRUE(f.ok());
    auto m = Model::load(std::move(f).value());
    ASSERT_TRUE(m.ok()) << m.error().message;
    const ModelConfig& c = (*m)->config();
    EXPECT_EQ(c.n_embd, 64);
    EXPECT_EQ(c.n_layer, 5);
    EXPECT_EQ(c.n_head, 8);
    EXPECT_EQ(c.n_head_kv, 4);
    EXPECT_EQ(c.n_ff, 172);
    EXPECT_EQ(c.n_vocab, 512);
    EXPECT_EQ(c.n_rot, 8);
    EXPECT_EQ(c.arch->name, "llama");
    EXPECT_FLOAT_EQ(c.rope_base, 10000.0f);
  }
}

// Norm weights are copied out of the file mapping (read every step, they would fault the
// neighbouring, already packed matrices' pages back in), with the file's values.
TEST(ModelLoad, NormWeightsAreCopiedOutOfTheFile) {
  auto f = format::read_gguf(test::shared_path("models/stories260K-f32.gguf"));
  ASSERT_TRUE(f.ok());
  const format::TensorInfo* t = f->find_tensor("blk.0.attn_norm.weight");
  ASSERT_NE(t, nullptr);
  const std::vector<float> file_values(reinterpret_cast<const float*>(t->data),
                                       reinterpret_cast<const float*>(t->data) + t->ne[0]);
  const auto* file_data = reinterpret_cast<const float*>(t->data);
  auto m = Model::load(std::move(f).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  const float* norm = (*m)->weights().layers[0].attn_norm;
  ASSERT_NE(norm, nullptr);
  EXPECT_NE(norm, file_data);
  EXPECT_EQ(std::vector<float>(norm, norm + file_values.size()), file_values);
}

// Rss of this process's mappings of `path` in kB (/proc/self/smaps), or -1 when not mapped.
long mapped_rss_kb(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  long rss = -1;
  bool in_file = false;
  while (std::getline(smaps, line)) {
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < line.find(' ')) {
      in_file = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (in_file && line.rfind("Rss:", 0) == 0) {
      rss = std::max(rss, 0L) + std::stol(line.substr(4));
    }
  }
  return rss;
}

// Once the matrices are packed, their pages of the file mapping leave the resident set, even
// for a file just written (its page-cache pages still dirty: MADV_PAGEOUT left those mapped, 12.5
// MB of Gemma 4 E2B's resident set on a freshly copied file).
TEST(ModelLoad, PackedMatricesLeaveTheFileMappingsResidentSet) {
  test::TempDir dir;
  SyntheticSpec spec;
  spec.n_embd = 512;
  spec.n_ff = 2048;
  spec.n_head = 8;
  spec.n_head_kv = 8;
  auto f32 = make_synthetic_model(spec);
  ASSERT_TRUE(f32.ok()) << f32.error().message;
  ThreadPool pool(2);
  auto f = quantize_model(*f32, QuantPreset::q8_0, pool);  // a type every x86 and NEON kernel set packs
  ASSERT_TRUE(f.ok()) << f.error().message;
  // write_gguf syncs its file; a plain copy leaves the page cache dirty, as a download or cp does.
  const std::string written = dir.file("written.gguf"), path = dir.file("fresh.gguf");
  ASSERT_TRUE(format::write_gguf(written, *f).ok());
  std::filesystem::copy_file(written, path);
  auto read = format::read_gguf(path);
  ASSERT_TRUE(read.ok()) << read.error().message;
  const long file_kb = static_cast<long>(std::filesystem::file_size(path) / 1024);
  auto m = Model::load(std::move(read).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  if ((*m)->weights().packed.size() == 0) GTEST_SKIP() << "the active ISA packs no matrix (EDGELM_PACK=0 or none)";
  const long rss_kb = mapped_rss_kb(path);
  ASSERT_GE(rss_kb, 0) << "the file is not mapped";
  // What may stay: the token embedding table's rows (read per token, not touched by the load)
  // and page rounding at tensor edges; the layers' matrices (~90% of the file) must be gone.
  EXPECT_LT(rss_kb, file_kb / 10) << "of a " << file_kb << " kB file";
}

// The smolvlm-256m text shape: SmolLM2-135M's sizes, a --vocab padded to 49280 whose first added
// tokens are SmolVLM's image tokens (control tokens), loaded as a llama.
TEST(ModelLoad, Qwen35ShapesPadTheVocabularyWithImageTokens) {
  for (const char* shape : {"qwen3.5-0.8b", "qwen3.5-4b"}) {
    SyntheticSpec s;
    ASSERT_TRUE(apply_synthetic_shape(s, shape).ok());
    EXPECT_EQ(s.arch, "qwen35");
    const std::vector<std::string> want = {"<|vision_start|>", "<|vision_end|>", "<|image_pad|>"};
    EXPECT_EQ(s.pad_tokens, want) << shape;
  }
  SyntheticSpec other;
  ASSERT_TRUE(apply_synthetic_shape(other, "qwen3-0.6b").ok());
  EXPECT_TRUE(other.pad_tokens.empty());
}

TEST(ModelLoad, SmolVlmShapePadsTheVocabularyWithImageTokens) {
  SyntheticSpec s;
  ASSERT_TRUE(apply_synthetic_shape(s, "smolvlm-256m").ok());
  EXPECT_EQ(s.arch, "llama");
  EXPECT_EQ(s.n_embd, 576);
  EXPECT_EQ(s.n_layer, 30);
  EXPECT_EQ(s.n_head, 9);
  EXPECT_EQ(s.n_head_kv, 3);
  EXPECT_EQ(s.n_ff, 1536);
  EXPECT_EQ(s.n_vocab, 49280);
  EXPECT_EQ(s.pad_tokens, smolvlm_image_tokens());
  ASSERT_EQ(smolvlm_image_tokens().size(), size_t{40});
  EXPECT_EQ(smolvlm_image_tokens()[3], "<row_1_col_1>");
  EXPECT_EQ(smolvlm_image_tokens()[4], "<row_1_col_2>");
  EXPECT_EQ(smolvlm_image_tokens()[38], "<row_6_col_6>");
  s.n_layer = 1;
  s.n_vocab = 600;  // tok512 + 88 padding
  s.vocab_from = test::shared_path("models/tok512.bin");
  auto f = make_synthetic_model(s);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const auto* tokens = f->metadata.get_array("tokenizer.ggml.tokens").value();
  const auto* types = f->metadata.get_array("tokenizer.ggml.token_type").value();
  ASSERT_EQ(tokens->size(), size_t{600});
  EXPECT_EQ(*(*tokens)[512].as_string(), "<fake_token_around_image>");
  EXPECT_EQ(*(*tokens)[513].as_string(), "<image>");
  EXPECT_EQ(*(*tokens)[514].as_string(), "<global-img>");
  EXPECT_EQ(*(*tokens)[551].as_string(), "<end_of_utterance>");
  EXPECT_EQ(*(*tokens)[552].as_string(), "<|reserved_40|>");
  EXPECT_EQ((*types)[513].as_int(), 3);  // control
  auto m = Model::load(std::move(f).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ((*m)->config().arch->name, "llama");
  EXPECT_EQ((*m)->config().n_vocab, 600);
  // Too small a padding for the added tokens is an error, not a silent cut.
  s.n_vocab = 520;
  auto small = make_synthetic_model(s);
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.error().message.find("no room"), std::string::npos) << small.error().message;
}

TEST(ModelLoad, MissingTensorIsNamed) {
  auto f = synthetic();
  f.tensors.erase(f.tensors.begin() + 5);
  const std::string name = synthetic().tensors[5].name;
  EXPECT_NE(load_error(std::move(f)).find("'" + name + "' is missing"), std::string::npos);
}

TEST(ModelLoad, WrongShapeIsNamed) {
  auto f = synthetic();
  for (auto& t : f.tensors)
    if (t.name == "blk.1.attn_k.weight") std::swap(t.ne[0], t.ne[1]);
  const std::string e = load_error(std::move(f));
  EXPECT_NE(e.find("'blk.1.attn_k.weight' has shape"), std::string::npos) << e;
}

TEST(ModelLoad, UnknownArchitectureIsNamed) {
  auto f = synthetic();
  f.metadata.set("general.architecture", format::GgufValue::from_string("mamba"));
  const std::string e = load_error(std::move(f));
  EXPECT_NE(e.find("'mamba'"), std::string::npos) << e;
  EXPECT_NE(e.find("llama"), std::string::npos) << e;
}

TEST(ModelLoad, AbsurdOrInconsistentSizes) {
  auto f = synthetic();
  f.metadata.set("llama.embedding_length", format::GgufValue::from_u32(4000000000u));
  EXPECT_NE(load_error(std::move(f)).find("llama.embedding_length"), std::string::npos);
  f = synthetic();
  f.metadata.set("llama.attention.head_count", format::GgufValue::from_u32(0));
  EXPECT_NE(load_error(std::move(f)).find("head_count"), std::string::npos);
  f = synthetic();
  f.metadata.set("llama.attention.head_count_kv", format::GgufValue::from_u32(3));
  EXPECT_NE(load_error(std::move(f)).find("head_count_kv"), std::string::npos);
  f = synthetic();
  f.metadata.set("llama.block_count", format::GgufValue::from_string("two"));
  EXPECT_NE(load_error(std::move(f)).find("llama.block_count"), std::string::npos);
}

// A hybrid file whose full_attention_interval exceeds its layers has no attention layer (no KV):
// refused at load, by name, not left to fail later as an unexplained KV-memory error.
TEST(ModelLoad, HybridWithoutAttentionLayerIsNamed) {
  SyntheticSpec s;
  s.arch = "qwen35";
  s.n_layer = 4;
  auto f = make_synthetic_model(s);
  ASSERT_TRUE(f.ok()) << f.error().message;
  f->metadata.set("qwen35.full_attention_interval", format::GgufValue::from_u32(5));
  const std::string e = load_error(std::move(f).value());
  EXPECT_NE(e.find("full_attention_interval 5 leaves no full-attention layer"), std::string::npos) << e;
  s.full_attn_interval = 5;
  EXPECT_FALSE(make_synthetic_model(s).ok()) << "synth must not write such a file either";
}

TEST(ModelLoad, QuantizedFilesOfTheReferenceLoadInPlace) {
  for (const char* name : {"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K_M", "Q5_K_M", "Q6_K", "F16", "BF16"}) {
    auto f = format::read_gguf(test::shared_path(std::string("models/interop/rand-small-") + name + ".gguf"));
    ASSERT_TRUE(f.ok());
    auto m = Model::load(std::move(f).value());
    ASSERT_TRUE(m.ok()) << name << ": " << m.error().message;
    EXPECT_EQ((*m)->config().n_embd, 256);
  }
}

TEST(ModelLoad, TypeWithoutKernelsIsNamed) {
  auto f = synthetic();
  for (auto& t : f.tensors)
    if (t.name == "blk.0.ffn_up.weight") t.type = DType::i32;  // same byte size as F32
  const std::string e = load_error(std::move(f));
  EXPECT_NE(e.find("'blk.0.ffn_up.weight' has type I32"), std::string::npos) << e;
}

format::ModelFile synthetic(const SyntheticSpec& s) {
  auto f = make_synthetic_model(s);
  EXPECT_TRUE(f.ok()) << f.error().message;
  return std::move(f).value();
}

// Written by our writer, read back: the scaling keys, the head size and the rope_freqs tensor
// survive and configure the model.
TEST(ModelLoad, RopeScalingAndHeadDimRoundTripThroughGguf) {
  test::TempDir dir;
  SyntheticSpec s;
  s.arch = "qwen3";
  s.head_dim = 32;
  s.n_ctx = 4096;
  s.rope_scaling = "yarn";
  s.rope_factor = 4.0f;
  s.rope_orig_ctx = 1024;
  s.rope_attn_factor = 0.75f;
  s.llama3_factor = 8.0f;
  auto f = synthetic(s);
  f.metadata.set("qwen3.rope.scaling.yarn_beta_fast", format::GgufValue::from_f32(24.0f));
  f.metadata.set("qwen3.rope.scaling.yarn_beta_slow", format::GgufValue::from_f32(2.0f));
  f.metadata.set("qwen3.rope.scaling.yarn_log_multiplier", format::GgufValue::from_f32(0.05f));
  const std::string path = dir.file("q3.gguf");
  ASSERT_TRUE(format::write_gguf(path, f).ok());
  auto read = format::read_gguf(path);
  ASSERT_TRUE(read.ok()) << read.error().message;
  ASSERT_NE(read->find_tensor("rope_freqs.weight"), nullptr);
  ASSERT_NE(read->find_tensor("blk.1.attn_q_norm.weight"), nullptr);
  auto m = Model::load(std::move(read).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.arch->name, "qwen3");
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.n_rot, 32);
  EXPECT_EQ(c.n_embd_kv(), 64);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::yarn);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_ctx, 1024);
  EXPECT_FLOAT_EQ(c.rope_scaling.attn_factor, 0.75f);
  EXPECT_FLOAT_EQ(c.rope_scaling.beta_fast, 24.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.beta_slow, 2.0f);
  EXPECT_FLOAT_EQ(c.rope_scaling.log_mul, 0.05f);
  EXPECT_NEAR((*m)->rope().mscale(), 0.75 * (1 + 0.05 * std::log(4.0)), 1e-6);
  ASSERT_NE((*m)->weights().rope_freqs, nullptr);
  EXPECT_FLOAT_EQ((*m)->weights().rope_freqs[0], 1.0f);   // high frequency: kept
  EXPECT_FLOAT_EQ((*m)->weights().rope_freqs[15], 8.0f);  // low frequency: divided by the factor
  EXPECT_FLOAT_EQ((*m)->config().rope_base, 1e6f);

  // Linear, and the legacy key: an absent type with a factor is linear.
  SyntheticSpec l;
  l.rope_scaling = "linear";
  l.rope_factor = 2.5f;
  auto ml = Model::load(synthetic(l));
  ASSERT_TRUE(ml.ok()) << ml.error().message;
  EXPECT_EQ((*ml)->config().rope_scaling.type, RopeScalingType::linear);
  EXPECT_FLOAT_EQ((*ml)->config().rope_scaling.factor, 2.5f);
  auto legacy = synthetic();
  legacy.metadata.set("llama.rope.scale_linear", format::GgufValue::from_f32(3.0f));
  auto mg = Model::load(std::move(legacy));
  ASSERT_TRUE(mg.ok()) << mg.error().message;
  EXPECT_EQ((*mg)->config().rope_scaling.type, RopeScalingType::linear);
  EXPECT_FLOAT_EQ((*mg)->config().rope_scaling.factor, 3.0f);
  auto none = synthetic();
  none.metadata.set("llama.rope.scaling.type", format::GgufValue::from_string("none"));
  none.metadata.set("llama.rope.scaling.factor", format::GgufValue::from_f32(8.0f));
  auto mn = Model::load(std::move(none));
  ASSERT_TRUE(mn.ok()) << mn.error().message;
  EXPECT_EQ((*mn)->config().rope_scaling.type, RopeScalingType::none);
  EXPECT_EQ((*mn)->rope().mscale(), 1.0f);
}

TEST(ModelLoad, WhatTheForwardCannotDoIsAnErrorNamingIt) {
  auto expect = [](format::ModelFile f, const std::string& needle) {
    const std::string e = load_error(std::move(f));
    EXPECT_NE(e.find(needle), std::string::npos) << e;
  };
  auto f = synthetic();
  f.metadata.set("llama.rope.scaling.type", format::GgufValue::from_string("longrope"));
  f.metadata.set("llama.rope.scaling.factor", format::GgufValue::from_f32(4.0f));
  expect(std::move(f), "'llama.rope.scaling.type' = 'longrope' is not supported");
  f = synthetic();
  f.metadata.set("llama.rope.scaling.type", format::GgufValue::from_string("yarn"));
  expect(std::move(f), "needs 'llama.rope.scaling.factor'");
  f = synthetic();
  f.metadata.set("llama.rope.scaling.factor", format::GgufValue::from_f32(-2.0f));
  expect(std::move(f), "'llama.rope.scaling.factor' = -2 is out of range");
  f = synthetic();
  f.metadata.set("llama.rope.scaling.type", format::GgufValue::from_u32(2));
  expect(std::move(f), "llama.rope.scaling.type");
  f = synthetic();
  f.metadata.set("llama.rope.scaling.type", format::GgufValue::from_string("yarn"));
  f.metadata.set("llama.rope.scaling.factor", format::GgufValue::from_f32(4.0f));
  f.metadata.set("llama.rope.scaling.original_context_length", format::GgufValue::from_u32(0));
  expect(std::move(f), "llama.rope.scaling.original_context_length");
  f = synthetic();
  f.metadata.set("llama.attention.key_length", format::GgufValue::from_u32(16));
  f.metadata.set("llama.attention.value_length", format::GgufValue::from_u32(32));
  expect(std::move(f), "value_length 32 differs from key_length 16");

  SyntheticSpec q3;
  q3.arch = "qwen3";
  f = synthetic(q3);
  std::erase_if(f.tensors, [](const format::TensorInfo& t) { return t.name == "blk.1.attn_k_norm.weight"; });
  expect(std::move(f), "'blk.1.attn_k_norm.weight' is missing");
  f = synthetic(q3);
  for (auto& t : f.tensors)
    if (t.name == "blk.0.attn_q_norm.weight") t.ne[0] = 8;  // [n_embd / n_head] of 16
  expect(std::move(f), "'blk.0.attn_q_norm.weight' has shape");
  // Tensors of another architecture in a file that claims llama: refused, not ignored.
  f = synthetic(q3);
  f.metadata.set("general.architecture", format::GgufValue::from_string("llama"));
  for (const char* k : {"context_length", "embedding_length", "feed_forward_length", "block_count",
                        "attention.head_count", "attention.head_count_kv"}) {
    auto v = *f.metadata.find(std::string("qwen3.") + k);
    f.metadata.set(std::string("llama.") + k, v);
  }
  expect(std::move(f), "tensor 'blk.0.attn_q_norm.weight' is not used by architecture 'llama'");
  // rope_freqs of the wrong size or with a non-positive factor.
  SyntheticSpec l3;
  l3.llama3_factor = 8.0f;
  f = synthetic(l3);
  for (auto& t : f.tensors)
    if (t.name == "rope_freqs.weight") t.ne[0] = 4, t.n_bytes = 16;
  expect(std::move(f), "'rope_freqs.weight' has shape");
  f = synthetic(l3);
  for (auto& t : f.tensors)
    if (t.name == "rope_freqs.weight") const_cast<float*>(reinterpret_cast<const float*>(t.data))[3] = 0.0f;
  expect(std::move(f), "'rope_freqs.weight' has factor 0 at 3");
  // A llama file with Q/K/V biases uses them; a lone Q bias is an error naming the K bias.
  f = synthetic();
  SyntheticSpec qwen2;
  qwen2.arch = "qwen2";
  auto with_bias = synthetic(qwen2);
  for (const auto& t : with_bias.tensors)
    if (t.name == "blk.0.attn_q.bias") f.tensors.push_back(t);
  f.keep_alive(std::make_shared<format::ModelFile>(std::move(with_bias)));
  expect(std::move(f), "'blk.0.attn_k.bias' is missing");
}

// The file without metadata key `key`.
format::ModelFile without_key(format::ModelFile f, const std::string& key) {
  format::GgufMetadata md;
  for (const auto& [k, v] : f.metadata.entries())
    if (k != key) md.set(k, v);
  f.metadata = std::move(md);
  return f;
}

// What the gemma and phi3 rows need from a file, each missing piece an error naming it; and the
// published configuration they read.
TEST(ModelLoad, GemmaAndPhi3NeedTheirKeysAndTensors) {
  auto expect = [](format::ModelFile f, const std::string& needle) {
    const std::string e = load_error(std::move(f));
    EXPECT_NE(e.find(needle), std::string::npos) << e;
  };
  SyntheticSpec g2;
  g2.arch = "gemma2";
  expect(without_key(synthetic(g2), "gemma2.attn_logit_softcapping"), "'gemma2.attn_logit_softcapping' is missing");
  expect(without_key(synthetic(g2), "gemma2.final_logit_softcapping"), "'gemma2.final_logit_softcapping' is missing");
  expect(without_key(synthetic(g2), "gemma2.attention.sliding_window"), "'gemma2.attention.sliding_window' is missing");
  auto f = synthetic(g2);
  f.metadata.set("gemma2.attention.sliding_window", format::GgufValue::from_u32(0));
  expect(std::move(f), "'gemma2.attention.sliding_window' = 0 is out of range");
  f = synthetic(g2);
  f.metadata.set("gemma2.attention.sliding_window_pattern", format::GgufValue::from_u32(3));
  expect(std::move(f), "'gemma2.attention.sliding_window_pattern' = 3 is not supported");
  f = synthetic(g2);
  std::erase_if(f.tensors, [](const format::TensorInfo& t) { return t.name == "blk.1.post_ffw_norm.weight"; });
  expect(std::move(f), "'blk.1.post_ffw_norm.weight' is missing");
  SyntheticSpec g3;
  g3.arch = "gemma3";
  expect(without_key(synthetic(g3), "gemma3.attention.sliding_window"), "'gemma3.attention.sliding_window' is missing");
  f = synthetic(g3);
  std::erase_if(f.tensors, [](const format::TensorInfo& t) { return t.name == "blk.0.attn_q_norm.weight"; });
  expect(std::move(f), "'blk.0.attn_q_norm.weight' is missing");
  f = synthetic(g3);
  f.metadata.set("gemma3.rope.freq_base_swa", format::GgufValue::from_f32(20000.0f));
  auto m = Model::load(std::move(f));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_FLOAT_EQ((*m)->config().local_rope_base, 20000.0f);
  EXPECT_EQ((*m)->config().n_swa, 4096);
  EXPECT_FLOAT_EQ((*m)->config().attn_softcap, 0.0f);

  SyntheticSpec p3;
  p3.arch = "phi3";
  p3.n_ctx = 1024;
  p3.longrope_orig_ctx = 64;
  f = synthetic(p3);
  std::erase_if(f.tensors, [](const format::TensorInfo& t) { return t.name == "rope_factors_long.weight"; });
  expect(std::move(f), "'rope_factors_long.weight' is missing");
  expect(without_key(synthetic(p3), "phi3.rope.scaling.original_context_length"),
         "'phi3.rope.scaling.original_context_length' is missing");
  f = synthetic(p3);
  for (auto& t : f.tensors)
    if (t.name == "rope_factors_short.weight") const_cast<float*>(reinterpret_cast<const float*>(t.data))[1] = -1.0f;
  expect(std::move(f), "'rope_factors_short.weight' has factor -1 at 1");
  f = synthetic(p3);
  for (auto& t : f.tensors)
    if (t.name == "blk.0.attn_qkv.weight") t.ne[1] -= 1;
  expect(std::move(f), "'blk.0.attn_qkv.weight' has shape");
  // The attention factor: as stored, else the published sqrt(1 + ln(ctx / orig) / ln(orig)).
  m = Model::load(without_key(synthetic(p3), "phi3.rope.scaling.attn_factor"));
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_NEAR((*m)->config().longrope_attn_factor, std::sqrt(1 + std::log(16.0) / std::log(64.0)), 1e-6);
  EXPECT_EQ((*m)->config().longrope_orig_ctx, 64);
  EXPECT_EQ(&(*m)->rope_for(0, 64), &(*m)->rope());
  EXPECT_NE(&(*m)->rope_for(0, 65), &(*m)->rope());
  // The query scale: 1 / sqrt(head_dim) (Gemma 2 2B/9B, Gemma 3 1B-12B: query_pre_attn_scalar is
  // the head size), but n_embd / n_head for the 27B models (46 / 62 layers).
  for (const auto& [arch, layers, want] : {std::tuple{"gemma2", 26, 32}, std::tuple{"gemma2", 46, 16},
                                           std::tuple{"gemma3", 26, 32}, std::tuple{"gemma3", 62, 16}}) {
    SyntheticSpec g;
    g.arch = arch;
    g.head_dim = 32;  // n_embd / n_head = 16
    auto md = synthetic(g).metadata;
    md.set(std::string(arch) + ".block_count", format::GgufValue::from_u32(static_cast<uint32_t>(layers)));
    auto c = config_from_metadata(md);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_FLOAT_EQ(c->attn_scale, 1.0f / std::sqrt(static_cast<float>(want))) << arch << " " << layers;
  }
  // A llama file with phi3's fused tensor, or gemma's post-norm: refused, not ignored.
  f = synthetic();
  for (const auto& t : synthetic(g2).tensors)
    if (t.name == "blk.0.post_attention_norm.weight") f.tensors.push_back(t);
  expect(std::move(f), "tensor 'blk.0.post_attention_norm.weight' is not used by architecture 'llama'");
}

}  // namespace
}  // namespace edgelm::model
