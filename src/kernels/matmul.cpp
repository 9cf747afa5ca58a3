#include "kernels/matmul.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "kernels/isa.h"
#include "kernels/quant_traits.h"

namespace edgelm::kernels {
namespace {

// Below this many multiply-adds a matmul runs on the calling thread: waking the pool costs
// more than it saves (tiny models such as stories260K are dominated by it).
constexpr int64_t kMinParallelWork = 1 << 16;

// The kernels of the active ISA (EDGELM_ISA is read once, on the first matmul). Never null:
// active_isa() only returns supported ISAs, and the scalar table always exists.
const IsaKernels& active_kernels() {
  static const IsaKernels* const k = isa_kernels(active_isa());
  return *k;
}

// The calling thread's GEMM scratch (unpacked weight rows), 64-byte aligned. It only grows, so
// a warm thread allocates nothing.
// Sizes every pool thread's tile scratch for `bytes` (64-byte aligned within the buffer).
void grow_tile_scratch(MatmulScratch& scratch, int n_threads, size_t bytes) {
  if (scratch.tile.size() < static_cast<size_t>(n_threads)) scratch.tile.resize(static_cast<size_t>(n_threads));
  for (auto& buf : scratch.tile)
    if (buf.size() < bytes + 64) buf.resize(bytes + 64);
}

// The calling pool thread's tile scratch (grow_tile_scratch first).
uint8_t* tile_scratch(MatmulScratch& scratch) {
  const auto i = static_cast<size_t>(ThreadPool::thread_index());
  EDGELM_CHECK(i < scratch.tile.size(), "matmul: thread ", i, " of a pool other than the matmul's");
  std::vector<uint8_t>& buf = scratch.tile[i];
  const auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - addr % 64) % 64);
}

}  // namespace

bool can_matmul(DType type) {
  const QuantTraits* t = quant_traits(type);
  return t != nullptr && t->vec_dot != nullptr && quant_traits(t->vec_dot_type) != nullptr &&
         (t->vec_dot_type == DType::f32 || quant_traits(t->vec_dot_type)->from_float != nullptr);
}

void matmul(const WeightMatrix& w, const float* x, int64_t n_tok, float* out, ThreadPool& pool,
            MatmulScratch& scratch) {
  matmul_with(active_kernels(), w, x, n_tok, out, pool, scratch);
}

void matmul_with(const IsaKernels& isa, const WeightMatrix& w, const float* x, int64_t n_tok, float* out,
                 ThreadPool& pool, MatmulScratch& scratch) {
  // The ISA's kernels, or the scalar traits row where it has none.
  const ResolvedKernels kernels = kernel_or_scalar(isa, w.type);
  EDGELM_CHECK(kernels.vec_dot != nullptr, "matmul: no kernel for ", dtype_name(w.type));
  const auto vec_dot = kernels.vec_dot;

  // Activations in the weight's paired type: [n_tok, act_row_bytes].
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  size_t act_row_bytes = static_cast<size_t>(w.cols) * sizeof(float);
  if (kernels.vec_dot_type != DType::f32) {
    EDGELM_CHECK(kernels.quantize_activation != nullptr, "matmul: no quantizer for ", dtype_name(kernels.vec_dot_type));
    act_row_bytes = dtype_row_bytes(kernels.vec_dot_type, w.cols);
    scratch.activations.resize(act_row_bytes * static_cast<size_t>(n_tok));
    for (int64_t t = 0; t < n_tok; ++t)
      kernels.quantize_activation(x + t * w.cols, scratch.activations.data() + static_cast<size_t>(t) * act_row_bytes,
                                  w.cols);
    act = scratch.activations.data();
  }

  const GemmKernel* gemm = isa.gemm(w.type);
  if (w.packed != nullptr && gemm != nullptr && gemm == w.packed_kernel) {
    scratch.packed.resize(gemm->packed_bytes(w.cols, n_tok));
    gemm->pack(act, act_row_bytes, w.cols, n_tok, scratch.packed.data());
    const auto n_tiles = static_cast<size_t>((w.rows + kGemmRowTile - 1) / kGemmRowTile);
    auto tiles = [&](size_t t0, size_t t1) {
      const auto r0 = static_cast<int64_t>(t0) * kGemmRowTile;
      const int64_t r1 = std::min(static_cast<int64_t>(t1) * kGemmRowTile, w.rows);
      gemm->run_packed(w.packed, w.rows, w.cols, scratch.packed.data(), n_tok, r0, r1, out, w.rows);
    };
    if (w.rows * w.cols * n_tok < kMinParallelWork)
      tiles(0, n_tiles);
    else
      pool.parallel_for(n_tiles, tiles);
    return;
  }
  if (gemm != nullptr && n_tok >= kMinGemmTokens) {
    scratch.packed.resize(gemm->packed_bytes(w.cols, n_tok));
    gemm->pack(act, act_row_bytes, w.cols, n_tok, scratch.packed.data());
    const GemmWeights gw{w.data, w.row_bytes, w.rows, w.cols};
    const auto n_tiles = static_cast<size_t>((w.rows + kGemmRowTile - 1) / kGemmRowTile);
    grow_tile_scratch(scratch, pool.n_threads(), gemm->scratch_bytes(w.cols));
    auto tiles = [&](size_t t0, size_t t1) {
      const auto r0 = static_cast<int64_t>(t0) * kGemmRowTile;
      const int64_t r1 = std::min(static_cast<int64_t>(t1) * kGemmRowTile, w.rows);
      gemm->run(gw, scratch.packed.data(), n_tok, r0, r1, out, w.rows, tile_scratch(scratch));
    };
    if (w.rows * w.cols * n_tok < kMinParallelWork)
      tiles(0, n_tiles);
    else
      pool.parallel_for(n_tiles, tiles);
    return;
  }

  auto rows_range = [&](size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r) {
      const uint8_t* wr = w.row(static_cast<int64_t>(r));
      for (int64_t t = 0; t < n_tok; ++t)
        out[t * w.rows + static_cast<int64_t>(r)] = vec_dot(w.cols, wr, act + static_cast<size_t>(t) * act_row_bytes);
    }
  };
  if (w.rows * w.cols * n_tok < kMinParallelWork) {
    rows_range(0, static_cast<size_t>(w.rows));
  } else {
    pool.parallel_for(static_cast<size_t>(w.rows), rows_range);
  }
}

