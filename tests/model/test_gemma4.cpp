// Gemma 4 (text) against an independent double-precision forward written here from the published
// definition (Hugging Face Gemma4 text model / llama.cpp's gemma4 graph), not from forward.cpp:
// the whole sequence recomputed from scratch per step with no KV cache, tensors read by name
// from the file, RoPE as explicit rotations of (i, i + n_rot / 2) pairs with the proportional
// global rotation applied as "the first partial * head_dim / 2 pairs turn, the rest do not" (the
// file's 1e30 factors are not read), shared-KV layers attending over the K/V computed by the
// last earlier layer of their kind. Each modelled feature is switched off in turn and the test
// checks the mismatch that follows, so every feature is shown to matter to the comparison.
// Also: the config of E2B's and E4B's metadata, load errors naming keys and tensors, KV memory
// of shared layers (none) and the per-layer embedding table read from the file mapping.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "format/gguf_reader.h"
#include "format/gguf_writer.h"
#include "kernels/dequantize.h"
#include "kv/kv_store.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "support/test_data.h"

namespace edgelm::model {
namespace {

using format::GgufType;
using format::GgufValue;
using Vec = std::vector<double>;

// What the naive forward models; each flag can be turned off to show that it matters.
struct Knobs {
  bool ple = true;           // per-layer embeddings
  bool v_norm = true;        // unweighted RMSNorm of V
  bool shared_kv = true;     // shared layers read the source layer's K/V (off: compute their own... none: use layer 0)
  bool proportional = true;  // global layers turn only partial * head_dim / 2 pairs (off: all)
  bool out_scale = true;     // layer_output_scale
  bool window = true;        // local layers see their window only
  bool local_base = true;    // local layers rotate with base 1e4 (off: the global 1e6)
  bool unscaled = true;      // attention scores not scaled (off: 1 / sqrt(head_dim))
  bool softcap = true;       // final logits soft-capped at 30
};

class NaiveGemma4 {
 public:
  NaiveGemma4(const format::ModelFile& f, const SyntheticSpec& s, Knobs k) : f_(f), s_(s), k_(k) {}

