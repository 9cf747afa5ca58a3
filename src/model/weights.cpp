#include "model/weights.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string_view>

#include "core/huge_pages.h"
#include "kernels/dequantize.h"

namespace edgelm::model {

Result<const float*> vector_as_f32(const format::TensorInfo& t, int64_t n,
                                   std::vector<std::unique_ptr<float[]>>& owned) {
  if (t.type == DType::f32 && reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0)
    return reinterpret_cast<const float*>(t.data);
  if (!kernels::can_dequantize(t.type))
    return make_error("tensor '{}' has type {}, which this build cannot convert", t.name, dtype_name(t.type));
  auto buf = std::make_unique<float[]>(static_cast<size_t>(n));
  kernels::to_float(t.type, t.data, buf.get(), n);
  owned.push_back(std::move(buf));
  return static_cast<const float*>(owned.back().get());
}

namespace {

class Loader {
 public:
  Loader(const format::ModelFile& file, Weights& w) : file_(file), w_(w) {}

  // The tensor `name` with GGUF shape {ne0, ne1}; optional tensors that are absent give null.
  Result<const format::TensorInfo*> find(const std::string& name, int64_t ne0, int64_t ne1, bool required) {
    const format::TensorInfo* t = file_.find_tensor(name);
    if (t == nullptr) {
      if (!required) return static_cast<const format::TensorInfo*>(nullptr);
      return make_error("tensor '{}' is missing from the model file", name);
    }
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
      const std::string want = ne1 == 1 ? fmt::format("[{}]", ne0) : fmt::format("[{}, {}]", ne0, ne1);
      return make_error("tensor '{}' has shape {}, expected {}", name, t->shape_string(), want);
    }
    w_.n_bytes_file += t->n_bytes;
    used_.insert(t->name);
    return t;
  }

  // Error naming the first tensor of the file that no find() asked for.
  Status check_all_used(std::string_view arch) const {
    for (const format::TensorInfo& t : file_.tensors)
      if (used_.count(t.name) == 0)
        return make_error(
            "tensor '{}' is not used by architecture '{}' (a forward without it would compute another model)", t.name,
            arch);
    return ok_status();
  }

  // A [rows = ne1, cols = ne0] matrix used in its stored type.
  Result<WeightMatrix> matrix(const std::string& name, int64_t ne0, int64_t ne1, bool required = true) {
    EDGELM_TRY(const format::TensorInfo* t, find(name, ne0, ne1, required));
    if (t == nullptr) return WeightMatrix{};
    if (!kernels::can_matmul(t->type)) {
      return make_error("tensor '{}' has type {}, which this build cannot compute with", name, dtype_name(t->type));
    }
    // A decode step reads every matrix whole except the embedding tables (one row per token).
    if (name != "token_embd.weight" && name != "per_layer_token_embd.weight") w_.n_bytes_per_token += t->n_bytes;
    return WeightMatrix{t->type, ne1, ne0, t->data, dtype_row_bytes(t->type, ne0)};
  }

  // A [n] vector (or a small [ne0, ne1] table read whole, like convolution taps) as float32.
  Result<const float*> vector(const std::string& name, int64_t n, bool required = true, int64_t ne1 = 1) {
    EDGELM_TRY(const format::TensorInfo* t, find(name, n, ne1, required));
    if (t == nullptr) return static_cast<const float*>(nullptr);
    w_.n_bytes_per_token += t->n_bytes;
    if (t->type == DType::f32 && t->n_bytes <= kCopiedVectorBytes) {
      // Norm weights and biases are copied out of the file: read from the mapping every step,
      // each would fault its 4 KiB page plus the kernel's fault-around window (64 KiB) of the
      // neighbouring matrices back in, whose pages packing released (Gemma 4 E2B: ~15 MB).
      auto buf = std::make_unique<float[]>(static_cast<size_t>(n * ne1));
      std::memcpy(buf.get(), t->data, static_cast<size_t>(n * ne1) * sizeof(float));
      w_.owned.push_back(std::move(buf));
      return static_cast<const float*>(w_.owned.back().get());
    }
    return vector_as_f32(*t, n * ne1, w_.owned);
  }

  // F32 vectors up to this size are copied (all norms and biases; not e.g. a vocabulary-sized table).
  static constexpr uint64_t kCopiedVectorBytes = uint64_t{1} << 20;