namespace {

// The GEMM of `isa` that packs w at load, or null.
const GemmKernel* packing_kernel(const IsaKernels& isa, const WeightMatrix& w) {
  const GemmKernel* gemm = isa.gemm(w.type);
  return gemm == nullptr || gemm->pack_weights == nullptr || w.rows <= 0 ? nullptr : gemm;
}

void pack_rows(const GemmKernel& gemm, const WeightMatrix& w, uint8_t* dst, ThreadPool& pool) {
  const GemmWeights gw{w.data, w.row_bytes, w.rows, w.cols};
  const auto n_tiles = static_cast<size_t>((w.rows + kGemmRowTile - 1) / kGemmRowTile);
  pool.parallel_for(n_tiles, [&](size_t t0, size_t t1) {
    gemm.pack_weights(gw, static_cast<int64_t>(t0) * kGemmRowTile,
                      std::min(static_cast<int64_t>(t1) * kGemmRowTile, w.rows), dst);
  });
}

}  // namespace

PackedMatrix pack_matrix_with(const IsaKernels& isa, const WeightMatrix& w, ThreadPool& pool) {
  PackedMatrix p;
  const GemmKernel* gemm = packing_kernel(isa, w);
  if (gemm == nullptr) return p;
  p.kernel = gemm;
  p.n_bytes = gemm->packed_weight_bytes(w.rows, w.cols);
  p.data.reset(new uint8_t[p.n_bytes]);
  pack_rows(*gemm, w, p.data.get(), pool);
  return p;
}

size_t packed_matrix_bytes(const WeightMatrix& w) {
  const GemmKernel* gemm = packing_kernel(active_kernels(), w);
  return gemm == nullptr ? 0 : gemm->packed_weight_bytes(w.rows, w.cols);
}

void pack_matrix_into(WeightMatrix& w, uint8_t* dst, ThreadPool& pool) {
  const GemmKernel* gemm = packing_kernel(active_kernels(), w);
  EDGELM_CHECK(gemm != nullptr, "pack_matrix_into: no packed form for ", dtype_name(w.type));
  pack_rows(*gemm, w, dst, pool);
  w.packed = dst;
  w.packed_kernel = gemm;
}

void get_row(const WeightMatrix& w, int64_t r, float* out) {
  const QuantTraits* traits = quant_traits(w.type);
  EDGELM_CHECK(traits != nullptr && traits->to_float != nullptr, "get_row: no conversion for ", dtype_name(w.type));
  traits->to_float(w.row(r), out, w.cols);
}

}  // namespace edgelm::kernels
