#include "kv/kv_store.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "kernels/attention_kernels.h"
#include "kernels/fp16.h"
#include "kernels/quants_legacy.h"

namespace edgelm::kv {
namespace {

// Bytes of one [n_embd_kv] row; q8_0 rounds up to whole quant blocks.
size_t row_bytes_for(int32_t n_embd_kv, KvType type) {
  const auto n = static_cast<size_t>(std::max(n_embd_kv, 0));
  switch (type) {
    case KvType::f32: return n * sizeof(float);
    case KvType::f16: return n * sizeof(uint16_t);
    case KvType::q8_0: return (n + kernels::kQK - 1) / kernels::kQK * sizeof(kernels::BlockQ8_0);
  }
  EDGELM_CHECK(false, "unknown KvType ", static_cast<int>(type));
  return 0;
}

// a * b, or nullopt on size_t overflow.
std::optional<size_t> mul(size_t a, size_t b) {
  size_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

}  // namespace

Result<KvType> kv_type_from_name(std::string_view name) {
  for (KvType t : {KvType::f32, KvType::f16, KvType::q8_0})
    if (name == kv_type_name(t)) return t;
  return make_error("unknown KV cache type '{}' (valid: f32, f16, q8_0)", name);
}

std::string_view kv_type_name(KvType type) {
  switch (type) {
    case KvType::f32: return "f32";
    case KvType::f16: return "f16";
    case KvType::q8_0: return "q8_0";
  }
  return "?";
}

size_t kv_bytes_per_token(const model::ModelConfig& config, KvType type) {
  size_t total = 0;
  for (int32_t l = 0; l < config.n_kv_layers(); ++l) total += 2 * row_bytes_for(config.kv_n_embd(l), type);
  return total;
}

Result<KvStore> KvStore::create(const model::ModelConfig& config, int32_t n_blocks, int32_t block_size, KvType type) {
  int32_t min_embd_kv = config.n_kv_layers() < 1 ? 0 : config.kv_n_embd(0);
  for (int32_t l = 1; l < config.n_kv_layers(); ++l) min_embd_kv = std::min(min_embd_kv, config.kv_n_embd(l));
  if (config.n_kv_layers() < 1 || min_embd_kv < 1)
    return make_error("KV cache: model has {} layers with K/V and n_embd_kv {}; both must be >= 1",
                      config.n_kv_layers(), min_embd_kv);
  if (block_size < 1) return make_error("KV cache: block size {} must be >= 1", block_size);
  if (n_blocks < 1) return make_error("KV cache: {} blocks requested; at least 1 is needed", n_blocks);
  for (int32_t l = 0; l < config.n_kv_layers(); ++l)
    if (type == KvType::q8_0 && config.kv_n_embd(l) % kernels::kQK != 0)
      return make_error(
          "KV cache type q8_0 needs n_embd_kv (n_head_kv * head_dim = {}) to be a multiple of {}; "
          "use f16 or f32",
          config.kv_n_embd(l), kernels::kQK);

  KvStore s;
  s.type_ = type;
  s.n_layer_ = config.n_kv_layers();
  s.n_blocks_ = n_blocks;
  s.block_size_ = block_size;
  // q8_0 keys transposed in groups of 32 elements: every head's slice must be whole groups.
  bool whole_groups = true;
  for (int32_t l = 0; l < config.n_kv_layers(); ++l)
    whole_groups = whole_groups && config.layer_head_dim(config.kv_index_layer(l)) % kernels::kKtQ8Group == 0;
  s.k_transposed_ = block_size % kernels::kAttnKtBlock == 0 && (type != KvType::q8_0 || whole_groups);
  const auto block_bytes = mul(kv_bytes_per_token(config, type), static_cast<size_t>(block_size));
  const auto total = block_bytes ? mul(*block_bytes, static_cast<size_t>(n_blocks)) : std::nullopt;
  if (!total || *total > static_cast<size_t>(std::numeric_limits<ptrdiff_t>::max()))
    return make_error("KV cache of {} blocks x {} tokens x {} bytes per token does not fit in memory", n_blocks,
                      block_size, kv_bytes_per_token(config, type));
  s.n_bytes_ = *total;
  // Each layer's K and its V are a region of n_blocks pieces. A region of a huge page or more
  // starts on a huge page boundary, and its first huge page has small pages: with huge pages
  // the first token of a layer would commit 2 MiB of it (Gemma 4 E2B: 15 layers x K, V = 60
  // MiB for a one-line prompt). The rest keeps the huge pages that long sequences walk, and
  // once a write reaches past the first huge page that one becomes huge too (promote_layer):
  // in small pages it cost bench_batch_attention's Qwen3.5 layer at depth 8192 about 20% (36
  // layers; the engine's 6 showed no difference, TinyLlama's 22 at depth 8192 7-13%). A smaller region is
  // small pages throughout, packed after the previous one (no padding to commit).
  const size_t piece_blocks = static_cast<size_t>(n_blocks) * static_cast<size_t>(block_size);
  constexpr size_t kHuge = HugePageBuffer::kHugePage;
  size_t end = 0;
  const auto place = [&](size_t bytes) {
    const size_t at = bytes >= kHuge ? (end + kHuge - 1) / kHuge * kHuge : end;
    end = at + bytes;
    return at;
  };
  for (int32_t l = 0; l < s.n_layer_; ++l) {
    Layer L;
    L.n_embd_kv = config.kv_n_embd(l);
    L.row_bytes = row_bytes_for(L.n_embd_kv, type);
    const size_t region = piece_blocks * L.row_bytes, piece = static_cast<size_t>(block_size) * L.row_bytes;
    L.offset[0] = place(region);
    L.offset[1] = place(region);
    L.small_blocks = region >= kHuge ? static_cast<int32_t>((kHuge + piece - 1) / piece) : n_blocks;
    s.layers_.push_back(L);
  }
  auto mem = HugePageBuffer::allocate(end);
  if (!mem.ok()) return make_error("KV cache of {} blocks: {}", n_blocks, mem.error().message);
  s.data_ = std::move(*mem);
  for (const Layer& L : s.layers_)
    for (const size_t at : L.offset) s.data_.small_pages(at, std::min(kHuge, piece_blocks * L.row_bytes));
  s.promoted_ = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(s.n_layer_));
  return s;
}

int32_t KvStore::blocks_for_budget(const model::ModelConfig& config, int32_t block_size, KvType type, size_t bytes) {
  if (block_size < 1) return 0;
  const auto per_block = mul(kv_bytes_per_token(config, type), static_cast<size_t>(block_size));
  if (!per_block || *per_block == 0) return 0;
  return static_cast<int32_t>(std::min<size_t>(bytes / *per_block, std::numeric_limits<int32_t>::max()));
}

namespace {
// Before anything reads the layer's entry (n_embd_kv(layer), row_bytes(layer)).
void check_layer(const KvStore& s, int32_t layer) {
  EDGELM_CHECK(layer >= 0 && layer < s.n_layer(), "layer ", layer, " out of range [0, ", s.n_layer(), ")");
}
}  // namespace

const std::byte* KvStore::rows(int32_t layer, BlockId block, int kv) const {
  check_layer(*this, layer);
  EDGELM_CHECK(block >= 0 && block < n_blocks_, "block ", block, " out of range [0, ", n_blocks_, ")");
  const Layer& L = layers_[static_cast<size_t>(layer)];
  const size_t piece = static_cast<size_t>(block_size_) * L.row_bytes;  // one layer's K or V of a block
  return data_.data() + L.offset[kv] + static_cast<size_t>(block) * piece;
}

const std::byte* KvStore::row(int32_t layer, BlockId block, int kv, int32_t slot) const {
  EDGELM_CHECK(slot >= 0 && slot < block_size_, "slot ", slot, " out of range [0, ", block_size_, ")");
  const std::byte* r = rows(layer, block, kv);  // checks layer before row_bytes reads its entry
  return r + static_cast<size_t>(slot) * row_bytes(layer);
}

std::byte* KvStore::row(int32_t layer, BlockId block, int kv, int32_t slot) {
  return const_cast<std::byte*>(std::as_const(*this).row(layer, block, kv, slot));
}

void KvStore::encode(const float* x, std::byte* dst, int32_t n) const {
  switch (type_) {
    case KvType::f32: std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float)); return;
    case KvType::f16:
      for (int32_t i = 0; i < n; ++i) {
        const uint16_t h = kernels::fp32_to_fp16(x[i]);
        std::memcpy(dst + 2 * static_cast<size_t>(i), &h, sizeof h);
      }
      return;
    case KvType::q8_0: kernels::q8_0_from_float(x, dst, n); return;
  }
}

