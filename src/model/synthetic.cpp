#include "model/synthetic.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include <cstring>
#include "core/mmap_file.h"
#include "format/gguf_reader.h"
#include "format/llama2c.h"
#include "format/model_file.h"
#include "kernels/fp16.h"
#include "model/arch.h"

namespace edgelm::model {
namespace {

using format::GgufValue;

class Builder {
 public:
  Builder(format::ModelFile& file, uint64_t seed, DType weight_type)
      : file_(file), rng_(seed), weight_type_(weight_type) {}

  // A [rows, cols] weight (ne = {cols, rows}) of N(0, scale^2), or a vector when rows == 0;
  // matrices in the model's weight type unless f32 (small tables read whole, like conv taps).
  void add(const std::string& name, int64_t cols, int64_t rows, float scale, float mean = 0.0f, bool f32 = false) {
    const bool vector = rows == 0;
    add_normal_tensor(file_, rng_, name, {cols, vector ? 1 : rows, 1, 1}, vector ? 1 : 2,
                      vector || f32 ? DType::f32 : weight_type_, scale, mean);
  }

 private:
  format::ModelFile& file_;
  std::mt19937_64 rng_;
  DType weight_type_;
};

}  // namespace

// The tokenizer.ggml.* metadata of a GGUF model/vocab file or of a llama2.c tokenizer.bin.
Result<format::GgufMetadata> read_vocab_metadata(const std::string& path) {
  EDGELM_TRY(MappedFile map, MappedFile::open(path));
  uint32_t magic = 0;
  if (map.size() >= sizeof magic) std::memcpy(&magic, map.data(), sizeof magic);
  if (magic == format::kGgufMagic) {
    EDGELM_TRY(format::ModelFile f, format::read_gguf(path));
    return f.metadata;
  }
  format::GgufMetadata md;
  auto st = format::parse_llama2c_tokenizer(map.data(), map.size(), md);
  if (!st.ok()) return make_error("{}: {}", path, st.error().message);
  return md;
}

// A small WordPiece vocabulary of n tokens in the GGUF convention (word-start pieces carry a
// U+2581 prefix, continuations none): specials, every lower-case letter, digit and common
// punctuation mark both as word start and as continuation, some whole words, [unusedN] filler.
Status add_generated_wordpiece_vocab(format::GgufMetadata& md, int64_t n) {
  const std::string start = "\xE2\x96\x81";  // U+2581
  std::vector<std::string> texts = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  std::vector<int32_t> types(texts.size(), 3);  // control
  const std::string chars = "abcdefghijklmnopqrstuvwxyz0123456789.,!?'-";
  for (const char ch : chars) texts.push_back(start + ch), texts.push_back(std::string(1, ch));
  for (const char* w :
       {"the", "a",     "is",    "of",    "and",   "to",  "in",   "it",   "cat",  "dog",   "sat",   "on",
        "mat", "hello", "world", "quick", "brown", "fox", "jump", "lazy", "over", "embed", "cache", "model"})
    texts.push_back(start + w);
  for (const char* w : {"ing", "ed", "er", "s", "ly", "ion"}) texts.push_back(w);
  types.resize(texts.size(), 1);  // normal
  if (static_cast<int64_t>(texts.size()) > n)
    return make_error("a generated WordPiece vocabulary needs at least {} tokens, not {}", texts.size(), n);
  for (int64_t i = 0; static_cast<int64_t>(texts.size()) < n; ++i) {
    texts.push_back(fmt::format("[unused{}]", i));
    types.push_back(5);  // unused
  }
  format::GgufValue::Array tok_arr, type_arr;
  for (size_t i = 0; i < texts.size(); ++i) {
    tok_arr.push_back(GgufValue::from_string(texts[i]));
    type_arr.push_back(GgufValue::from_i32(types[i]));
  }
  md.set("tokenizer.ggml.model", GgufValue::from_string("bert"));
  md.set("tokenizer.ggml.tokens", GgufValue::from_array(format::GgufType::string, std::move(tok_arr)));
  md.set("tokenizer.ggml.token_type", GgufValue::from_array(format::GgufType::i32, std::move(type_arr)));
  md.set("tokenizer.ggml.padding_token_id", GgufValue::from_u32(0));
  md.set("tokenizer.ggml.unknown_token_id", GgufValue::from_u32(1));
  md.set("tokenizer.ggml.cls_token_id", GgufValue::from_u32(2));
  md.set("tokenizer.ggml.seperator_token_id", GgufValue::from_u32(3));
  md.set("tokenizer.ggml.mask_token_id", GgufValue::from_u32(4));
  return ok_status();
}

namespace {

// A BERT encoder with the tensor names and metadata keys of the GGUF "bert" architecture.
Result<format::ModelFile> make_synthetic_bert(const SyntheticSpec& s) {
  if (s.weight_type != DType::f32 && s.weight_type != DType::f16 && s.weight_type != DType::bf16)
    return make_error("synthetic models are F32, F16 or BF16, not {}", dtype_name(s.weight_type));
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_ff <= 0 || s.n_head <= 0 || s.n_ctx < 2 || s.n_token_types <= 0)
    return make_error("synthetic model sizes must be positive (context at least 2)");
  if (s.n_embd % s.n_head != 0) return make_error("n_embd {} is not a multiple of n_head {}", s.n_embd, s.n_head);
  if (s.pooling_type != 1 && s.pooling_type != 2)
    return make_error("bert pooling type {} is not 1 (mean) or 2 (cls)", s.pooling_type);