  // Marks tensor `name` as known but unused, if the file has it (Gemma 4's shared-KV layers may
  // carry K/V projections that the reference forward never reads either).
  void skip(const std::string& name) {
    if (const format::TensorInfo* t = file_.find_tensor(name); t != nullptr && used_.insert(t->name).second)
      w_.n_bytes_file += t->n_bytes;
  }

  // Marks every tensor whose name starts with `prefix` as known (tensors a forward does not run,
  // like the MTP layers of a model whose drafting head is not used); returns how many.
  int32_t skip_prefix(const std::string& prefix) {
    int32_t n = 0;
    for (const format::TensorInfo& t : file_.tensors)
      if (t.name.rfind(prefix, 0) == 0) {
        used_.insert(t.name);
        w_.n_bytes_file += t.n_bytes;
        ++n;
      }
    return n;
  }

 private:
  const format::ModelFile& file_;
  Weights& w_;
  std::set<std::string> used_;
};

// Asks the kernel to reclaim a packed matrix's pages: the kernels read the packed copy. Pages
// of the read-only file mapping are dropped from the process (MADV_DONTNEED: anything that
// still reads `data` faults them back in from the file). Elsewhere (buffers a converter filled,
// the anonymous copy of a file read with no_mmap) MADV_PAGEOUT, which never discards contents
// (those go to swap, where there is swap; a kernel before Linux 5.4 answers EINVAL and they
// stay). MADV_PAGEOUT on the mapping left the pages it could not reclaim at once mapped: file
// pages still dirty or under writeback (a model file just copied or downloaded) stayed in the
// resident set, 12.5 MB of Gemma 4 E2B's.
void release_pages(const WeightMatrix& m, const format::ModelFile& file) {
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<uintptr_t>(m.data) + page - 1) / page * page;
  const auto end = (reinterpret_cast<uintptr_t>(m.data) + m.n_bytes()) / page * page;
  if (end <= begin) return;
  if (file.in_file_mapping(m.data, m.n_bytes())) {
    madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
    return;
  }
#if defined(MADV_PAGEOUT)
  madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#endif
}

// Rows [r0, r0 + n) of m, as a matrix of its own (the rows are contiguous in the stored type).
WeightMatrix row_range(const WeightMatrix& m, int64_t r0, int64_t n) {
  WeightMatrix v = m;
  v.rows = n;
  v.data = m.row(r0);
  return v;
}

// Checks a LongRoPE factor vector: positive and finite.
Status check_factors(const float* f, int32_t n, const char* name) {
  for (int32_t i = 0; i < n; ++i)
    if (!(f[i] > 0.0f && std::isfinite(f[i])))
      return make_error("tensor '{}' has factor {} at {}; factors must be positive", name, f[i], i);
  return ok_status();
}

// Packs every matrix the active ISA has a packed form for into one huge-page arena (each at a
// 64-byte aligned offset): decode streams all of them every step, and 2 MiB pages keep that
// stream free of TLB misses and prefetcher restarts at 4 KiB boundaries (core/huge_pages.h).
Status pack_matrices(Weights& w, const format::ModelFile& file) {
  if (const char* env = std::getenv("EDGELM_PACK"); env != nullptr && std::string_view(env) == "0") return ok_status();
  std::vector<WeightMatrix*> all;
  for (LayerWeights& L : w.layers)
    for (WeightMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down, &L.w_qkv_mixed, &L.w_z,
                            &L.w_beta, &L.w_alpha, &L.w_ssm_out})
      if (*m) all.push_back(m);
  for (LayerWeights& L : w.layers)
    for (WeightMatrix* m : {&L.ple_gate, &L.ple_proj})
      if (*m) all.push_back(m);
  if (w.ple_model_proj) all.push_back(&w.ple_model_proj);
  for (WeightMatrix* m : {&w.mtp.layer.wq, &w.mtp.layer.wk, &w.mtp.layer.wv, &w.mtp.layer.wo, &w.mtp.layer.w_gate,
                          &w.mtp.layer.w_up, &w.mtp.layer.w_down, &w.mtp.eh_proj, &w.mtp.output})
    if (*m) all.push_back(m);
  all.push_back(&w.output);
  constexpr size_t kAlign = 64;
  std::vector<size_t> bytes, offsets;
  size_t total = 0;
  for (const WeightMatrix* m : all) {
    bytes.push_back(kernels::packed_matrix_bytes(*m));
    offsets.push_back(total);
    total += (bytes.back() + kAlign - 1) / kAlign * kAlign;
  }
  if (total == 0) return ok_status();
  EDGELM_TRY(w.packed, HugePageBuffer::allocate(total));
  ThreadPool pool(ThreadPool::hardware_threads());
  for (size_t i = 0; i < all.size(); ++i) {
    WeightMatrix& m = *all[i];
    if (bytes[i] == 0) continue;
    // Each slab's file pages go as soon as it is packed, so the load's peak holds the packed
    // copies plus one slab, not a whole matrix twice (a tied 262k-row Gemma table is ~230 MB at
    // Q4_K). A tied output's pages go too: the embedding lookup reads one row per token, so only
    // the rows of tokens in use fault back in.
    const WeightMatrix source = m;
    kernels::pack_matrix_into(
        m, reinterpret_cast<uint8_t*>(w.packed.data()) + offsets[i], pool,
        [&source, &file](int64_t r0, int64_t r1) { release_pages(row_range(source, r0, r1 - r0), file); });
    release_pages(m, file);  // the pages that straddle slab boundaries
  }
  // Reading a matrix's last slab faults in the kernel's fault-around window (64 KiB) past its
  // end: the first pages of the next tensor in the file, which may be a matrix packed (and
  // released) before this one. A second pass drops them (Gemma 4 E2B: ~8 MB).
  for (size_t i = 0; i < all.size(); ++i)
    if (bytes[i] != 0) release_pages(*all[i], file);
  return ok_status();
}

