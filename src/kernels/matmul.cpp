#include "kernels/matmul.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "core/grow.h"
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
    grow(buf, bytes + 64);
}

// The first 64-byte aligned byte of buf (grown 64 bytes past what it must hold).
uint8_t* aligned64(std::vector<uint8_t>& buf) {
  const auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((64 - addr % 64) % 64);
}

// The calling pool thread's tile scratch (grow_tile_scratch first).
uint8_t* tile_scratch(MatmulScratch& scratch) {
  const auto i = static_cast<size_t>(ThreadPool::thread_index());
  EDGELM_CHECK(i < scratch.tile.size(), "matmul: thread ", i, " of a pool other than the matmul's");
  return aligned64(scratch.tile[i]);
}

}  // namespace

bool can_matmul(DType type) {
  const QuantTraits* t = quant_traits(type);
  return t != nullptr && t->vec_dot != nullptr && quant_traits(t->vec_dot_type) != nullptr &&
         (t->vec_dot_type == DType::f32 || quant_traits(t->vec_dot_type)->from_float != nullptr);
}

namespace {

// How one matrix of a call runs: through its load-time packed GEMM (any n_tok), the per-call
// GEMM (n_tok >= kMinGemmTokens), or one vec_dot per (row, token).
enum class Path { packed, gemm, vec_dot };

struct PartPlan {
  const WeightMatrix* w = nullptr;
  float* out = nullptr;
  ResolvedKernels kernels;
  const GemmKernel* gemm = nullptr;  // packed and gemm paths
  Path path = Path::vec_dot;
  size_t units = 0;                  // parallel items: row tiles (GEMM paths) or rows
};

PartPlan plan_part(const IsaKernels& isa, const MatmulPart& p, int64_t n_tok) {
  PartPlan q;
  q.w = p.w;
  q.out = p.out;
  const WeightMatrix& w = *p.w;
  // The ISA's kernels, or the scalar traits row where it has none.
  q.kernels = kernel_or_scalar(isa, w.type);
  EDGELM_CHECK(q.kernels.vec_dot != nullptr, "matmul: no kernel for ", dtype_name(w.type));
  EDGELM_CHECK(q.kernels.vec_dot_type == DType::f32 || q.kernels.quantize_activation != nullptr,
               "matmul: no quantizer for ", dtype_name(q.kernels.vec_dot_type));
  const GemmKernel* gemm = isa.gemm(w.type, w.relaxed);
  if (w.packed != nullptr && gemm != nullptr && gemm == w.packed_kernel) {
    q.path = Path::packed;
  } else if (gemm != nullptr && n_tok >= kMinGemmTokens) {
    q.path = Path::gemm;
  }
  if (q.path != Path::vec_dot) q.gemm = gemm;
  q.units = q.path == Path::vec_dot ? static_cast<size_t>(w.rows)
                                    : static_cast<size_t>((w.rows + kGemmRowTile - 1) / kGemmRowTile);
  return q;
}

// True when b can share a's converted activations (same input width, quantizer and tile
// layout), so both run in one parallel loop.
bool shares_activations(const PartPlan& a, const PartPlan& b) {
  if (a.w->cols != b.w->cols || a.kernels.vec_dot_type != b.kernels.vec_dot_type ||
      a.kernels.quantize_activation != b.kernels.quantize_activation || (a.path == Path::vec_dot) != (b.path == Path::vec_dot))
    return false;
  return a.path == Path::vec_dot || (a.gemm->pack == b.gemm->pack && a.gemm->packed_bytes == b.gemm->packed_bytes);
}

// Whether a part's GEMM takes per-thread tile scratch for n_tok tokens: every per-call GEMM, and
// a packed one from its packed_unpack_tokens on.
bool needs_tile_scratch(const PartPlan& p, int64_t n_tok) {
  if (p.path == Path::gemm) return true;
  return p.path == Path::packed && p.gemm->packed_unpack_tokens > 0 && n_tok >= p.gemm->packed_unpack_tokens;
}

// Tokens below which the activations are converted on the calling thread.
constexpr int64_t kMinParallelQuantize = 8;

// Runs parts [0, n) (all sharing the first one's activations) as one parallel loop.
void run_group(const PartPlan* parts, size_t n, const float* x, int64_t n_tok, ThreadPool& pool,
               MatmulScratch& scratch) {
  const PartPlan& first = parts[0];
  const int64_t cols = first.w->cols;
  // Activations in the weights' paired type: [n_tok, act_row_bytes].
  const uint8_t* act = reinterpret_cast<const uint8_t*>(x);
  size_t act_row_bytes = static_cast<size_t>(cols) * sizeof(float);
  if (first.kernels.vec_dot_type != DType::f32) {
    act_row_bytes = dtype_row_bytes(first.kernels.vec_dot_type, cols);
    grow(scratch.activations, act_row_bytes * static_cast<size_t>(n_tok));
    const FromFloatFn quantize = first.kernels.quantize_activation;
    uint8_t* dst = scratch.activations.data();
    auto rows = [&](size_t t0, size_t t1) {
      for (size_t t = t0; t < t1; ++t) quantize(x + static_cast<int64_t>(t) * cols, dst + t * act_row_bytes, cols);
    };
    if (n_tok >= kMinParallelQuantize && pool.n_threads() > 1)
      pool.parallel_for(static_cast<size_t>(n_tok), rows);
    else
      rows(0, static_cast<size_t>(n_tok));
    act = dst;
  }
  const GemmKernel* gemm = first.gemm;
  if (gemm != nullptr) {
    // 64-byte aligned: a tile's loads of a token's row (an AMX tile row, a zmm) then stay within
    // cache lines where the layout allows (ActQ8K rows are 320 bytes). malloc's 16-byte alignment
    // split every one: bench_kernels packed/{Q4_K,Q5_K}/amx/4096x4096/t128 7.65 -> 6.8 ms.
    grow(scratch.packed, gemm->packed_bytes(cols, n_tok) + 64);
    gemm->pack(act, act_row_bytes, cols, n_tok, aligned64(scratch.packed));
    // Per-call GEMMs, and packed ones that unpack, take per-thread tile scratch (possibly of 0
    // bytes: the per-thread slots must exist all the same).
    size_t tile_bytes = 0;
    bool any_scratch = false;
    for (size_t i = 0; i < n; ++i)
      if (needs_tile_scratch(parts[i], n_tok)) {
        any_scratch = true;
        tile_bytes = std::max(tile_bytes, parts[i].gemm->scratch_bytes(cols));
      }
    if (any_scratch) grow_tile_scratch(scratch, pool.n_threads(), tile_bytes);
  }

  // Items [b, e) of part i: row tiles or rows.
  auto run_part = [&](const PartPlan& p, size_t b, size_t e) {
    const WeightMatrix& w = *p.w;
    if (p.path == Path::vec_dot) {
      for (size_t r = b; r < e; ++r) {
        const uint8_t* wr = w.row(static_cast<int64_t>(r));
        for (int64_t t = 0; t < n_tok; ++t)
          p.out[t * w.rows + static_cast<int64_t>(r)] =
              p.kernels.vec_dot(w.cols, wr, act + static_cast<size_t>(t) * act_row_bytes);
      }
      return;
    }
    const auto r0 = static_cast<int64_t>(b) * kGemmRowTile;
    const int64_t r1 = std::min(static_cast<int64_t>(e) * kGemmRowTile, w.rows);
    if (p.path == Path::packed) {
      p.gemm->run_packed(w.packed, w.rows, w.cols, aligned64(scratch.packed), n_tok, r0, r1, p.out, w.rows,
                         needs_tile_scratch(p, n_tok) ? tile_scratch(scratch) : nullptr);
    } else {
      const GemmWeights gw{w.data, w.row_bytes, w.rows, w.cols};
      p.gemm->run(gw, aligned64(scratch.packed), n_tok, r0, r1, p.out, w.rows, tile_scratch(scratch));
    }
  };
  size_t total = 0;
  int64_t work = 0;
  for (size_t i = 0; i < n; ++i) {
    total += parts[i].units;
    work += parts[i].w->rows * cols * n_tok;
  }
  // The parts' items laid end to end: a chunk may span several parts.
  auto items = [&](size_t b, size_t e) {
    size_t base = 0;
    for (size_t i = 0; i < n && b < e; base += parts[i].units, ++i) {
      const size_t end = base + parts[i].units;
      if (b >= end) continue;
      const size_t stop = std::min(e, end);
      run_part(parts[i], b - base, stop - base);
      b = stop;
    }
  };
  if (work < kMinParallelWork)
    items(0, total);
  else
    pool.parallel_for(total, items);
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, int64_t n_tok, float* out, ThreadPool& pool,
            MatmulScratch& scratch) {
  matmul_with(active_kernels(), w, x, n_tok, out, pool, scratch);
}

void matmul_with(const IsaKernels& isa, const WeightMatrix& w, const float* x, int64_t n_tok, float* out,
                 ThreadPool& pool, MatmulScratch& scratch) {
  const MatmulPart part{&w, out};
  matmul_many_with(isa, {&part, 1}, x, n_tok, pool, scratch);
}

void matmul_many(std::span<const MatmulPart> parts, const float* x, int64_t n_tok, ThreadPool& pool,
                 MatmulScratch& scratch) {
  matmul_many_with(active_kernels(), parts, x, n_tok, pool, scratch);
}

void matmul_many_with(const IsaKernels& isa, std::span<const MatmulPart> parts, const float* x, int64_t n_tok,
                      ThreadPool& pool, MatmulScratch& scratch) {
  EDGELM_CHECK(parts.size() <= kMaxMatmulParts, "matmul_many: ", parts.size(), " parts; at most ", kMaxMatmulParts);
  PartPlan plans[kMaxMatmulParts];
  for (size_t i = 0; i < parts.size(); ++i) plans[i] = plan_part(isa, parts[i], n_tok);
  // Runs of consecutive parts that share their activations.
  for (size_t i = 0; i < parts.size();) {
    size_t j = i + 1;
    while (j < parts.size() && shares_activations(plans[i], plans[j])) ++j;
    run_group(plans + i, j - i, x, n_tok, pool, scratch);
    i = j;
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

void pack_matrix_into(WeightMatrix& w, uint8_t* dst, ThreadPool& pool,
                      const std::function<void(int64_t r0, int64_t r1)>& on_slab) {
  const GemmKernel* gemm = packing_kernel(active_kernels(), w);
  EDGELM_CHECK(gemm != nullptr, "pack_matrix_into: no packed form for ", dtype_name(w.type));
  // Whole row tiles per slab; pack_weights places rows [r0, r1) of any tile range at their own
  // offsets in dst, so slabs fill the same bytes as one call would.
  const int64_t slab_rows = std::max<int64_t>(
      kGemmRowTile, static_cast<int64_t>(kPackSlabBytes / std::max<size_t>(w.row_bytes, 1)) / kGemmRowTile * kGemmRowTile);
  for (int64_t r0 = 0; r0 < w.rows; r0 += slab_rows) {
    const int64_t r1 = std::min(w.rows, r0 + slab_rows);
    const GemmWeights gw{w.data, w.row_bytes, w.rows, w.cols};
    const auto n_tiles = static_cast<size_t>((r1 - r0 + kGemmRowTile - 1) / kGemmRowTile);
    pool.parallel_for(n_tiles, [&](size_t t0, size_t t1) {
      gemm->pack_weights(gw, r0 + static_cast<int64_t>(t0) * kGemmRowTile,
                         std::min(r0 + static_cast<int64_t>(t1) * kGemmRowTile, r1), dst);
    });
    if (on_slab) on_slab(r0, r1);
  }
  w.packed = dst;
  w.packed_kernel = gemm;
}

void get_row(const WeightMatrix& w, int64_t r, float* out) {
  const QuantTraits* traits = quant_traits(w.type);
  EDGELM_CHECK(traits != nullptr && traits->to_float != nullptr, "get_row: no conversion for ", dtype_name(w.type));
  traits->to_float(w.row(r), out, w.cols);
}

}  // namespace edgelm::kernels