  // Logits of the last token of `tokens`.
  Vec logits(const std::vector<int>& tokens) const {
    const int E = s_.n_embd, L = s_.n_layer, P = s_.n_embd_ple, T = static_cast<int>(tokens.size());
    const int first_shared = L - s_.n_shared_kv;
    const Vec embd = mat("token_embd.weight");
    std::vector<Vec> x(static_cast<size_t>(T), Vec(static_cast<size_t>(E)));
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < E; ++i) x[t][i] = embd[static_cast<size_t>(tokens[t]) * E + i] * std::sqrt(double(E));
    // Per-layer inputs: [t][l * P + j].
    std::vector<Vec> ple(static_cast<size_t>(T));
    if (k_.ple && P > 0) {
      const Vec table = mat("per_layer_token_embd.weight"), pn = mat("per_layer_proj_norm.weight");
      for (int t = 0; t < T; ++t) {
        Vec proj = linear(x[t], "per_layer_model_proj.weight");
        ple[t].resize(proj.size());
        for (int l = 0; l < L; ++l) {
          Vec part(proj.begin() + l * P, proj.begin() + (l + 1) * P);
          for (double& v : part) v /= std::sqrt(double(E));
          part = rms(part, &pn);
          for (int j = 0; j < P; ++j) {
            const double tok = table[(static_cast<size_t>(tokens[t]) * L + l) * P + j] * std::sqrt(double(P));
            ple[t][l * P + j] = (part[j] + tok) / std::sqrt(2.0);
          }
        }
      }
    }
    std::vector<std::vector<Vec>> K(L), V(L);  // [layer][t] K/V rows of layers with their own
    for (int l = 0; l < L; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      const bool local = l % s_.swa_period != s_.swa_period - 1;
      const int D = local ? s_.head_dim_swa : s_.head_dim, H = s_.n_head, Hkv = s_.n_head_kv;
      const int n_turn = local || !k_.proportional ? D / 2 : int(s_.partial_rotary * D / 2);
      const double base = local && k_.local_base ? 1e4 : 1e6;
      const Vec an = mat(p + "attn_norm.weight"), qn = mat(p + "attn_q_norm.weight");
      std::vector<Vec> q(T);
      int src = l;
      if (l >= first_shared) {
        src = -1;
        for (int j = first_shared - 1; j >= 0 && src < 0; --j)
          if ((j % s_.swa_period != s_.swa_period - 1) == local) src = j;
        if (!k_.shared_kv) src = local ? 0 : s_.swa_period - 1;  // the first layer of its kind instead
      }
      for (int t = 0; t < T; ++t) {
        const Vec xn = rms(x[t], &an);
        q[t] = rope(heads_rms(linear(xn, p + "attn_q.weight"), H, D, &qn), H, D, t, n_turn, base);
        if (l < first_shared) {
          const Vec kn = mat(p + "attn_k_norm.weight");
          const Vec kraw = linear(xn, p + "attn_k.weight");
          Vec v = f_.find_tensor(p + "attn_v.weight") != nullptr ? linear(xn, p + "attn_v.weight") : kraw;
          K[l].push_back(rope(heads_rms(kraw, Hkv, D, &kn), Hkv, D, t, n_turn, base));
          V[l].push_back(k_.v_norm ? heads_rms(v, Hkv, D, nullptr) : v);
        }
      }
      const Vec on = mat(p + "post_attention_norm.weight");
      const int window = s_.sliding_window;
      for (int t = 0; t < T; ++t) {
        Vec att(static_cast<size_t>(H) * D, 0.0);
        for (int h = 0; h < H; ++h) {
          const int kh = h / (H / Hkv);
          std::vector<double> w;
          double mx = -1e300;
          for (int u = 0; u <= t; ++u) {
            double sc = 0;
            for (int i = 0; i < D; ++i) sc += q[t][h * D + i] * K[src][u][kh * D + i];
            if (!k_.unscaled) sc /= std::sqrt(double(D));
            if (local && k_.window && t - u >= window) sc = -1e300;
            w.push_back(sc);
            mx = std::max(mx, sc);
          }
          double sum = 0;
          for (double& v : w) sum += (v = v <= -1e299 ? 0.0 : std::exp(v - mx));
          for (int u = 0; u <= t; ++u)
            for (int i = 0; i < D; ++i) att[h * D + i] += w[u] / sum * V[src][u][kh * D + i];
        }
        const Vec o = rms(linear(att, p + "attn_output.weight"), &on);
        for (int i = 0; i < E; ++i) x[t][i] += o[i];
        // GeGLU feed-forward with post-norm.
        const Vec fn = mat(p + "ffn_norm.weight"), pf = mat(p + "post_ffw_norm.weight");
        const Vec xn = rms(x[t], &fn);
        Vec g = linear(xn, p + "ffn_gate.weight");
        const Vec up = linear(xn, p + "ffn_up.weight");
        for (size_t i = 0; i < g.size(); ++i) g[i] = gelu(g[i]) * up[i];
        const Vec d = rms(linear(g, p + "ffn_down.weight"), &pf);
        for (int i = 0; i < E; ++i) x[t][i] += d[i];
        if (k_.ple && P > 0) {
          Vec gate = linear(x[t], p + "inp_gate.weight");
          for (int j = 0; j < P; ++j) gate[j] = gelu(gate[j]) * ple[t][l * P + j];
          const Vec pn = mat(p + "post_norm.weight");
          const Vec e = rms(linear(gate, p + "proj.weight"), &pn);
          for (int i = 0; i < E; ++i) x[t][i] += e[i];
        }
        if (k_.out_scale && f_.find_tensor(p + "layer_output_scale.weight") != nullptr) {
          const double sc = mat(p + "layer_output_scale.weight")[0];
          for (double& v : x[t]) v *= sc;
        }
      }
    }
    const Vec onorm = mat("output_norm.weight");
    Vec z = linear(rms(x[T - 1], &onorm),
                   f_.find_tensor("output.weight") != nullptr ? "output.weight" : "token_embd.weight");
    if (k_.softcap)
      for (double& v : z) v = 30.0 * std::tanh(v / 30.0);
    return z;
  }