// Q, K, V, output projections, biases and Q/K norms of an attention layer.
Status load_attention(Loader& ld, const std::string& p, const ModelConfig& c, int32_t l, LayerWeights& L) {
  const int64_t D = c.layer_head_dim(l), E = c.n_embd, Q = static_cast<int64_t>(c.n_head) * D,
                KV = c.layer_n_embd_kv(l);
  L.attn_gated = c.arch->gated_deltanet;
  if (c.arch->gemma4) {
    EDGELM_TRY(L.wq, ld.matrix(p + "attn_q.weight", E, Q));
    EDGELM_TRY(L.wo, ld.matrix(p + "attn_output.weight", Q, E));
    EDGELM_TRY(L.attn_q_norm, ld.vector(p + "attn_q_norm.weight", D));
    if (!c.layer_has_kv(l)) {
      for (const char* n : {"attn_k.weight", "attn_v.weight", "attn_k_norm.weight"}) ld.skip(p + n);
      return ok_status();
    }
    EDGELM_TRY(L.wk, ld.matrix(p + "attn_k.weight", E, KV));
    EDGELM_TRY(L.wv, ld.matrix(p + "attn_v.weight", E, KV, /*required=*/false));
    EDGELM_TRY(L.attn_k_norm, ld.vector(p + "attn_k_norm.weight", D));
    return ok_status();
  }
  if (c.arch->fused) {
    EDGELM_TRY(const WeightMatrix qkv, ld.matrix(p + "attn_qkv.weight", E, Q + 2 * KV));
    L.wq = row_range(qkv, 0, Q);
    L.wk = row_range(qkv, Q, KV);
    L.wv = row_range(qkv, Q + KV, KV);
  } else {
    EDGELM_TRY(L.wq, ld.matrix(p + "attn_q.weight", E, L.attn_gated ? 2 * Q : Q));
    EDGELM_TRY(L.wk, ld.matrix(p + "attn_k.weight", E, KV));
    EDGELM_TRY(L.wv, ld.matrix(p + "attn_v.weight", E, KV));
  }
  EDGELM_TRY(L.wo, ld.matrix(p + "attn_output.weight", Q, E));
  // Biases: required where the architecture has them, used where a file of another has them.
  EDGELM_TRY(L.bq, ld.vector(p + "attn_q.bias", Q, c.arch->qkv_bias));
  EDGELM_TRY(L.bk, ld.vector(p + "attn_k.bias", KV, c.arch->qkv_bias || L.bq != nullptr));
  EDGELM_TRY(L.bv, ld.vector(p + "attn_v.bias", KV, c.arch->qkv_bias || L.bq != nullptr));
  if (c.arch->qk_norm) {
    EDGELM_TRY(L.attn_q_norm, ld.vector(p + "attn_q_norm.weight", D));
    EDGELM_TRY(L.attn_k_norm, ld.vector(p + "attn_k_norm.weight", D));
  }
  return ok_status();
}