  format::ModelFile file;
  auto& md = file.metadata;
  int64_t n_vocab = s.n_vocab;
  if (!s.vocab_from.empty()) {
    EDGELM_TRY(format::GgufMetadata vocab_md, read_vocab_metadata(s.vocab_from));
    EDGELM_TRY(std::string model, vocab_md.get_string("tokenizer.ggml.model"));
    if (model != "bert")
      return make_error("{}: tokenizer.ggml.model is '{}', a BERT model needs 'bert'", s.vocab_from, model);
    EDGELM_TRY(const auto* tokens, vocab_md.get_array("tokenizer.ggml.tokens"));
    n_vocab = static_cast<int64_t>(tokens->size());
    for (const auto& [key, value] : vocab_md.entries())
      if (key.rfind("tokenizer.", 0) == 0) md.set(key, value);
  } else {
    EDGELM_TRY_STATUS(add_generated_wordpiece_vocab(md, n_vocab));
  }
  if (n_vocab <= 0) return make_error("synthetic model vocabulary must be non-empty");

  md.set("general.architecture", GgufValue::from_string("bert"));
  md.set("general.name", GgufValue::from_string("synthetic-bert"));
  md.set("bert.context_length", GgufValue::from_u32(static_cast<uint32_t>(s.n_ctx)));
  md.set("bert.embedding_length", GgufValue::from_u32(static_cast<uint32_t>(s.n_embd)));
  md.set("bert.feed_forward_length", GgufValue::from_u32(static_cast<uint32_t>(s.n_ff)));
  md.set("bert.block_count", GgufValue::from_u32(static_cast<uint32_t>(s.n_layer)));
  md.set("bert.attention.head_count", GgufValue::from_u32(static_cast<uint32_t>(s.n_head)));
  md.set("bert.attention.layer_norm_epsilon", GgufValue::from_f32(1e-12f));
  md.set("bert.attention.causal", GgufValue::from_bool(false));
  md.set("bert.pooling_type", GgufValue::from_u32(s.pooling_type));
  md.set("tokenizer.ggml.token_type_count", GgufValue::from_u32(static_cast<uint32_t>(s.n_token_types)));

  const int64_t E = s.n_embd, F = s.n_ff;
  const float se = 1.0f / std::sqrt(static_cast<float>(E)), sf = 1.0f / std::sqrt(static_cast<float>(F));
  Builder b(file, s.seed, s.weight_type);
  b.add("token_embd.weight", E, n_vocab, 0.5f);
  b.add("token_types.weight", E, s.n_token_types, 0.5f);
  b.add("position_embd.weight", E, s.n_ctx, 0.5f);
  b.add("token_embd_norm.weight", E, 0, 0.1f, 1.0f);
  b.add("token_embd_norm.bias", E, 0, 0.1f);
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_output"}) {
      b.add(p + m + ".weight", E, E, se);
      b.add(p + m + ".bias", E, 0, 0.1f);
    }
    b.add(p + "attn_output_norm.weight", E, 0, 0.1f, 1.0f);
    b.add(p + "attn_output_norm.bias", E, 0, 0.1f);
    b.add(p + "ffn_up.weight", E, F, se);
    b.add(p + "ffn_up.bias", F, 0, 0.1f);
    b.add(p + "ffn_down.weight", F, E, sf);
    b.add(p + "ffn_down.bias", E, 0, 0.1f);
    b.add(p + "layer_output_norm.weight", E, 0, 0.1f, 1.0f);
    b.add(p + "layer_output_norm.bias", E, 0, 0.1f);
  }
  return file;
}

}  // namespace

// Pads tokenizer.ggml.tokens (and its parallel scores / token_type arrays) with control tokens up
// to n: the texts of `first`, then reserved "<|reserved_N|>" ones.
Status pad_vocab(format::GgufMetadata& md, int64_t n, const std::vector<std::string>& first) {
  EDGELM_TRY(const auto* tokens, md.get_array("tokenizer.ggml.tokens"));
  format::GgufValue::Array tok = *tokens;
  const auto n0 = static_cast<int64_t>(tok.size());
  if (n - n0 < static_cast<int64_t>(first.size()))
    return make_error("the vocabulary of {} tokens padded to {} has no room for the {} added tokens", n0, n,
                      first.size());
  for (const std::string& t : first) tok.push_back(GgufValue::from_string(t));
  for (int64_t i = static_cast<int64_t>(tok.size()); i < n; ++i)
    tok.push_back(GgufValue::from_string(fmt::format("<|reserved_{}|>", i - n0)));
  md.set("tokenizer.ggml.tokens", GgufValue::from_array(format::GgufType::string, std::move(tok)));
  if (md.contains("tokenizer.ggml.scores")) {
    EDGELM_TRY(const auto* scores, md.get_array("tokenizer.ggml.scores"));
    format::GgufValue::Array sc = *scores;
    while (static_cast<int64_t>(sc.size()) < n) sc.push_back(GgufValue::from_f32(0.0f));
    md.set("tokenizer.ggml.scores", GgufValue::from_array(format::GgufType::f32, std::move(sc)));
  }
  if (md.contains("tokenizer.ggml.token_type")) {
    EDGELM_TRY(const auto* types, md.get_array("tokenizer.ggml.token_type"));
    format::GgufValue::Array ty = *types;
    while (static_cast<int64_t>(ty.size()) < n) ty.push_back(GgufValue::from_i32(3));  // control
    md.set("tokenizer.ggml.token_type", GgufValue::from_array(format::GgufType::i32, std::move(ty)));
  }
  return ok_status();
}