 private:
  Vec mat(const std::string& name) const {
    const format::TensorInfo* t = f_.find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    if (t == nullptr) return {};
    std::vector<float> f(static_cast<size_t>(t->n_elements()));
    kernels::to_float(t->type, t->data, f.data(), t->n_elements());
    return Vec(f.begin(), f.end());
  }
  Vec linear(const Vec& x, const std::string& name) const {
    const Vec w = mat(name);
    Vec y(w.size() / x.size(), 0.0);
    for (size_t r = 0; r < y.size(); ++r)
      for (size_t i = 0; i < x.size(); ++i) y[r] += w[r * x.size() + i] * x[i];
    return y;
  }
  static Vec rms(const Vec& x, const Vec* w) {
    double ms = 0;
    for (double v : x) ms += v * v;
    const double sc = 1.0 / std::sqrt(ms / double(x.size()) + 1e-6);
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * sc * (w != nullptr ? (*w)[i] : 1.0);
    return y;
  }
  static Vec heads_rms(const Vec& x, int n, int D, const Vec* w) {
    Vec y(x.size());
    for (int h = 0; h < n; ++h) {
      const Vec part = rms(Vec(x.begin() + h * D, x.begin() + (h + 1) * D), w);
      std::copy(part.begin(), part.end(), y.begin() + h * D);
    }
    return y;
  }
  // NEOX layout over the whole head: pair (i, i + D / 2) turns by pos * base^(-2i / D) for i < n_turn.
  static Vec rope(Vec x, int n, int D, int pos, int n_turn, double base) {
    for (int h = 0; h < n; ++h)
      for (int i = 0; i < n_turn; ++i) {
        const double th = pos * std::pow(base, -2.0 * i / D);
        double& a = x[h * D + i];
        double& b = x[h * D + i + D / 2];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(th) - b0 * std::sin(th);
        b = a0 * std::sin(th) + b0 * std::cos(th);
      }
    return x;
  }
  static double gelu(double v) {
    return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / 3.141592653589793) * (v + 0.044715 * v * v * v)));
  }

  const format::ModelFile& f_;
  const SyntheticSpec& s_;
  Knobs k_;
};

SyntheticSpec tiny(uint64_t seed) {
  SyntheticSpec s;
  EXPECT_TRUE(apply_synthetic_shape(s, "gemma4-tiny").ok());
  s.seed = seed;
  return s;
}

// max |a - b| / max |b| of the logits of every prefix of `tokens`, fed one token at a time
// (first_chunk tokens at once first) through Model::forward, against the naive forward.
double max_rel_error(const Model& m, const SyntheticSpec& s, const Knobs& k, const std::vector<int>& tokens,
                     int first_chunk = 1) {
  ThreadPool pool(2);
  KvCache cache(m.config(), 64);
  NaiveGemma4 naive(m.file(), s, k);
  std::vector<float> logits(static_cast<size_t>(m.config().n_vocab));
  double worst = 0;
  for (size_t t = static_cast<size_t>(first_chunk) - 1; t < tokens.size(); ++t) {
    const size_t b = t == static_cast<size_t>(first_chunk) - 1 ? 0 : t;
    EXPECT_TRUE(m.forward(std::span(&tokens[b], t + 1 - b), cache, logits, pool).ok());
    const Vec ref = naive.logits(std::vector<int>(tokens.begin(), tokens.begin() + static_cast<long>(t) + 1));
    double max_ref = 0, max_err = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      max_ref = std::max(max_ref, std::abs(ref[i]));
      max_err = std::max(max_err, std::abs(ref[i] - logits[i]));
    }
    EXPECT_GT(max_ref, 0.1);
    worst = std::max(worst, max_err / max_ref);
  }
  return worst;
}

std::vector<int> prompt(int n, int n_vocab) {
  std::vector<int> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + 11) % n_vocab);
  return t;
}

std::unique_ptr<Model> load(const SyntheticSpec& s) {
  auto f = make_synthetic_model(s);
  EXPECT_TRUE(f.ok()) << f.error().message;
  auto m = Model::load(std::move(f).value());
  EXPECT_TRUE(m.ok()) << m.error().message;
  return std::move(m).value();
}