// The Gated DeltaNet tensors of a recurrent layer (LayerWeights).
Status load_deltanet(Loader& ld, const std::string& p, const ModelConfig& c, LayerWeights& L) {
  const DeltaNetConfig& d = c.deltanet;
  const int64_t E = c.n_embd, C = d.conv_dim(), V = d.value_dim(), H = d.n_v_heads;
  EDGELM_TRY(L.w_qkv_mixed, ld.matrix(p + "attn_qkv.weight", E, C));
  EDGELM_TRY(L.w_z, ld.matrix(p + "attn_gate.weight", E, V));
  EDGELM_TRY(L.w_beta, ld.matrix(p + "ssm_beta.weight", E, H));
  EDGELM_TRY(L.w_alpha, ld.matrix(p + "ssm_alpha.weight", E, H));
  EDGELM_TRY(L.w_ssm_out, ld.matrix(p + "ssm_out.weight", V, E));
  EDGELM_TRY(L.ssm_conv, ld.vector(p + "ssm_conv1d.weight", d.d_conv, true, C));
  EDGELM_TRY(L.ssm_dt_bias, ld.vector(p + "ssm_dt.bias", H));
  EDGELM_TRY(L.ssm_a, ld.vector(p + "ssm_a", H));
  EDGELM_TRY(L.ssm_norm, ld.vector(p + "ssm_norm.weight", d.head_v_dim));
  return ok_status();
}

// Gemma 4's model-level per-layer-embedding tensors (Weights::ple_*), when n_embd_ple > 0.
Status load_ple(Loader& ld, const ModelConfig& c, Weights& w) {
  if (c.n_embd_ple == 0) return ok_status();
  const int64_t LP = int64_t{c.n_layer} * c.n_embd_ple;
  EDGELM_TRY(w.ple_token_embd, ld.matrix("per_layer_token_embd.weight", LP, c.n_vocab));
  EDGELM_TRY(w.ple_model_proj, ld.matrix("per_layer_model_proj.weight", c.n_embd, LP));
  EDGELM_TRY(w.ple_proj_norm, ld.vector("per_layer_proj_norm.weight", c.n_embd_ple));
  return ok_status();
}

// Gemma 4's per-layer tensors past the common ones: PLE gate, projection and norm, output scale.
Status load_gemma4_layer(Loader& ld, const std::string& p, const ModelConfig& c, LayerWeights& L) {
  if (c.n_embd_ple > 0) {
    EDGELM_TRY(L.ple_gate, ld.matrix(p + "inp_gate.weight", c.n_embd, c.n_embd_ple));
    EDGELM_TRY(L.ple_proj, ld.matrix(p + "proj.weight", c.n_embd_ple, c.n_embd));
    EDGELM_TRY(L.ple_post_norm, ld.vector(p + "post_norm.weight", c.n_embd));
  }
  EDGELM_TRY(L.out_scale, ld.vector(p + "layer_output_scale.weight", 1, /*required=*/false));
  return ok_status();
}

// The MTP block of a qwen35 file (MtpWeights): the last of the n_nextn blocks after the main
// layers (the one the reference drafts with); the others are known but unused.
Status load_mtp(Loader& ld, const ModelConfig& c, Weights& w) {
  const int32_t l = c.n_layer + c.n_nextn - 1;
  for (int32_t k = c.n_layer; k < l; ++k) ld.skip_prefix("blk." + std::to_string(k) + ".");
  const std::string p = "blk." + std::to_string(l) + ".";
  const int64_t E = c.n_embd, D = c.head_dim, Q = int64_t{c.n_head} * D, KV = int64_t{c.n_head_kv} * D, F = c.n_ff;
  MtpWeights& m = w.mtp;
  LayerWeights& L = m.layer;
  L.attn_gated = true;
  EDGELM_TRY(L.attn_norm, ld.vector(p + "attn_norm.weight", E));
  EDGELM_TRY(L.wq, ld.matrix(p + "attn_q.weight", E, 2 * Q, /*required=*/false));
  EDGELM_TRY(L.wk, ld.matrix(p + "attn_k.weight", E, KV));
  EDGELM_TRY(L.wv, ld.matrix(p + "attn_v.weight", E, KV));
  EDGELM_TRY(L.wo, ld.matrix(p + "attn_output.weight", Q, E));
  EDGELM_TRY(L.attn_q_norm, ld.vector(p + "attn_q_norm.weight", D));
  EDGELM_TRY(L.attn_k_norm, ld.vector(p + "attn_k_norm.weight", D));
  EDGELM_TRY(L.ffn_norm, ld.vector(p + "post_attention_norm.weight", E));
  EDGELM_TRY(L.w_gate, ld.matrix(p + "ffn_gate.weight", E, F, /*required=*/false));
  // An FFN is all three matrices or none.
  EDGELM_TRY(L.w_up, ld.matrix(p + "ffn_up.weight", E, F, /*required=*/static_cast<bool>(L.w_gate)));
  EDGELM_TRY(L.w_down, ld.matrix(p + "ffn_down.weight", F, E, /*required=*/static_cast<bool>(L.w_gate)));
  if (!L.w_gate && (L.w_up || L.w_down))
    return make_error("tensor '{}ffn_gate.weight' is missing from the model file (the MTP block has ffn_up/ffn_down)",
                      p);
  EDGELM_TRY(m.eh_proj, ld.matrix(p + "nextn.eh_proj.weight", 2 * E, E, /*required=*/false));
  EDGELM_TRY(m.enorm, ld.vector(p + "nextn.enorm.weight", E));
  EDGELM_TRY(m.hnorm, ld.vector(p + "nextn.hnorm.weight", E));
  EDGELM_TRY(m.shared_head_norm, ld.vector(p + "nextn.shared_head_norm.weight", E));
  EDGELM_TRY(m.output, ld.matrix("output_extra.weight", E, c.n_vocab, /*required=*/false));
  m.present = true;
  return ok_status();
}