namespace {

// rope_freqs.weight [D / 2] of the "llama3" rule (Llama 3.1 release): with wavelength
// w_i = 2 pi / base^(-2i/D), pairs with w_i < orig / 4 keep their frequency (factor 1), those
// with w_i > orig / 1 are divided by `factor`, and in between the frequency is the blend
// (1 - t) f / factor + t f, t = (orig / w_i - 1) / (4 - 1); the stored value is f / (new f).
void add_llama3_rope_freqs(format::ModelFile& file, int64_t D, float base, float factor, int32_t orig_ctx) {
  constexpr double kLow = 1.0, kHigh = 4.0;
  auto buf = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(D / 2) * sizeof(float));
  auto* out = reinterpret_cast<float*>(buf->data());
  for (int64_t i = 0; i < D / 2; ++i) {
    const double f = std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / static_cast<double>(D));
    const double wavelen = 2.0 * 3.141592653589793 / f;
    double scale;  // new frequency / f
    if (wavelen < orig_ctx / kHigh)
      scale = 1.0;
    else if (wavelen > orig_ctx / kLow)
      scale = 1.0 / factor;
    else {
      const double t = (orig_ctx / wavelen - kLow) / (kHigh - kLow);
      scale = (1.0 - t) / factor + t;
    }
    out[i] = static_cast<float>(1.0 / scale);
  }
  format::TensorInfo t;
  t.name = "rope_freqs.weight";
  t.type = DType::f32;
  t.n_dims = 1;
  t.ne = {D / 2, 1, 1, 1};
  t.n_bytes = buf->size();
  t.data = buf->data();
  file.tensors.push_back(std::move(t));
  file.keep_alive(std::move(buf));
}

// A [n] F32 vector tensor with the given values.
void add_f32_vector(format::ModelFile& file, const std::string& name, const std::vector<float>& values) {
  auto buf = std::make_shared<std::vector<uint8_t>>(values.size() * sizeof(float));
  std::memcpy(buf->data(), values.data(), buf->size());
  format::TensorInfo t;
  t.name = name;
  t.type = DType::f32;
  t.n_dims = 1;
  t.ne = {static_cast<int64_t>(values.size()), 1, 1, 1};
  t.n_bytes = buf->size();
  t.data = buf->data();
  file.tensors.push_back(std::move(t));
  file.keep_alive(std::move(buf));
}

// LongRoPE factors of the shape Phi-3's have: short ones within a few percent of 1, long ones
// rising from 1 (fast pairs) to the extension ratio (slow pairs).
void add_longrope_factors(format::ModelFile& file, int64_t half, double ratio) {
  std::vector<float> shrt(static_cast<size_t>(half)), lng(shrt.size());
  for (int64_t i = 0; i < half; ++i) {
    const double t = half > 1 ? static_cast<double>(i) / static_cast<double>(half - 1) : 0.0;
    shrt[static_cast<size_t>(i)] = static_cast<float>(1.0 + 0.05 * t);
    lng[static_cast<size_t>(i)] = static_cast<float>(1.0 + (std::max(ratio, 1.0) - 1.0) * t * t);
  }
  add_f32_vector(file, "rope_factors_short.weight", shrt);
  add_f32_vector(file, "rope_factors_long.weight", lng);
}

// The qwen35 keys of the recurrent layers and the M-RoPE sections (SyntheticSpec).
Status add_deltanet_metadata(format::GgufMetadata& md, const SyntheticSpec& s, int64_t D) {
  if (s.ssm_k_heads <= 0 || s.ssm_v_heads <= 0 || s.ssm_head_dim <= 0 || s.ssm_d_conv <= 0 ||
      s.full_attn_interval <= 0 || s.ssm_v_heads % s.ssm_k_heads != 0)
    return make_error(
        "qwen35: DeltaNet key heads {}, value heads {} (a multiple of them), head size {}, conv {} and "
        "attention interval {} must be positive",
        s.ssm_k_heads, s.ssm_v_heads, s.ssm_head_dim, s.ssm_d_conv, s.full_attn_interval);
  if (s.full_attn_interval > s.n_layer)
    return make_error("qwen35: attention interval {} leaves no full-attention layer among {} layers", s.full_attn_interval,
                      s.n_layer);
  const std::string a = s.arch + ".";
  md.set(a + "ssm.conv_kernel", GgufValue::from_u32(static_cast<uint32_t>(s.ssm_d_conv)));
  md.set(a + "ssm.inner_size", GgufValue::from_u32(static_cast<uint32_t>(s.ssm_v_heads * s.ssm_head_dim)));
  md.set(a + "ssm.state_size", GgufValue::from_u32(static_cast<uint32_t>(s.ssm_head_dim)));
  md.set(a + "ssm.time_step_rank", GgufValue::from_u32(static_cast<uint32_t>(s.ssm_v_heads)));
  md.set(a + "ssm.group_count", GgufValue::from_u32(static_cast<uint32_t>(s.ssm_k_heads)));
  md.set(a + "full_attention_interval", GgufValue::from_u32(static_cast<uint32_t>(s.full_attn_interval)));
  const int64_t pairs = (s.n_rot > 0 ? s.n_rot : D) / 2;
  // Interleaved sections that turn every pair with a text position (ModelConfig::text_rotates_pair):
  // 11, 11, 10 for Qwen3.5's 32 pairs.
  const int64_t s0 = (pairs + 2) / 3, s1 = (pairs + 1) / 3, s2 = pairs - s0 - s1;
  format::GgufValue::Array sections;
  for (const int64_t v : {s0, s1, s2, int64_t{0}}) sections.push_back(GgufValue::from_i32(static_cast<int32_t>(v)));
  md.set(a + "rope.dimension_sections", GgufValue::from_array(format::GgufType::i32, std::move(sections)));
  return ok_status();
}