// The reference forward equals the naive one to 1e-4 over 14 tokens (window 8), token by token
// and after a 10-token prefill; each feature switched off in the naive forward breaks it.
TEST(Gemma4, ForwardMatchesIndependentComputation) {
  const SyntheticSpec s = tiny(41);
  const auto m = load(s);
  const auto tokens = prompt(14, s.n_vocab);
  const double err = max_rel_error(*m, s, {}, tokens);
  std::printf("gemma4-tiny: max relative logit error vs naive %.3g\n", err);
  EXPECT_LT(err, 1e-4);
  EXPECT_LT(max_rel_error(*m, s, {}, tokens, 10), 1e-4) << "prefill of 10, then one by one";
  const std::vector<std::pair<const char*, std::function<void(Knobs&)>>> ablations = {
      {"per-layer embeddings", [](Knobs& k) { k.ple = false; }},
      {"V norm", [](Knobs& k) { k.v_norm = false; }},
      {"shared-KV sources", [](Knobs& k) { k.shared_kv = false; }},
      {"proportional RoPE", [](Knobs& k) { k.proportional = false; }},
      {"layer output scale", [](Knobs& k) { k.out_scale = false; }},
      {"sliding window", [](Knobs& k) { k.window = false; }},
      {"local RoPE base", [](Knobs& k) { k.local_base = false; }},
      {"unscaled scores", [](Knobs& k) { k.unscaled = false; }},
      {"final soft-cap", [](Knobs& k) { k.softcap = false; }},
  };
  for (const auto& [name, off] : ablations) {
    Knobs k;
    off(k);
    EXPECT_GT(max_rel_error(*m, s, k, tokens), 1e-3) << "without " << name << " the comparison must fail";
  }
}

// Without attn_v (V is K's projection, before K's norm and RoPE), without output scales, with
// a plain FFN and 2 shared layers; and F16 weights (whose kernels round the activations to F16:
// 3e-3, as the other architectures' F16 checks).
TEST(Gemma4, VariantsMatchIndependentComputation) {
  SyntheticSpec s = tiny(43);
  s.v_weights = false;
  s.layer_output_scale = false;
  s.double_wide_ffn = false;
  s.n_shared_kv = 2;
  s.sliding_window = 5;
  EXPECT_LT(max_rel_error(*load(s), s, {}, prompt(12, s.n_vocab)), 1e-4);
  SyntheticSpec h = tiny(45);
  h.weight_type = DType::f16;
  EXPECT_LT(max_rel_error(*load(h), h, {}, prompt(10, h.n_vocab)), 3e-3);
}

// The metadata of E2B and E4B as the reference converter writes it gives their published shape.
format::GgufMetadata published_metadata(bool e2b) {
  format::GgufMetadata md;
  const std::string a = "gemma4.";
  const int L = e2b ? 35 : 42, period = e2b ? 5 : 6, shared = e2b ? 20 : 18;
  md.set("general.architecture", GgufValue::from_string("gemma4"));
  auto u = [&](const std::string& k, uint32_t v) { md.set(a + k, GgufValue::from_u32(v)); };
  u("block_count", static_cast<uint32_t>(L));
  u("context_length", 131072);
  u("embedding_length", e2b ? 1536 : 2560);
  u("attention.head_count", 8);
  u("attention.head_count_kv", e2b ? 1 : 2);
  u("attention.key_length", 512);
  u("attention.value_length", 512);
  u("attention.key_length_swa", 256);
  u("attention.value_length_swa", 256);
  u("rope.dimension_count", 512);
  u("rope.dimension_count_swa", 256);
  u("attention.sliding_window", 512);
  u("attention.shared_kv_layers", static_cast<uint32_t>(shared));
  u("embedding_length_per_layer_input", 256);
  md.set(a + "rope.freq_base", GgufValue::from_f32(1e6f));
  md.set(a + "rope.freq_base_swa", GgufValue::from_f32(1e4f));
  md.set(a + "final_logit_softcapping", GgufValue::from_f32(30.0f));
  md.set(a + "attention.layer_norm_rms_epsilon", GgufValue::from_f32(1e-6f));
  GgufValue::Array pattern, ffn;
  for (int l = 0; l < L; ++l) {
    pattern.push_back(GgufValue::from_bool(l % period != period - 1));
    ffn.push_back(GgufValue::from_u32(l >= L - shared ? 12288 : 6144));
  }
  md.set(a + "attention.sliding_window_pattern", GgufValue::from_array(GgufType::boolean, std::move(pattern)));
  if (e2b) {
    md.set(a + "feed_forward_length", GgufValue::from_array(GgufType::u32, std::move(ffn)));
  } else {
    u("feed_forward_length", 10240);
  }
  return md;
}