// The optional embedding/reranker heads (Weights::dense_2, dense_3, cls_out): sizes from the
// file, checked against n_embd and each other.
Status load_embedding_heads(const format::ModelFile& file, Loader& ld, const ModelConfig& c, Weights& w) {
  const format::TensorInfo* d2 = file.find_tensor("dense_2.weight");
  const format::TensorInfo* d3 = file.find_tensor("dense_3.weight");
  if ((d2 == nullptr) != (d3 == nullptr))
    return make_error("tensor '{}' is missing from the model file (the dense projections come in pairs)",
                      d2 == nullptr ? "dense_2.weight" : "dense_3.weight");
  if (d2 != nullptr) {
    const int64_t n_dense = d2->ne[1];
    if (n_dense <= 0 || n_dense > (int64_t{1} << 20))
      return make_error("tensor 'dense_2.weight' has shape {}, expected [{}, n_dense]", d2->shape_string(), c.n_embd);
    EDGELM_TRY(w.dense_2, ld.matrix("dense_2.weight", c.n_embd, n_dense));
    EDGELM_TRY(w.dense_3, ld.matrix("dense_3.weight", n_dense, c.n_embd));
  }
  if (const format::TensorInfo* co = file.find_tensor("cls.output.weight"); co != nullptr) {
    const int64_t n_cls = co->ne[1];
    if (n_cls <= 0 || n_cls > (int64_t{1} << 16))
      return make_error("tensor 'cls.output.weight' has shape {}, expected [{}, n_classes]", co->shape_string(),
                        c.n_embd);
    EDGELM_TRY(w.cls_out, ld.matrix("cls.output.weight", c.n_embd, n_cls));
    EDGELM_TRY(w.cls_out_b, ld.vector("cls.output.bias", n_cls, /*required=*/false));
  }
  return ok_status();
}

}  // namespace

