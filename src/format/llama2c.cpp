#include "format/llama2c.h"

#include <cstring>

#include "core/mmap_file.h"

namespace edgelm::format {
namespace {

// Generous bounds that no real llama2.c model comes near; beyond them a header is corrupt
// (or not a checkpoint at all), and we say so instead of computing absurd sizes.
constexpr int32_t kMaxDim = 1 << 16;
constexpr int32_t kMaxLayers = 1024;
constexpr int32_t kMaxVocab = 1 << 22;
constexpr int32_t kMaxSeqLen = 1 << 22;

Status validate_header(const Llama2cHeader& h, const std::string& path) {
  const int32_t vocab = h.vocab_size < 0 ? -h.vocab_size : h.vocab_size;
  auto bad = [&](const char* what, int32_t v) {
    return make_error("{}: neither a GGUF file nor a llama2.c checkpoint (header {} = {} is out of range)", path, what, v);
  };
  if (h.dim <= 0 || h.dim > kMaxDim) return bad("dim", h.dim);
  if (h.hidden_dim <= 0 || h.hidden_dim > 16 * kMaxDim) return bad("hidden_dim", h.hidden_dim);
  if (h.n_layers <= 0 || h.n_layers > kMaxLayers) return bad("n_layers", h.n_layers);
  if (h.n_heads <= 0 || h.n_heads > h.dim || h.dim % h.n_heads != 0) return bad("n_heads", h.n_heads);
  if (h.n_kv_heads <= 0 || h.n_kv_heads > h.n_heads || h.n_heads % h.n_kv_heads != 0)
    return bad("n_kv_heads", h.n_kv_heads);
  if ((h.dim / h.n_heads) % 2 != 0) return bad("head size", h.dim / h.n_heads);
  if (vocab <= 0 || vocab > kMaxVocab) return bad("vocab_size", h.vocab_size);
  if (h.seq_len <= 0 || h.seq_len > kMaxSeqLen) return bad("seq_len", h.seq_len);
  return ok_status();
}

// Hands out consecutive f32 tensors from the weight area.
class WeightCursor {
 public:
  WeightCursor(const uint8_t* base) : p_(base) {}
  // One tensor of shape ne (GGUF order: ne[0] innermost) per layer, or one if n_layers == 0.
  void add(ModelFile& file, const std::string& name, int64_t ne0, int64_t ne1, int n_dims) {
    TensorInfo t;
    t.name = name;
    t.type = DType::f32;
    t.n_dims = n_dims;
    t.ne = {ne0, ne1, 1, 1};
    t.n_bytes = static_cast<uint64_t>(ne0 * ne1) * sizeof(float);
    t.data = p_;
    p_ += t.n_bytes;
    file.tensors.push_back(std::move(t));
  }
  void skip(uint64_t n_floats) { p_ += n_floats * sizeof(float); }
  void add_per_layer(ModelFile& file, int n_layers, const char* suffix, int64_t ne0, int64_t ne1, int n_dims) {
    for (int l = 0; l < n_layers; ++l) add(file, "blk." + std::to_string(l) + "." + suffix, ne0, ne1, n_dims);
  }