void KvStore::decode(const std::byte* src, float* out, int32_t n) const {
  switch (type_) {
    case KvType::f32: std::memcpy(out, src, static_cast<size_t>(n) * sizeof(float)); return;
    case KvType::f16:
      for (int32_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * static_cast<size_t>(i), sizeof h);
        out[i] = kernels::fp16_to_fp32(h);
      }
      return;
    case KvType::q8_0: kernels::q8_0_to_float(src, out, n); return;
  }
}

kernels::KvElem kv_elem(KvType type) {
  switch (type) {
    case KvType::f32: return kernels::KvElem::f32;
    case KvType::f16: return kernels::KvElem::f16;
    case KvType::q8_0: return kernels::KvElem::q8_0;
  }
  return kernels::KvElem::f32;
}

kernels::KtLayout KvStore::kt_layout() const { return {kv_elem(type_), block_size_}; }

void KvStore::promote_layer(int32_t layer) {
  if (promoted_[static_cast<size_t>(layer)].exchange(true)) return;  // another writer's
  const Layer& L = layers_[static_cast<size_t>(layer)];
  for (const size_t at : L.offset) data_.huge_pages(at, HugePageBuffer::kHugePage);
}

void KvStore::write(int32_t layer, BlockId block, int32_t slot, const float* k, const float* v) {
  check_layer(*this, layer);
  if (block >= layers_[static_cast<size_t>(layer)].small_blocks &&
      !promoted_[static_cast<size_t>(layer)].load(std::memory_order_relaxed))
    promote_layer(layer);
  const int32_t n = n_embd_kv(layer);
  encode(v, row(layer, block, 1, slot), n);
  if (!k_transposed_) {
    encode(k, row(layer, block, 0, slot), n);
    return;
  }
  // Element i of the row goes to slot's place in the block's transposed keys (kernels::KtLayout).
  std::byte* keys = row(layer, block, 0, 0);
  const kernels::KtLayout kt = kt_layout();
  if (type_ == KvType::q8_0) {
    for (int32_t g = 0; g < n; g += kernels::kQK) {  // one BlockQ8_0 of the row at a time
      kernels::BlockQ8_0 b;
      kernels::q8_0_from_float(k + g, &b, kernels::kQK);
      std::memcpy(keys + kt.q8_scale(g, slot), &b.d, sizeof b.d);
      for (int32_t j = 0; j < kernels::kQK; ++j) std::memcpy(keys + kt.elem(g + j, slot), &b.qs[j], 1);
    }
    return;
  }
  for (int32_t i = 0; i < n; ++i) {
    if (type_ == KvType::f32) {
      std::memcpy(keys + kt.elem(i, slot), &k[i], sizeof(float));
    } else {
      const uint16_t h = kernels::fp32_to_fp16(k[i]);
      std::memcpy(keys + kt.elem(i, slot), &h, sizeof h);
    }
  }
}