Result<Weights> load_weights(const format::ModelFile& file, ModelConfig& c) {
  Weights w;
  Loader ld(file, w);
  const format::TensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) return make_error("tensor 'token_embd.weight' is missing from the model file");
  if (embd->n_dims != 2 || embd->ne[1] <= 0 || embd->ne[1] > (1 << 24))
    return make_error("tensor 'token_embd.weight' has shape {}, expected [{}, n_vocab]", embd->shape_string(),
                      c.n_embd);
  c.n_vocab = static_cast<int32_t>(embd->ne[1]);

  const int64_t E = c.n_embd;
  EDGELM_TRY(w.token_embd, ld.matrix("token_embd.weight", E, c.n_vocab));
  EDGELM_TRY(w.output_norm, ld.vector("output_norm.weight", E));
  EDGELM_TRY(w.output, ld.matrix("output.weight", E, c.n_vocab, /*required=*/false));
  if (!w.output) {
    w.output = w.token_embd;
    w.tied_output = true;
    w.n_bytes_per_token += w.output.n_bytes();
  }
  // Gemma 4's global layers rotate proportionally: rope_freqs.weight stops the pairs past the
  // partial rotary factor (factor 1e30), so it is required where there is a global layer.
  bool needs_freqs = false;
  for (int32_t l = 0; c.arch->gemma4 && l < c.n_layer; ++l) needs_freqs |= !c.layer_is_local(l);
  EDGELM_TRY(w.rope_freqs, ld.vector("rope_freqs.weight", c.n_rot / 2, needs_freqs));
  if (w.rope_freqs != nullptr)
    for (int32_t i = 0; i < c.n_rot / 2; ++i)
      if (!(w.rope_freqs[i] > 0.0f && std::isfinite(w.rope_freqs[i])))
        return make_error("tensor 'rope_freqs.weight' has factor {} at {}; factors must be positive", w.rope_freqs[i],
                          i);
  if (c.arch->fused) {
    EDGELM_TRY(w.rope_short, ld.vector("rope_factors_short.weight", c.n_rot / 2, /*required=*/false));
    EDGELM_TRY(w.rope_long, ld.vector("rope_factors_long.weight", c.n_rot / 2, /*required=*/false));
    if ((w.rope_short == nullptr) != (w.rope_long == nullptr))
      return make_error("tensor '{}' is missing from the model file (LongRoPE needs both factor sets)",
                        w.rope_short == nullptr ? "rope_factors_short.weight" : "rope_factors_long.weight");
    if (w.rope_short != nullptr) {
      EDGELM_TRY_STATUS(check_factors(w.rope_short, c.n_rot / 2, "rope_factors_short.weight"));
      EDGELM_TRY_STATUS(check_factors(w.rope_long, c.n_rot / 2, "rope_factors_long.weight"));
      if (c.longrope_orig_ctx <= 0)
        return make_error("metadata '{}.rope.scaling.original_context_length' is missing (LongRoPE needs it)",
                          c.arch->name);
    }
  }
  if (c.arch->gemma4) EDGELM_TRY_STATUS(load_ple(ld, c, w));
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (int32_t l = 0; l < c.n_layer; ++l) {
    LayerWeights& L = w.layers[static_cast<size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    const int64_t F = c.layer_n_ff(l);
    EDGELM_TRY(L.attn_norm, ld.vector(p + "attn_norm.weight", E));
    if (c.layer_is_recurrent(l)) {
      EDGELM_TRY_STATUS(load_deltanet(ld, p, c, L));
    } else {
      EDGELM_TRY_STATUS(load_attention(ld, p, c, l, L));
    }
    EDGELM_TRY(L.ffn_norm,
               ld.vector(p + (c.arch->gated_deltanet ? "post_attention_norm.weight" : "ffn_norm.weight"), E));
    if (c.arch->fused) {
      EDGELM_TRY(const WeightMatrix gate_up, ld.matrix(p + "ffn_up.weight", E, 2 * F));
      L.w_gate = row_range(gate_up, 0, F);
      L.w_up = row_range(gate_up, F, F);
    } else {
      EDGELM_TRY(L.w_gate, ld.matrix(p + "ffn_gate.weight", E, F));
      EDGELM_TRY(L.w_up, ld.matrix(p + "ffn_up.weight", E, F));
    }
    EDGELM_TRY(L.w_down, ld.matrix(p + "ffn_down.weight", F, E));
    if (c.arch->post_norms) {
      EDGELM_TRY(L.attn_post_norm, ld.vector(p + "post_attention_norm.weight", E));
      EDGELM_TRY(L.ffn_post_norm, ld.vector(p + "post_ffw_norm.weight", E));
    }
    if (c.arch->gemma4) EDGELM_TRY_STATUS(load_gemma4_layer(ld, p, c, L));
  }
  // The MTP ("nextn") layers after the main ones: the drafting head of qwen35 (never run by the
  // main forward); known but unused in other architectures.
  if (c.n_nextn > 0 && c.arch->gated_deltanet) {
    EDGELM_TRY_STATUS(load_mtp(ld, c, w));
  } else {
    for (int32_t l = c.n_layer; l < c.n_layer + c.n_nextn; ++l) ld.skip_prefix("blk." + std::to_string(l) + ".");
  }
  EDGELM_TRY_STATUS(load_embedding_heads(file, ld, c, w));
  EDGELM_TRY_STATUS(ld.check_all_used(c.arch->name));
  EDGELM_TRY_STATUS(pack_matrices(w, file));
  if (w.mtp.present) {  // shared with the main model (after packing: the same packed data)
    if (!w.mtp.output) w.mtp.output = w.output;
    if (!w.mtp.layer.wq)
      for (int32_t l = c.n_layer - 1; l >= 0 && !w.mtp.layer.wq; --l)
        if (!c.layer_is_recurrent(l)) w.mtp.layer.wq = w.layers[static_cast<size_t>(l)].wq;
  }
  return w;
}

}  // namespace edgelm::model