// The Gated DeltaNet tensors of one recurrent layer (the names and shapes of the reference
// converter; conv taps F32): decay rates a = -(0.2..1.0), dt biases and norms near their
// trained magnitudes so the recurrence neither explodes nor forgets at once.
void add_deltanet_layer(format::ModelFile& file, Builder& b, const std::string& p, const SyntheticSpec& s) {
  const int64_t E = s.n_embd, Dk = s.ssm_head_dim, K = int64_t{s.ssm_k_heads} * Dk, V = int64_t{s.ssm_v_heads} * Dk,
                C = 2 * K + V, H = s.ssm_v_heads;
  const float se = 1.0f / std::sqrt(static_cast<float>(E));
  b.add(p + "attn_qkv.weight", E, C, se);
  b.add(p + "attn_gate.weight", E, V, se);
  b.add(p + "ssm_conv1d.weight", s.ssm_d_conv, C, 0.5f, 0.0f, /*f32=*/true);
  b.add(p + "ssm_dt.bias", H, 0, 0.5f);
  std::vector<float> a(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h)
    a[static_cast<size_t>(h)] = -(0.2f + 0.8f * static_cast<float>(h) / static_cast<float>(H));
  add_f32_vector(file, p + "ssm_a", a);
  b.add(p + "ssm_beta.weight", E, H, se);
  b.add(p + "ssm_alpha.weight", E, H, se);
  b.add(p + "ssm_norm.weight", Dk, 0, 0.1f, 1.0f);
  b.add(p + "ssm_out.weight", V, E, 1.0f / std::sqrt(static_cast<float>(V)));
}

}  // namespace

void add_normal_tensor(format::ModelFile& file, std::mt19937_64& rng, const std::string& name,
                       std::array<int64_t, 4> ne, int n_dims, DType type, float scale, float mean) {
  const int64_t n = ne[0] * ne[1] * ne[2] * ne[3];
  std::normal_distribution<float> dist(mean, scale);
  auto buf = std::make_shared<std::vector<uint8_t>>(dtype_row_bytes(type, n));
  for (int64_t i = 0; i < n; ++i) {
    const float v = dist(rng);
    if (type == DType::f32)
      reinterpret_cast<float*>(buf->data())[i] = v;
    else if (type == DType::f16)
      reinterpret_cast<uint16_t*>(buf->data())[i] = kernels::fp32_to_fp16(v);
    else
      reinterpret_cast<uint16_t*>(buf->data())[i] = kernels::fp32_to_bf16(v);
  }
  format::TensorInfo t;
  t.name = name;
  t.type = type;
  t.n_dims = n_dims;
  t.ne = ne;
  t.n_bytes = buf->size();
  t.data = buf->data();
  file.tensors.push_back(std::move(t));
  file.keep_alive(std::move(buf));
}

