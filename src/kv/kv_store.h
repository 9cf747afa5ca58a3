// KvStore: the key/value data of the paged KV cache, one contiguous allocation of blocks.
//
// Job: hold K and V rows for every (block, layer, slot) in the chosen element type, convert
// from/to float on write/read, and copy whole blocks (copy-on-write). Which blocks are live is
// BlockPool's business; KvStore only does bounds-checked (EDGELM_CHECK) data movement.
//
// Layout (layer-major):
//   data_ [n_layer, 2 (K then V), n_blocks, block_size, row_bytes(layer)]
//   (a layer's K or V region of 2 MiB or more starts on a 2 MiB boundary: huge pages, below)
//   row_bytes = n_embd_kv * 4 (f32), * 2 (f16), / 32 * 34 (q8_0: n_embd_kv / 32 BlockQ8_0)
// so for one layer the V rows of a block are a [block_size, n_embd_kv] matrix. Its K is stored
// transposed (k_transposed(): kernels::KtLayout, [n_embd_kv, block_size] for f32 and f16, groups
// of 32 elements with their scales for q8_0) when block_size is a multiple of
// kernels::kAttnKtBlock (and, for q8_0, every layer's head_dim of 32): the attention kernels
// score 8 or 16 positions per FMA with no horizontal sums (bench_attention: see the README's
// attention section); otherwise as rows like V. Consecutive blocks of one layer's K (or V) are adjacent: attention over a
// sequence whose blocks were allocated in order streams one contiguous run per layer instead
// of a block_size-row piece every n_layer * 2 pieces (measured: the block-major layout kept
// decode at depth 2048 latency-bound on the scattered pieces). copy_block copies the block's
// n_layer * 2 pieces.
//
// Layers are the model's layers with K/V (ModelConfig::kv_layer: all of them, but for hybrid
// models only the attention layers, their recurrent layers' state living in kv/state_store.h;
// for Gemma 4 not the shared-KV layers, which take no memory here). A layer's rows are
// ModelConfig::kv_n_embd(layer) wide: Gemma 4's global layers are wider than its local ones,
// so n_embd_kv, row_bytes and block_bytes are per layer (the no-argument forms: layer 0's).
//
// Invariants: q8_0 requires n_embd_kv % 32 == 0 (create() refuses otherwise), so every row is
// whole quant blocks and rows never share bytes. write/read of distinct (layer, block, slot)
// touch disjoint bytes and may run concurrently; so may writes into the block_pieces of a block
// no one else uses (the disk tier's reader threads fill blocks the engine holds for them), and
// populate_blocks beside anything; everything else is single-threaded.
// Reading a row that was never written yields unspecified values (the memory is not cleared).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "core/huge_pages.h"
#include "core/result.h"
#include "kernels/attention_kernels.h"
#include "kv/block_pool.h"
#include "model/arch.h"

namespace edgelm::kv {

enum class KvType { f32, f16, q8_0 };

// "f32", "f16" or "q8_0"; an error lists the valid names.
Result<KvType> kv_type_from_name(std::string_view name);
std::string_view kv_type_name(KvType type);
// The attention kernels' name for the type.
kernels::KvElem kv_elem(KvType type);

// Bytes one token occupies in the cache: all layers, K and V. (For q8_0 with n_embd_kv not a
// multiple of 32, which create() refuses, rows are rounded up to whole quant blocks.)
size_t kv_bytes_per_token(const model::ModelConfig& config, KvType type);

class KvStore {
 public:
  // Validates the shape (n_layer, n_embd_kv, block_size, n_blocks >= 1; q8_0 needs
  // n_embd_kv % 32 == 0; the size must fit in memory) and allocates the data, uninitialized.
  static Result<KvStore> create(const model::ModelConfig& config, int32_t n_blocks, int32_t block_size, KvType type);
  // How many blocks fit in `bytes` (0 when not even one does); clamped to INT32_MAX.
  static int32_t blocks_for_budget(const model::ModelConfig& config, int32_t block_size, KvType type, size_t bytes);