TEST(Gemma4, PublishedConfigs) {
  auto e2b = config_from_metadata(published_metadata(true));
  ASSERT_TRUE(e2b.ok()) << e2b.error().message;
  const ModelConfig& c = *e2b;
  EXPECT_EQ(c.n_layer, 35);
  EXPECT_EQ(c.n_kv_layers(), 15);
  EXPECT_EQ(c.head_dim, 512);
  EXPECT_EQ(c.layer_head_dim(0), 256);
  EXPECT_EQ(c.layer_head_dim(4), 512);
  EXPECT_TRUE(c.layer_is_local(0));
  EXPECT_FALSE(c.layer_is_local(14));
  EXPECT_EQ(c.layer_window(0), 512);
  EXPECT_EQ(c.layer_n_ff(14), 6144);
  EXPECT_EQ(c.layer_n_ff(15), 12288);
  EXPECT_EQ(c.n_ff, 12288);
  EXPECT_EQ(c.kv_layer(15), 13);  // local: the last local layer with K/V
  EXPECT_EQ(c.kv_layer(19), 14);  // global: the last global layer with K/V
  EXPECT_EQ(c.kv_layer(34), 14);
  EXPECT_FALSE(c.layer_has_kv(15));
  EXPECT_EQ(c.attn_scale, 1.0f);
  EXPECT_EQ(c.final_softcap, 30.0f);
  EXPECT_EQ(c.local_rope_base, 1e4f);
  EXPECT_EQ(c.rope_base, 1e6f);
  EXPECT_EQ(c.n_rot_swa, 256);
  EXPECT_EQ(c.n_embd_ple, 256);
  // 12 local layers of 1 x 256 and 3 global of 1 x 512 with K/V, f16: (12 * 256 + 3 * 512) * 2 * 2 bytes.
  EXPECT_EQ(kv::kv_bytes_per_token(c, kv::KvType::f16), size_t{(12 * 256 + 3 * 512) * 2 * 2});
  auto e4b = config_from_metadata(published_metadata(false));
  ASSERT_TRUE(e4b.ok()) << e4b.error().message;
  EXPECT_EQ(e4b->n_kv_layers(), 24);
  EXPECT_EQ(e4b->n_ff, 10240);
  EXPECT_EQ(e4b->kv_layer(24), 22);  // local
  EXPECT_EQ(e4b->kv_layer(29), 23);  // global
}

// Missing or unsupported keys and missing or unknown tensors are errors naming them.
TEST(Gemma4, LoadErrorsNameTheKeyOrTensor) {
  auto expect_error = [](format::GgufMetadata md, const std::string& key, const std::string& needle) {
    auto c = config_from_metadata(md);
    ASSERT_FALSE(c.ok()) << key;
    EXPECT_NE(c.error().message.find(needle), std::string::npos) << c.error().message;
  };
  for (const char* key : {"gemma4.embedding_length_per_layer_input", "gemma4.attention.key_length_swa",
                          "gemma4.attention.sliding_window_pattern", "gemma4.attention.sliding_window"}) {
    format::GgufMetadata md;
    const format::GgufMetadata full = published_metadata(true);
    for (const auto& [k, v] : full.entries())
      if (k != key) md.set(k, v);
    expect_error(md, key, key);
  }
  auto md = published_metadata(true);
  md.set("gemma4.expert_count", GgufValue::from_u32(128));
  expect_error(md, "expert_count", "expert_count");
  md = published_metadata(true);
  md.set("gemma4.attn_logit_softcapping", GgufValue::from_f32(50.0f));
  expect_error(md, "attn_logit_softcapping", "attn_logit_softcapping");
  md = published_metadata(true);
  md.set("gemma4.attention.value_length_swa", GgufValue::from_u32(128));
  expect_error(md, "value_length_swa", "value_length_swa");
  md = published_metadata(true);
  md.set("gemma4.attention.shared_kv_layers", GgufValue::from_u32(34));  // no global layer left before them
  expect_error(md, "shared_kv_layers", "shared_kv_layers");

  for (const char* tensor : {"per_layer_token_embd.weight", "blk.2.inp_gate.weight", "rope_freqs.weight",
                             "blk.0.attn_k_norm.weight", "blk.6.post_norm.weight"}) {
    auto f = make_synthetic_model(tiny(47));
    ASSERT_TRUE(f.ok());
    std::erase_if(f->tensors, [&](const format::TensorInfo& t) { return t.name == tensor; });
    auto m = Model::load(std::move(f).value());
    ASSERT_FALSE(m.ok()) << tensor;
    EXPECT_NE(m.error().message.find(tensor), std::string::npos) << m.error().message;
  }
  auto f = make_synthetic_model(tiny(47));
  ASSERT_TRUE(f.ok());
  format::TensorInfo extra = *f->find_tensor("blk.0.post_norm.weight");
  extra.name = "blk.0.altup_router.weight";
  f->tensors.push_back(extra);
  auto m = Model::load(std::move(f).value());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("blk.0.altup_router.weight"), std::string::npos) << m.error().message;
}