const std::vector<SyntheticShape>& synthetic_shapes() {
  // Shapes of real models (published hyper-parameters), for benchmarks with real costs.
  static const std::vector<SyntheticShape> shapes = {
      {"stories260k", "llama", 64, 5, 172, 8, 4, 512, 512},
      {"stories15m", "llama", 288, 6, 768, 6, 6, 32000, 256},
      {"stories110m", "llama", 768, 12, 2048, 12, 12, 32000, 1024},
      {"tinyllama-1.1b", "llama", 2048, 22, 5632, 32, 4, 32000, 2048},
      {"qwen2-0.5b", "qwen2", 896, 24, 4864, 14, 2, 151936, 32768},
      {"qwen2-1.5b", "qwen2", 1536, 28, 8960, 12, 2, 151936, 32768},
      {"llama2-7b", "llama", 4096, 32, 11008, 32, 32, 32000, 4096},
      // Qwen3-0.6B: head_dim 128 with n_embd 1024 and 16 heads (Q is 2048 wide), Q/K norms.
      {"qwen3-0.6b", "qwen3", 1024, 28, 3072, 16, 8, 151936, 40960, 0, 128, 1000000.0f, true},
      // Llama-3.2-1B: 128k context from 8k by the llama3 rope_freqs factors (32x, low 1, high 4).
      {"llama3.2-1b", "llama", 2048, 16, 8192, 32, 8, 128256, 131072, 0, 0, 500000.0f, true, 32.0f},
      {"smollm2-360m", "llama", 960, 32, 2560, 15, 5, 49152, 8192, 0, 0, 100000.0f, true},
      // SmolVLM-256M's text model (SmolLM2-135M's shape, tied): 49152 tokens + 128 added ones
      // (the image tokens of smolvlm_image_tokens() among them); its encoder is the mmproj shape
      // of the same name (vision/synthetic_mmproj.h).
      {"smolvlm-256m", "llama", 576, 30, 1536, 9, 3, 49280, 8192, 0, 0, 100000.0f, true},
      // Gemma-3-1B: head_dim 256 (Q 1024 wide with n_embd 1152), 1 KV head, Q/K norms, 5 local
      // layers (window 512, RoPE base 1e4) to 1 global (base 1e6, no scaling), tied, 262144 vocabulary.
      {"gemma3-1b", "gemma3", 1152, 26, 6912, 4, 1, 262144, 32768, 0, 256, 1000000.0f, true, 0.0f, 512},
      // Phi-4-mini: fused QKV and gate/up, 96 of 128 head dims rotated (partial_rotary_factor
      // 0.75), LongRoPE from 4k to 128k, window 262144 (as the reference converter writes it),
      // tied, 200064 vocabulary.
      {"phi4-mini", "phi3", 3072, 32, 8192, 24, 8, 200064, 131072, 0, 0, 10000.0f, true, 0.0f, 262144, 96, 4096},
      // Qwen3.5 (hybrid: 3 Gated DeltaNet layers to 1 gated attention layer): attention head_dim
      // 256 with 64 rotary dims (partial_rotary_factor 0.25, base 1e7); DeltaNet heads of 128,
      // 16 key heads, 16 (0.8B) or 32 (4B) value heads; tied; 248320 vocabulary; 262144 context.
      {"qwen3.5-0.8b", "qwen35", 1024, 24, 3584, 8, 2,  248320, 262144, 0, 256,
       10000000.0f,    true,     0.0f, 0,  64,   0, 16, 16,     128},
      {"qwen3.5-4b", "qwen35",    2560, 32,   9216, 16, 4, 248320, 262144, 0,
       256,          10000000.0f, true, 0.0f, 0,    64, 0, 16,     32,     128},
      // Gemma 4 E2B / E4B (text): global layers of head 512 rotating a quarter of it (base 1e6,
      // proportional), local layers of head 256 (window 512, base 1e4); E2B: 4 local to 1
      // global, 1 KV head, the last 20 of 35 layers share K/V and have a double-wide FFN
      // (12288); E4B: 5 to 1, 2 KV heads, the last 18 of 42 layers share; per-layer embeddings
      // of 256 per layer; tied; 262144 vocabulary; 131072 context.
      {"gemma4-e2b", "gemma4", 1536, 35, 6144, 8, 1, 262144, 131072, 0,  512, 1000000.0f, true,
       0.0f,         512,      0,    0,  0,    0, 0, 256,    256,    20, 5,   true},
      {"gemma4-e4b", "gemma4", 2560, 42, 10240, 8, 2, 262144, 131072, 0,  512, 1000000.0f, true,
       0.0f,         512,      0,    0,  0,     0, 0, 256,    256,    18, 6,   false},
      // A tiny Gemma 4 for tests: window 8, local heads of 16 and global of 32, 3 local to 1
      // global, the last 4 of 8 layers shared (one global), double-wide FFN, PLE of 8. As in
      // E2B/E4B, the last layer before the shared ones is global and the one before it local:
      // the reference engine takes those two as the shared layers' K/V sources.
      {"gemma4-tiny", "gemma4", 64, 8, 96, 4, 2, 512, 256, 0, 32, 1000000.0f, true,
       0.0f,          8,        0,  0, 0,  0, 0, 16,  8,   4, 4,  true},
      // BERT encoders (embedding models): bge pools [CLS], MiniLM averages.
      {"bert-tiny", "bert", 64, 2, 256, 4, 4, 512, 128, 1},
      {"bert-minilm-l6", "bert", 384, 6, 1536, 12, 12, 30522, 512, 1},
      {"bert-bge-small", "bert", 384, 12, 1536, 12, 12, 30522, 512, 2},
      {"bert-bge-base", "bert", 768, 12, 3072, 12, 12, 30522, 512, 2},
      // Issue 41 encoders (synthetic_encoders.cpp). nomic-embed-text-v1.5: RoPE base 1000, SwiGLU;
      // jina-embeddings-v2-small-en: ALiBi, GeGLU; a MiniLM-L6 cross-encoder (ms-marco) with a
      // classification head (pooling 4 = rank); tiny test variants of each.
      {"nomic-embed-text-v1.5", "nomic-bert", 768, 12, 3072, 12, 12, 30522, 2048, 1, 0, 1000.0f},
      {"jina-embeddings-v2-small", "jina-bert-v2", 512, 4, 2048, 8, 8, 30528, 8192, 1},
      {"ms-marco-minilm-l6-reranker", "bert", 384, 6, 1536, 12, 12, 30522, 512, 4},
      {"nomic-tiny", "nomic-bert", 64, 2, 128, 4, 4, 512, 128, 1, 0, 1000.0f},
      {"jina-tiny", "jina-bert-v2", 64, 2, 128, 4, 4, 512, 128, 1},
      {"bert-reranker-tiny", "bert", 64, 2, 256, 4, 4, 512, 128, 4},
      // XLM-RoBERTa encoders (synthetic_encoders.cpp, is_xlmr_shape): bge-m3 pools <s> (CLS), its
      // reranker has a classification head; 250002 unigram tokens, 8192 context; tiny variants.
      {"bge-m3", "bert", 1024, 24, 4096, 16, 16, 250002, 8192, 2},
      {"bge-reranker-v2-m3", "bert", 1024, 24, 4096, 16, 16, 250002, 8192, 4},
      {"xlmr-tiny", "bert", 64, 2, 256, 4, 4, 512, 128, 2},
      {"xlmr-reranker-tiny", "bert", 64, 2, 256, 4, 4, 512, 128, 4},
  };
  return shapes;
}

