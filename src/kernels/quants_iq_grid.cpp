// Scalar reference kernels of the grid IQ formats; see quants_iq_grid.h for the layouts and rules.
#include "kernels/quants_iq_grid.h"

#include <array>
#include <cstring>

#include "kernels/dequant_dot.h"

namespace edgelm::kernels {
namespace {

#include "kernels/iq_grids.inc"

// ksigns: the 7 stored sign bits of 8 elements, the 8th making the count of minus signs even.
constexpr std::array<uint8_t, 128> make_ksigns() {
  std::array<uint8_t, 128> t{};
  for (int i = 0; i < 128; ++i) {
    int parity = 0;
    for (int b = 0; b < 7; ++b) parity ^= (i >> b) & 1;
    t[static_cast<size_t>(i)] = static_cast<uint8_t>(i | (parity << 7));
  }
  return t;
}
constexpr std::array<uint8_t, 128> kSigns = make_ksigns();

int64_t n_blocks(int64_t n) { return row_blocks(n, kQK_K); }

uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline int grid_byte(uint64_t entry, int j) { return static_cast<int>((entry >> (8 * j)) & 0xff); }
inline int grid_byte(uint32_t entry, int j) { return static_cast<int>((entry >> (8 * j)) & 0xff); }

// q[j] = grid[j] * (bit j of signs ? -1 : 1), j < W (8 or 4).
template <int W, class Entry>
void put_signed(int8_t* q, Entry entry, uint32_t signs) {
  for (int j = 0; j < W; ++j) q[j] = static_cast<int8_t>((signs >> j) & 1 ? -grid_byte(entry, j) : grid_byte(entry, j));
}

// q[j] = 8 * grid[j] + delta8, the IQ1 rule x = dl * (grid + delta) with delta = delta8 / 8 (grid
// bytes are int8 -1, 0, 1).
void put_shifted(int8_t* q, uint64_t entry, int delta8) {
  for (int j = 0; j < 8; ++j) q[j] = static_cast<int8_t>(8 * static_cast<int8_t>(grid_byte(entry, j)) + delta8);
}

void set_scale32(GridInts* o, int ib, int s) { o->sc[2 * ib] = o->sc[2 * ib + 1] = static_cast<int8_t>(s); }

void ints_iq2_xxs(const BlockIQ2_XXS& b, GridInts* o) {
  o->d = fp16_to_fp32(b.d) * 0.125f;  // d (0.5 + s) / 4 = d / 8 * (2 s + 1)
  const auto* q = reinterpret_cast<const uint8_t*>(b.qs);
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t idx = load_u32(q + 8 * ib), aux = load_u32(q + 8 * ib + 4);
    set_scale32(o, ib, 2 * static_cast<int>(aux >> 28) + 1);
    for (int l = 0; l < 4; ++l)
      put_signed<8>(o->q + 32 * ib + 8 * l, kIq2xxsGrid[(idx >> (8 * l)) & 0xff], kSigns[(aux >> (7 * l)) & 127]);
  }
}

void ints_iq2_xs(const BlockIQ2_XS& b, GridInts* o) {
  o->d = fp16_to_fp32(b.d) * 0.125f;
  for (int j = 0; j < 16; ++j) o->sc[j] = static_cast<int8_t>(2 * ((b.scales[j / 2] >> (4 * (j % 2))) & 0x0f) + 1);
  for (int g = 0; g < 32; ++g) put_signed<8>(o->q + 8 * g, kIq2xsGrid[b.qs[g] & 511], kSigns[b.qs[g] >> 9]);
}

void ints_iq2_s(const BlockIQ2_S& b, GridInts* o) {
  o->d = fp16_to_fp32(b.d) * 0.125f;
  for (int j = 0; j < 16; ++j) o->sc[j] = static_cast<int8_t>(2 * ((b.scales[j / 2] >> (4 * (j % 2))) & 0x0f) + 1);
  for (int g = 0; g < 32; ++g) {
    const int idx = b.qs[g] | (((b.qh[g / 4] >> (2 * (g % 4))) & 3) << 8);
    put_signed<8>(o->q + 8 * g, kIq2sGrid[idx], b.signs[g]);
  }
}

void ints_iq3_xxs(const BlockIQ3_XXS& b, GridInts* o) {
  o->d = fp16_to_fp32(b.d) * 0.25f;  // d (0.5 + s) / 2 = d / 4 * (2 s + 1)
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t aux = load_u32(b.scales_and_signs + 4 * ib);
    set_scale32(o, ib, 2 * static_cast<int>(aux >> 28) + 1);
    for (int l = 0; l < 4; ++l) {
      const uint32_t signs = kSigns[(aux >> (7 * l)) & 127];
      int8_t* out = o->q + 32 * ib + 8 * l;
      put_signed<4>(out, kIq3xxsGrid[b.qs[8 * ib + 2 * l]], signs);
      put_signed<4>(out + 4, kIq3xxsGrid[b.qs[8 * ib + 2 * l + 1]], signs >> 4);
    }
  }
}