void KvStore::read_k(int32_t layer, BlockId block, int32_t slot, float* out) const {
  check_layer(*this, layer);
  const int32_t n = n_embd_kv(layer);
  if (!k_transposed_) {
    decode(row(layer, block, 0, slot), out, n);
    return;
  }
  const std::byte* keys = row(layer, block, 0, 0);
  const kernels::KtLayout kt = kt_layout();
  for (int32_t i = 0; i < n; ++i) {
    if (type_ == KvType::f32) {
      std::memcpy(&out[i], keys + kt.elem(i, slot), sizeof(float));
      continue;
    }
    uint16_t h;
    if (type_ == KvType::f16) {
      std::memcpy(&h, keys + kt.elem(i, slot), sizeof h);
      out[i] = kernels::fp16_to_fp32(h);
      continue;
    }
    std::memcpy(&h, keys + kt.q8_scale(i, slot), sizeof h);
    out[i] = static_cast<float>(static_cast<int8_t>(keys[kt.elem(i, slot)])) * kernels::fp16_to_fp32(h);  // as q8_0_to_float
  }
}

void KvStore::read_v(int32_t layer, BlockId block, int32_t slot, float* out) const {
  check_layer(*this, layer);
  decode(row(layer, block, 1, slot), out, n_embd_kv(layer));
}

void KvStore::copy_block(BlockId dst, BlockId src) {
  EDGELM_CHECK(dst != src, "copy_block onto itself (block ", dst, ")");
  for (int32_t l = 0; l < n_layer_; ++l)
    for (int kv = 0; kv < 2; ++kv)
      std::memcpy(const_cast<std::byte*>(rows(l, dst, kv)), rows(l, src, kv), block_bytes(l));
}

size_t KvStore::saved_block_bytes() const {
  size_t n = 0;
  for (int32_t l = 0; l < n_layer_; ++l) n += 2 * block_bytes(l);
  return n;
}

void KvStore::save_block(BlockId block, std::byte* out) const {
  for (int32_t l = 0; l < n_layer_; ++l)
    for (int kv = 0; kv < 2; ++kv) {
      std::memcpy(out, rows(l, block, kv), block_bytes(l));
      out += block_bytes(l);
    }
}

void KvStore::load_block(BlockId block, const std::byte* in) {
  for (int32_t l = 0; l < n_layer_; ++l)
    for (int kv = 0; kv < 2; ++kv) {
      std::memcpy(const_cast<std::byte*>(rows(l, block, kv)), in, block_bytes(l));
      in += block_bytes(l);
    }
}

std::vector<std::span<std::byte>> KvStore::block_pieces(BlockId block) {
  std::vector<std::span<std::byte>> out;
  out.reserve(2 * static_cast<size_t>(n_layer_));
  for (int32_t l = 0; l < n_layer_; ++l)
    for (int kv = 0; kv < 2; ++kv) out.emplace_back(const_cast<std::byte*>(rows(l, block, kv)), block_bytes(l));
  return out;
}

bool KvStore::populate_blocks(BlockId first, int32_t n) {
  first = std::clamp(first, 0, n_blocks_);
  n = std::clamp(n, 0, n_blocks_ - first);
  if (n == 0) return true;
  bool ok = true;
  for (int32_t l = 0; l < n_layer_; ++l)
    for (int kv = 0; kv < 2; ++kv) {
      const size_t at = static_cast<size_t>(rows(l, first, kv) - data_.data());
      ok = data_.populate(at, static_cast<size_t>(n) * block_bytes(l)) && ok;
    }
  return ok;
}

}  // namespace edgelm::kv