const std::vector<std::string>& qwen_vl_image_tokens() {
  static const std::vector<std::string> tokens{"<|vision_start|>", "<|vision_end|>", "<|image_pad|>"};
  return tokens;
}

const std::vector<std::string>& smolvlm_image_tokens() {
  static const std::vector<std::string> tokens = [] {
    std::vector<std::string> t{"<fake_token_around_image>", "<image>", "<global-img>"};
    for (int r = 1; r <= 6; ++r)
      for (int c = 1; c <= 6; ++c) t.push_back(fmt::format("<row_{}_col_{}>", r, c));
    t.push_back("<end_of_utterance>");
    return t;
  }();
  return tokens;
}

Status apply_synthetic_shape(SyntheticSpec& spec, std::string_view name) {
  for (const SyntheticShape& s : synthetic_shapes()) {
    if (s.name != name) continue;
    spec.arch = s.arch;
    spec.n_embd = s.n_embd;
    spec.n_layer = s.n_layer;
    spec.n_ff = s.n_ff;
    spec.n_head = s.n_head;
    spec.n_head_kv = s.n_head_kv;
    spec.n_vocab = s.n_vocab;
    spec.n_ctx = s.n_ctx;
    spec.tied_output = s.tied || (s.arch == "qwen2" && s.n_embd < 1536);  // the small Qwen2 models tie embeddings
    if (s.pooling_type != 0) spec.pooling_type = s.pooling_type;
    spec.head_dim = s.head_dim;
    spec.rope_base = s.rope_base;
    spec.llama3_factor = s.llama3_factor;
    spec.llama3_orig_ctx = 8192;
    spec.sliding_window = s.sliding_window;
    spec.n_rot = s.n_rot;
    spec.longrope_orig_ctx = s.longrope_orig_ctx;
    if (s.ssm_k_heads > 0) {
      spec.n_nextn = 1;  // Qwen3.5 ships one MTP block (mtp_num_hidden_layers)
      spec.ssm_k_heads = s.ssm_k_heads;
      spec.ssm_v_heads = s.ssm_v_heads;
      spec.ssm_head_dim = s.ssm_head_dim;
    }
    if (s.arch == "gemma4") {
      spec.head_dim_swa = s.head_dim_swa;
      spec.n_embd_ple = s.n_embd_ple;
      spec.n_shared_kv = s.n_shared_kv;
      spec.swa_period = s.swa_period;
      spec.double_wide_ffn = s.double_wide_ffn;
    }
    spec.pad_vocab = true;
    spec.xlmr_vocab = is_xlmr_shape(s.name);
    if (spec.xlmr_vocab) spec.n_token_types = 1;  // XLM-R's type_vocab_size
    spec.pad_tokens.clear();
    if (s.name == "smolvlm-256m") spec.pad_tokens = smolvlm_image_tokens();
    if (s.arch == "gemma4") spec.pad_tokens = {"<|image>", "<image|>", "<|image|>"};  // Gemma 4's image markers
    if (s.arch == "qwen35") spec.pad_tokens = qwen_vl_image_tokens();
    return ok_status();
  }
  if (apply_embedding_decoder_shape(spec, name)) return ok_status();
  std::string names;
  for (const SyntheticShape& s : synthetic_shapes()) names += (names.empty() ? "" : ", ") + std::string(s.name);
  return make_error("unknown shape '{}' (known: {}, {})", name, names, embedding_decoder_shape_names());
}