 private:
  const uint8_t* p_;
};

uint64_t expected_floats(const Llama2cHeader& h) {
  const uint64_t dim = h.dim, hid = h.hidden_dim, L = h.n_layers;
  const uint64_t vocab = h.vocab_size < 0 ? -static_cast<int64_t>(h.vocab_size) : h.vocab_size;
  const uint64_t head = dim / h.n_heads, kv_dim = head * h.n_kv_heads;
  uint64_t n = vocab * dim;                        // token embedding
  n += L * dim * 2;                                // rms_att, rms_ffn
  n += L * dim * dim * 2 + L * kv_dim * dim * 2;   // wq, wo, wk, wv
  n += L * hid * dim * 3;                          // w1, w2, w3
  n += dim;                                        // rms_final
  n += static_cast<uint64_t>(h.seq_len) * head;    // freq_cis real + imag
  if (h.vocab_size < 0) n += vocab * dim;          // wcls
  return n;
}

void set_model_metadata(const Llama2cHeader& h, GgufMetadata& md) {
  md.set("general.architecture", GgufValue::from_string("llama"));
  md.set("general.name", GgufValue::from_string("llama2.c"));
  md.set("llama.context_length", GgufValue::from_u32(static_cast<uint32_t>(h.seq_len)));
  md.set("llama.embedding_length", GgufValue::from_u32(static_cast<uint32_t>(h.dim)));
  md.set("llama.feed_forward_length", GgufValue::from_u32(static_cast<uint32_t>(h.hidden_dim)));
  md.set("llama.block_count", GgufValue::from_u32(static_cast<uint32_t>(h.n_layers)));
  md.set("llama.attention.head_count", GgufValue::from_u32(static_cast<uint32_t>(h.n_heads)));
  md.set("llama.attention.head_count_kv", GgufValue::from_u32(static_cast<uint32_t>(h.n_kv_heads)));
  md.set("llama.rope.dimension_count", GgufValue::from_u32(static_cast<uint32_t>(h.dim / h.n_heads)));
  md.set("llama.attention.layer_norm_rms_epsilon", GgufValue::from_f32(1e-5f));  // llama2.c's constant
  md.set("llama.rope.freq_base", GgufValue::from_f32(10000.0f));
}

}  // namespace

Status parse_llama2c_tokenizer(const uint8_t* data, size_t size, GgufMetadata& md) {
  size_t pos = 0;
  auto take = [&](void* dst, size_t n) {
    if (size - pos < n) return false;
    std::memcpy(dst, data + pos, n);
    pos += n;
    return true;
  };
  int32_t max_len = 0;
  if (!take(&max_len, 4) || max_len <= 0) return make_error("tokenizer.bin is truncated or has a bad header");
  GgufValue::Array tokens, scores, types;
  while (pos < size) {
    float score = 0;
    int32_t len = 0;
    if (!take(&score, 4) || !take(&len, 4))
      return make_error("tokenizer.bin is truncated in the entry of token {}", tokens.size());
    if (len < 0 || len > max_len) return make_error("tokenizer.bin: token {} has bad length {}", tokens.size(), len);
    if (static_cast<size_t>(len) > size - pos)
      return make_error("tokenizer.bin is truncated in the text of token {}", tokens.size());
    std::string text(reinterpret_cast<const char*>(data + pos), static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
    const size_t id = tokens.size();
    // llama2.c's export turns the dummy-prefix marker back into spaces and wraps BOS/EOS in
    // newlines; GGUF keeps SentencePiece's own spelling.
    int32_t type = 1;  // normal
    unsigned byte = 0;
    char tail = 0;
    if (id == 0) {
      type = 2;  // unknown
    } else if (id == 1 || id == 2) {
      text = id == 1 ? "<s>" : "</s>";
      type = 3;  // control
    } else if (text.size() == 6 && std::sscanf(text.c_str(), "<0x%2X%c", &byte, &tail) == 2 && tail == '>') {
      type = 6;  // byte
    } else {
      std::string escaped;
      for (const char c : text) escaped += c == ' ' ? std::string("\xe2\x96\x81") : std::string(1, c);
      text = std::move(escaped);
    }
    tokens.push_back(GgufValue::from_string(std::move(text)));
    scores.push_back(GgufValue::from_f32(score));
    types.push_back(GgufValue::from_i32(type));
  }
  if (tokens.size() < 3) return make_error("tokenizer.bin holds {} tokens; need at least <unk>, <s>, </s>", tokens.size());
  md.set("tokenizer.ggml.model", GgufValue::from_string("llama"));
  md.set("tokenizer.ggml.tokens", GgufValue::from_array(GgufType::string, std::move(tokens)));
  md.set("tokenizer.ggml.scores", GgufValue::from_array(GgufType::f32, std::move(scores)));
  md.set("tokenizer.ggml.token_type", GgufValue::from_array(GgufType::i32, std::move(types)));
  md.set("tokenizer.ggml.unknown_token_id", GgufValue::from_u32(0));
  md.set("tokenizer.ggml.bos_token_id", GgufValue::from_u32(1));
  md.set("tokenizer.ggml.eos_token_id", GgufValue::from_u32(2));
  return ok_status();
}

Result<ModelFile> read_llama2c(const std::string& path, const std::string& tokenizer_path, const LoadOptions& options) {
  EDGELM_TRY(MappedFile mapped, MappedFile::open(path, options.no_mmap ? FileAccess::read : FileAccess::map));
  auto map = std::make_shared<MappedFile>(std::move(mapped));
  Llama2cHeader h;
  static_assert(sizeof(Llama2cHeader) == 7 * sizeof(int32_t));
  if (map->size() < sizeof h) return make_error("{}: neither a GGUF file nor a llama2.c checkpoint (only {} bytes)", path, map->size());
  std::memcpy(&h, map->data(), sizeof h);
  if (std::memcmp(map->data(), "ak42", 4) == 0)
    return make_error("{}: llama2.c version-1/2 exports are not supported; export with the legacy (v0) format", path);
  EDGELM_TRY_STATUS(validate_header(h, path));
  const uint64_t want = sizeof h + expected_floats(h) * sizeof(float);
  if (map->size() != want) {
    return make_error("{}: llama2.c checkpoint size mismatch: header (dim {}, layers {}, vocab {}) implies {} bytes, file has {}",
                      path, h.dim, h.n_layers, h.vocab_size, want, map->size());
  }

  ModelFile file;
  set_model_metadata(h, file.metadata);
  const int64_t dim = h.dim, hid = h.hidden_dim, L = h.n_layers;
  const int64_t vocab = h.vocab_size < 0 ? -static_cast<int64_t>(h.vocab_size) : h.vocab_size;
  const int64_t head = dim / h.n_heads, kv_dim = head * h.n_kv_heads;
  WeightCursor w(map->data() + sizeof h);
  w.add(file, "token_embd.weight", dim, vocab, 2);
  w.add_per_layer(file, static_cast<int>(L), "attn_norm.weight", dim, 1, 1);
  w.add_per_layer(file, static_cast<int>(L), "attn_q.weight", dim, dim, 2);
  w.add_per_layer(file, static_cast<int>(L), "attn_k.weight", dim, kv_dim, 2);
  w.add_per_layer(file, static_cast<int>(L), "attn_v.weight", dim, kv_dim, 2);
  w.add_per_layer(file, static_cast<int>(L), "attn_output.weight", dim, dim, 2);
  w.add_per_layer(file, static_cast<int>(L), "ffn_norm.weight", dim, 1, 1);
  w.add_per_layer(file, static_cast<int>(L), "ffn_gate.weight", dim, hid, 2);
  w.add_per_layer(file, static_cast<int>(L), "ffn_down.weight", hid, dim, 2);
  w.add_per_layer(file, static_cast<int>(L), "ffn_up.weight", dim, hid, 2);
  w.add(file, "output_norm.weight", dim, 1, 1);
  w.skip(static_cast<uint64_t>(h.seq_len) * head);  // freq_cis_real + freq_cis_imag
  if (h.vocab_size < 0) w.add(file, "output.weight", dim, vocab, 2);
  file.keep_alive(map);

  if (!tokenizer_path.empty()) {
    EDGELM_TRY(MappedFile tok, MappedFile::open(tokenizer_path));
    auto st = parse_llama2c_tokenizer(tok.data(), tok.size(), file.metadata);
    if (!st.ok()) return make_error("{}: {}", tokenizer_path, st.error().message);
    const auto* tokens = *file.metadata.get_array("tokenizer.ggml.tokens");
    if (static_cast<int64_t>(tokens->size()) != vocab) {
      return make_error("vocab/model mismatch: '{}' has {} tokens but the model '{}' has a vocabulary of {}",
                        tokenizer_path, tokens->size(), path, vocab);
    }
  }
  return file;
}

}  // namespace edgelm::format