// Shared-KV layers take no KV memory: the store and the reference cache hold rows for the 4
// layers with K/V only (3 local of 2 x 16, 1 global of 2 x 32), and a model without sharing
// needs more.
TEST(Gemma4, SharedKvLayersTakeNoKvMemory) {
  const SyntheticSpec s = tiny(49);
  const auto m = load(s);
  const ModelConfig& c = m->config();
  ASSERT_EQ(c.n_kv_layers(), 4);
  const size_t per_token = (3 * 2 * 16 + 1 * 2 * 32) * 2 * sizeof(float);
  EXPECT_EQ(kv::kv_bytes_per_token(c, kv::KvType::f32), per_token);
  auto store = kv::KvStore::create(c, 8, 16, kv::KvType::f32);
  ASSERT_TRUE(store.ok()) << store.error().message;
  EXPECT_EQ(store->n_bytes(), per_token * 8 * 16);
  EXPECT_EQ(store->n_layer(), 4);
  EXPECT_EQ(KvCache(c, 10).n_bytes(), per_token * 10);
  SyntheticSpec unshared = s;
  unshared.n_shared_kv = 0;
  EXPECT_GT(kv::kv_bytes_per_token(load(unshared)->config(), kv::KvType::f32), per_token);
}

// The start and end of the mapping of /proc/self/maps that holds `p`, and its path.
std::string mapping_path_of(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &lo, &hi) != 2 || a < lo || a >= hi) continue;
    const auto slash = line.find('/');
    return slash == std::string::npos ? "" : line.substr(slash);
  }
  return "";
}

// The per-layer embedding table is used in place in the file mapping, never packed or
// converted, and not counted in the bytes a decode step streams.
TEST(Gemma4, PerLayerEmbeddingTableStaysInTheFileMapping) {
  test::TempDir dir;
  auto f = make_synthetic_model(tiny(51));
  ASSERT_TRUE(f.ok());
  uint64_t all_bytes = 0, table_bytes = 0;
  for (const auto& t : f->tensors) {
    all_bytes += t.n_bytes;
    if (t.name == "per_layer_token_embd.weight") table_bytes = t.n_bytes;
  }
  const std::string path = dir.file("g4.gguf");
  ASSERT_TRUE(format::write_gguf(path, *f).ok());
  auto read = format::read_gguf(path);
  ASSERT_TRUE(read.ok()) << read.error().message;
  auto m = Model::load(std::move(read).value());
  ASSERT_TRUE(m.ok()) << m.error().message;
  const Weights& w = (*m)->weights();
  const format::TensorInfo* t = (*m)->file().find_tensor("per_layer_token_embd.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(w.ple_token_embd.data, t->data);
  EXPECT_EQ(w.ple_token_embd.packed, nullptr);
  EXPECT_NE(mapping_path_of(w.ple_token_embd.data).find("g4.gguf"), std::string::npos)
      << "the table must be read from the file mapping";
  EXPECT_EQ(w.n_bytes_file, all_bytes);
  EXPECT_EQ(w.n_bytes_per_token, all_bytes - table_bytes);  // tied: token_embd counts once, as the output
}

}  // namespace
}  // namespace edgelm::model