Result<format::ModelFile> make_synthetic_model(const SyntheticSpec& s) {
  if (is_synthetic_encoder(s)) return make_synthetic_encoder(s);
  if (s.arch == "bert") return make_synthetic_bert(s);
  EDGELM_TRY(const ArchSpec* arch, find_arch(s.arch));
  if (s.weight_type != DType::f32 && s.weight_type != DType::f16 && s.weight_type != DType::bf16)
    return make_error("synthetic models are F32, F16 or BF16, not {}", dtype_name(s.weight_type));
  if (s.n_embd <= 0 || s.n_layer <= 0 || s.n_ff <= 0 || s.n_head <= 0 || s.n_head_kv <= 0 || s.n_ctx <= 0)
    return make_error("synthetic model sizes must be positive");
  if (s.head_dim < 0 || (s.head_dim == 0 && s.n_embd % s.n_head != 0) || s.n_head % s.n_head_kv != 0 ||
      (s.head_dim == 0 ? s.n_embd / s.n_head : s.head_dim) % 2 != 0)
    return make_error("n_embd {} / n_head {} / n_head_kv {} / head_dim {} do not form even-sized heads", s.n_embd,
                      s.n_head, s.n_head_kv, s.head_dim);

  format::ModelFile file;
  int64_t n_vocab = s.n_vocab;
  if (!s.vocab_from.empty()) {
    EDGELM_TRY(format::GgufMetadata vocab_md, read_vocab_metadata(s.vocab_from));
    EDGELM_TRY(const auto* tokens, vocab_md.get_array("tokenizer.ggml.tokens"));
    const auto n_tok = static_cast<int64_t>(tokens->size());
    for (const auto& [key, value] : vocab_md.entries())
      if (key.rfind("tokenizer.", 0) == 0) file.metadata.set(key, value);
    if (s.pad_vocab && n_vocab > n_tok) {
      EDGELM_TRY_STATUS(pad_vocab(file.metadata, n_vocab, s.pad_tokens));
    } else {
      n_vocab = n_tok;
    }
  }
  if (n_vocab <= 0) return make_error("synthetic model vocabulary must be non-empty");

  const std::string a = s.arch;
  auto& md = file.metadata;
  md.set("general.architecture", GgufValue::from_string(a));
  md.set("general.name", GgufValue::from_string("synthetic-" + a));
  md.set(a + ".context_length", GgufValue::from_u32(static_cast<uint32_t>(s.n_ctx)));
  md.set(a + ".embedding_length", GgufValue::from_u32(static_cast<uint32_t>(s.n_embd)));
  md.set(a + ".feed_forward_length", GgufValue::from_u32(static_cast<uint32_t>(s.n_ff)));
  const int32_t n_nextn = arch->gated_deltanet ? s.n_nextn : 0;
  if (n_nextn < 0) return make_error("MTP blocks (--nextn) must be >= 0, got {}", n_nextn);
  md.set(a + ".block_count", GgufValue::from_u32(static_cast<uint32_t>(s.n_layer + n_nextn)));
  if (n_nextn > 0) md.set(a + ".nextn_predict_layers", GgufValue::from_u32(static_cast<uint32_t>(n_nextn)));
  md.set(a + ".attention.head_count", GgufValue::from_u32(static_cast<uint32_t>(s.n_head)));
  md.set(a + ".attention.head_count_kv", GgufValue::from_u32(static_cast<uint32_t>(s.n_head_kv)));
  md.set(a + ".attention.layer_norm_rms_epsilon", GgufValue::from_f32(arch->default_rms_eps));
  const float rope_base = s.rope_base > 0.0f ? s.rope_base : arch->default_rope_base;
  md.set(a + ".rope.freq_base", GgufValue::from_f32(rope_base));
  const int64_t E = s.n_embd, D = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head, Q = D * s.n_head,
                KV = D * s.n_head_kv, F = s.n_ff;
  if (s.head_dim > 0) {
    md.set(a + ".attention.key_length", GgufValue::from_u32(static_cast<uint32_t>(D)));
    md.set(a + ".attention.value_length", GgufValue::from_u32(static_cast<uint32_t>(D)));
  }
  const bool gemma = a == "gemma2" || a == "gemma3" || a == "gemma-embedding";
  if (s.sliding_window > 0 || gemma)
    md.set(a + ".attention.sliding_window",
           GgufValue::from_u32(static_cast<uint32_t>(s.sliding_window > 0 ? s.sliding_window : 4096)));
  if (s.attn_softcap > 0.0f || a == "gemma2")
    md.set(a + ".attn_logit_softcapping", GgufValue::from_f32(s.attn_softcap > 0.0f ? s.attn_softcap : 50.0f));
  if (s.final_softcap > 0.0f || a == "gemma2")
    md.set(a + ".final_logit_softcapping", GgufValue::from_f32(s.final_softcap > 0.0f ? s.final_softcap : 30.0f));
  if (s.n_rot > 0) {
    if (s.n_rot > D || s.n_rot % 2 != 0)
      return make_error("rotary dimensions {} must be even and at most the head size {}", s.n_rot, D);
    md.set(a + ".rope.dimension_count", GgufValue::from_u32(static_cast<uint32_t>(s.n_rot)));
  }
  if (s.longrope_orig_ctx > 0) {
    if (!arch->fused) return make_error("LongRoPE factors are for phi3, not {}", a);
    const double orig = s.longrope_orig_ctx, ratio = static_cast<double>(s.n_ctx) / orig;
    md.set(a + ".rope.scaling.original_context_length", GgufValue::from_u32(static_cast<uint32_t>(orig)));
    md.set(a + ".rope.scaling.attn_factor",
           GgufValue::from_f32(ratio > 1.0 ? static_cast<float>(std::sqrt(1.0 + std::log(ratio) / std::log(orig)))
                                           : 1.0f));
  }
  if (!s.rope_scaling.empty()) {
    md.set(a + ".rope.scaling.type", GgufValue::from_string(s.rope_scaling));
    md.set(a + ".rope.scaling.factor", GgufValue::from_f32(s.rope_factor));
    if (s.rope_orig_ctx > 0)
      md.set(a + ".rope.scaling.original_context_length", GgufValue::from_u32(static_cast<uint32_t>(s.rope_orig_ctx)));
    if (s.rope_attn_factor != 1.0f) md.set(a + ".rope.scaling.attn_factor", GgufValue::from_f32(s.rope_attn_factor));
  }

  if (arch->gemma4) {
    EDGELM_TRY_STATUS(add_synthetic_gemma4(file, s, n_vocab));
    return file;
  }

  // Scales like an initialized transformer: 1/sqrt(fan_in) keeps activations O(1).
  const float se = 1.0f / std::sqrt(static_cast<float>(E)), sf = 1.0f / std::sqrt(static_cast<float>(F));
  Builder b(file, s.seed, s.weight_type);
  const float sq = 1.0f / std::sqrt(static_cast<float>(Q));
  b.add("token_embd.weight", E, n_vocab, 1.0f);
  b.add("output_norm.weight", E, 0, 0.1f, 1.0f);
  if (!s.tied_output) b.add("output.weight", E, n_vocab, se);
  if (s.llama3_factor > 0.0f) add_llama3_rope_freqs(file, D, rope_base, s.llama3_factor, s.llama3_orig_ctx);
  if (s.longrope_orig_ctx > 0)
    add_longrope_factors(file, (s.n_rot > 0 ? s.n_rot : D) / 2, static_cast<double>(s.n_ctx) / s.longrope_orig_ctx);
  const bool hybrid = arch->gated_deltanet;
  if (hybrid) EDGELM_TRY_STATUS(add_deltanet_metadata(md, s, D));
  for (int32_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    b.add(p + "attn_norm.weight", E, 0, 0.1f, 1.0f);
    if (hybrid && (l + 1) % s.full_attn_interval != 0) {
      add_deltanet_layer(file, b, p, s);
    } else if (arch->fused) {
      b.add(p + "attn_qkv.weight", E, Q + 2 * KV, se);
    } else {
      b.add(p + "attn_q.weight", E, hybrid ? 2 * Q : Q, se);  // qwen35: each head's Q rows, then its gate rows
      b.add(p + "attn_k.weight", E, KV, se);
      b.add(p + "attn_v.weight", E, KV, se);
    }
    const bool attends = !(hybrid && (l + 1) % s.full_attn_interval != 0);
    if (attends && arch->qkv_bias) {
      b.add(p + "attn_q.bias", Q, 0, 0.5f);
      b.add(p + "attn_k.bias", KV, 0, 0.5f);
      b.add(p + "attn_v.bias", KV, 0, 0.5f);
    }
    if (attends && arch->qk_norm) {
      b.add(p + "attn_q_norm.weight", D, 0, 0.1f, 1.0f);
      b.add(p + "attn_k_norm.weight", D, 0, 0.1f, 1.0f);
    }
    if (attends) b.add(p + "attn_output.weight", Q, E, sq);
    if (arch->post_norms) b.add(p + "post_attention_norm.weight", E, 0, 0.1f, 1.0f);
    b.add(p + (hybrid ? "post_attention_norm.weight" : "ffn_norm.weight"), E, 0, 0.1f, 1.0f);
    if (arch->fused) {
      b.add(p + "ffn_up.weight", E, 2 * F, se);  // gate rows, then up rows
    } else {
      b.add(p + "ffn_gate.weight", E, F, se);
      b.add(p + "ffn_up.weight", E, F, se);
    }
    b.add(p + "ffn_down.weight", F, E, sf);
    if (arch->post_norms) b.add(p + "post_ffw_norm.weight", E, 0, 0.1f, 1.0f);
  }
  for (int32_t l = s.n_layer; l < s.n_layer + n_nextn; ++l) {  // the MTP blocks (SyntheticSpec::n_nextn)
    const std::string p = "blk." + std::to_string(l) + ".";
    b.add(p + "attn_norm.weight", E, 0, 0.1f, 1.0f);
    b.add(p + "attn_q.weight", E, 2 * Q, se);
    b.add(p + "attn_k.weight", E, KV, se);
    b.add(p + "attn_v.weight", E, KV, se);
    b.add(p + "attn_q_norm.weight", D, 0, 0.1f, 1.0f);
    b.add(p + "attn_k_norm.weight", D, 0, 0.1f, 1.0f);
    b.add(p + "attn_output.weight", Q, E, sq);
    b.add(p + "post_attention_norm.weight", E, 0, 0.1f, 1.0f);
    b.add(p + "ffn_gate.weight", E, F, se);
    b.add(p + "ffn_up.weight", E, F, se);
    b.add(p + "ffn_down.weight", F, E, sf);
    b.add(p + "nextn.eh_proj.weight", 2 * E, E, 1.0f / std::sqrt(static_cast<float>(2 * E)));
    b.add(p + "nextn.enorm.weight", E, 0, 0.1f, 1.0f);
    b.add(p + "nextn.hnorm.weight", E, 0, 0.1f, 1.0f);
    b.add(p + "nextn.shared_head_norm.weight", E, 0, 0.1f, 1.0f);
  }
  EDGELM_TRY_STATUS(add_synthetic_embedding_parts(file, s, n_vocab));
  return file;
}

}  // namespace edgelm::model