  // k, v: [n_embd_kv] floats for position `slot` of block `block` in layer `layer`.
  void write(int32_t layer, BlockId block, int32_t slot, const float* k, const float* v);
  void read_k(int32_t layer, BlockId block, int32_t slot, float* out) const;  // out: [n_embd_kv]
  void read_v(int32_t layer, BlockId block, int32_t slot, float* out) const;  // out: [n_embd_kv]
  // Commits the whole store's memory now (HugePageBuffer::prefault); the data is unchanged.
  void prefault() { data_.prefault(); }
  // All layers, K and V, of src into dst (dst != src).
  void copy_block(BlockId dst, BlockId src);
  // A block's bytes as stored, every layer's K then V piece: [saved_block_bytes()] (the disk
  // tier's payload, kv/disk_tier.h); load_block puts such bytes back into a block.
  size_t saved_block_bytes() const;
  void save_block(BlockId block, std::byte* out) const;
  void load_block(BlockId block, const std::byte* in);
  // The n_layer * 2 pieces of a block's memory in save_block's order (layer 0 K, layer 0 V, ...),
  // so that a reader can put saved bytes straight in place (the disk tier's preadv).
  std::vector<std::span<std::byte>> block_pieces(BlockId block);
  // Commits the memory of blocks [first, first + n) (HugePageBuffer::populate: no byte changes,
  // safe beside any other use of the store); false where the kernel cannot.
  bool populate_blocks(BlockId first, int32_t n);

  // Raw data for kernels that consume the stored type directly: V [block_size, row_bytes]; K
  // the same, or [n_embd_kv, block_size] elements when k_transposed().
  const std::byte* k_rows(int32_t layer, BlockId block) const { return rows(layer, block, 0); }
  const std::byte* v_rows(int32_t layer, BlockId block) const { return rows(layer, block, 1); }

  size_t n_bytes() const { return n_bytes_; }
  KvType type() const { return type_; }
  int32_t n_layer() const { return n_layer_; }
  int32_t n_embd_kv(int32_t layer = 0) const { return layers_[static_cast<size_t>(layer)].n_embd_kv; }
  int32_t n_blocks() const { return n_blocks_; }
  int32_t block_size() const { return block_size_; }
  size_t row_bytes(int32_t layer = 0) const { return layers_[static_cast<size_t>(layer)].row_bytes; }
  bool k_transposed() const { return k_transposed_; }
  // Bytes from a block's rows to the next block's (k_rows(l, b + 1) - k_rows(l, b)).
  size_t block_bytes(int32_t layer = 0) const { return static_cast<size_t>(block_size_) * row_bytes(layer); }

 private:
  KvStore() = default;
  const std::byte* rows(int32_t layer, BlockId block, int kv) const;
  std::byte* row(int32_t layer, BlockId block, int kv, int32_t slot);
  const std::byte* row(int32_t layer, BlockId block, int kv, int32_t slot) const;
  void encode(const float* x, std::byte* dst, int32_t n) const;
  void decode(const std::byte* src, float* out, int32_t n) const;
  kernels::KtLayout kt_layout() const;  // of K when k_transposed()

  KvType type_ = KvType::f32;
  // Once a write reaches block small_blocks of the layer, its K and V regions' first huge pages
  // go from small pages to huge ones (HugePageBuffer::huge_pages), once.
  void promote_layer(int32_t layer);

  struct Layer {
    int32_t n_embd_kv = 0;    // floats per row
    size_t row_bytes = 0;     // bytes per row in the stored type
    size_t offset[2] = {};    // bytes from data_ to the layer's K pieces, its V pieces
    int32_t small_blocks = 0; // blocks that start in a region's small-page first huge page
  };
  int32_t n_layer_ = 0;
  std::vector<Layer> layers_;                      // [n_layer]
  std::unique_ptr<std::atomic<bool>[]> promoted_;  // [n_layer]: promote_layer done
  int32_t n_blocks_ = 0;
  int32_t block_size_ = 0;
  bool k_transposed_ = false;
  size_t n_bytes_ = 0;   // n_blocks * block_bytes
  HugePageBuffer data_;  // [n_layer, 2, n_blocks, block_size, row_bytes(layer)], regions of a huge page or
                         // more starting on a huge page; huge pages: attention walks a sequence's
                         // blocks layer by layer, with 4 KiB pages each a TLB miss; but the first 2
                         // MiB of each layer's K and of its V have small pages until use grows past
                         // them, so a short use commits what it writes, not n_layer * 2 huge pages
};

}  // namespace edgelm::kv