void ints_iq3_s(const BlockIQ3_S& b, GridInts* o) {
  o->d = fp16_to_fp32(b.d);  // d (1 + 2 s)
  for (int ib = 0; ib < 8; ++ib) set_scale32(o, ib, 1 + 2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 0x0f));
  for (int k = 0; k < 64; ++k) {  // 4 elements each
    const int idx = b.qs[k] | (((b.qh[k / 8] >> (k % 8)) & 1) << 8);
    put_signed<4>(o->q + 4 * k, kIq3sGrid[idx], static_cast<uint32_t>(b.signs[k / 2] >> (4 * (k % 2))));
  }
}

void ints_iq1_s(const BlockIQ1_S& b, GridInts* o) {
  o->d = fp16_to_fp32(b.d) * 0.125f;  // d (2 s + 1) (grid + delta) = d / 8 (2 s + 1) (8 grid + 8 delta)
  for (int ib = 0; ib < 8; ++ib) {
    const int qh = b.qh[ib];
    set_scale32(o, ib, 2 * ((qh >> 12) & 7) + 1);
    const int delta8 = (qh & 0x8000) ? -1 : 1;
    for (int l = 0; l < 4; ++l) {
      const int idx = b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
      put_shifted(o->q + 32 * ib + 8 * l, kIq1sGrid[idx], delta8);
    }
  }
}

void ints_iq1_m(const BlockIQ1_M& b, GridInts* o) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  const uint16_t dbits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                               (sc[3] & 0xf000));
  o->d = fp16_to_fp32(dbits) * 0.125f;
  for (int h = 0; h < 16; ++h) o->sc[h] = static_cast<int8_t>(2 * ((sc[h / 4] >> (3 * (h % 4))) & 7) + 1);
  for (int k = 0; k < 32; ++k) {  // 8 elements each
    const int nib = (b.qh[k / 2] >> (4 * (k % 2))) & 0x0f;
    const int idx = b.qs[k] | ((nib & 7) << 8);
    put_shifted(o->q + 8 * k, kIq1sGrid[idx], (nib & 8) ? -1 : 1);
  }
}

// Element e = (d * sc[e / 16]) * q[e]: the float operations of the published formulas (see the
// header), so bit for bit gguf-py's values.
template <class Block, void (*Ints)(const Block&, GridInts*)>
void to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const Block*>(vx);
  GridInts b;
  for (int64_t i = 0, nb = n_blocks(n); i < nb; ++i) {
    Ints(x[i], &b);
    float* out = y + i * kQK_K;
    for (int j = 0; j < 16; ++j) {
      const float dl = b.d * static_cast<float>(b.sc[j]);
      for (int e = 16 * j; e < 16 * j + 16; ++e) out[e] = dl * static_cast<float>(b.q[e]);
    }
  }
}

// The exact integer dot of a block with Q8_K quants, then sum += d * d_y * isum per block.
template <class Block, void (*Ints)(const Block&, GridInts*)>
float vec_dot(int64_t n, const void* vx, const void* vy) {
  const auto* x = static_cast<const Block*>(vx);
  const auto* y = static_cast<const BlockQ8_K*>(vy);
  GridInts b;
  float sum = 0.0f;
  for (int64_t i = 0, nb = n_blocks(n); i < nb; ++i) {
    Ints(x[i], &b);
    int32_t isum = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t s = 0;
      for (int e = 16 * j; e < 16 * j + 16; ++e) s += b.q[e] * y[i].qs[e];
      isum += b.sc[j] * s;
    }
    sum += b.d * y[i].d * static_cast<float>(isum);
  }
  return sum;
}

template <class Block, void (*Ints)(const Block&, GridInts*)>
void ints_of(const void* block, GridInts* out) {
  Ints(*static_cast<const Block*>(block), out);
}

}  // namespace

#define EDGELM_GRID_TYPE(name, Block)                                                                       \
  void name##_to_float(const void* x, float* y, int64_t n) { to_float<Block, ints_##name>(x, y, n); }        \
  float name##_vec_dot(int64_t n, const void* x, const void* y) { return vec_dot<Block, ints_##name>(n, x, y); } \
  void name##_ints(const void* block, GridInts* out) { ints_of<Block, ints_##name>(block, out); }
EDGELM_GRID_TYPE(iq2_xxs, BlockIQ2_XXS)
EDGELM_GRID_TYPE(iq2_xs, BlockIQ2_XS)
EDGELM_GRID_TYPE(iq2_s, BlockIQ2_S)
EDGELM_GRID_TYPE(iq3_xxs, BlockIQ3_XXS)
EDGELM_GRID_TYPE(iq3_s, BlockIQ3_S)
EDGELM_GRID_TYPE(iq1_s, BlockIQ1_S)
EDGELM_GRID_TYPE(iq1_m, BlockIQ1_M)
#undef EDGELM_GRID_TYPE

}  // namespace edgelm::kernels
