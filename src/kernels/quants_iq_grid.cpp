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

inline uint8_t grid_byte(uint64_t entry, int j) { return static_cast<uint8_t>(entry >> (8 * j)); }
inline uint8_t grid_byte(uint32_t entry, int j) { return static_cast<uint8_t>(entry >> (8 * j)); }

// y[j] = scale * grid[j] * (bit j of signs ? -1 : 1), j < 8 (or < 4).
template <int W, class Entry>
void put_signed(float* y, float scale, Entry entry, uint32_t signs) {
  for (int j = 0; j < W; ++j)
    y[j] = scale * static_cast<float>(grid_byte(entry, j)) * ((signs >> j) & 1 ? -1.0f : 1.0f);
}

// y[j] = dl * (grid[j] + delta), the IQ1 rule (grid bytes are int8 -1, 0, 1).
void put_shifted(float* y, float dl, uint64_t entry, float delta) {
  for (int j = 0; j < 8; ++j) y[j] = dl * (static_cast<float>(static_cast<int8_t>(grid_byte(entry, j))) + delta);
}

constexpr float kIq1Delta = 0.125f;

void block_iq2_xxs(const BlockIQ2_XXS& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  const auto* q = reinterpret_cast<const uint8_t*>(b.qs);
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t idx = load_u32(q + 8 * ib), aux = load_u32(q + 8 * ib + 4);
    const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
    for (int l = 0; l < 4; ++l)
      put_signed<8>(y + 32 * ib + 8 * l, db, kIq2xxsGrid[(idx >> (8 * l)) & 0xff], kSigns[(aux >> (7 * l)) & 127]);
  }
}

void block_iq2_xs(const BlockIQ2_XS& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int g = 0; g < 32; ++g) {  // 8 elements each
    const int s = (b.scales[g / 4] >> (4 * ((g / 2) % 2))) & 0x0f;
    const float db = d * (0.5f + static_cast<float>(s)) * 0.25f;
    put_signed<8>(y + 8 * g, db, kIq2xsGrid[b.qs[g] & 511], kSigns[b.qs[g] >> 9]);
  }
}

void block_iq2_s(const BlockIQ2_S& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int g = 0; g < 32; ++g) {
    const int s = (b.scales[g / 4] >> (4 * ((g / 2) % 2))) & 0x0f;
    const float db = d * (0.5f + static_cast<float>(s)) * 0.25f;
    const int idx = b.qs[g] | (((b.qh[g / 4] >> (2 * (g % 4))) & 3) << 8);
    put_signed<8>(y + 8 * g, db, kIq2sGrid[idx], b.signs[g]);
  }
}

void block_iq3_xxs(const BlockIQ3_XXS& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const uint32_t aux = load_u32(b.scales_and_signs + 4 * ib);
    const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
    for (int l = 0; l < 4; ++l) {
      const uint32_t signs = kSigns[(aux >> (7 * l)) & 127];
      float* out = y + 32 * ib + 8 * l;
      put_signed<4>(out, db, kIq3xxsGrid[b.qs[8 * ib + 2 * l]], signs);
      put_signed<4>(out + 4, db, kIq3xxsGrid[b.qs[8 * ib + 2 * l + 1]], signs >> 4);
    }
  }
}

void block_iq3_s(const BlockIQ3_S& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int k = 0; k < 64; ++k) {  // 4 elements each
    const int s = (b.scales[k / 16] >> (4 * ((k / 8) % 2))) & 0x0f;
    const float db = d * static_cast<float>(1 + 2 * s);
    const int idx = b.qs[k] | (((b.qh[k / 8] >> (k % 8)) & 1) << 8);
    put_signed<4>(y + 4 * k, db, kIq3sGrid[idx], b.signs[k / 2] >> (4 * (k % 2)));
  }
}

void block_iq1_s(const BlockIQ1_S& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const int qh = b.qh[ib];
    const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
    const float delta = (qh & 0x8000) ? -kIq1Delta : kIq1Delta;
    for (int l = 0; l < 4; ++l) {
      const int idx = b.qs[4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
      put_shifted(y + 32 * ib + 8 * l, dl, kIq1sGrid[idx], delta);
    }
  }
}

void block_iq1_m(const BlockIQ1_M& b, float* y) {
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof sc);
  const uint16_t dbits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) |
                                               (sc[3] & 0xf000));
  const float d = fp16_to_fp32(dbits);
  for (int k = 0; k < 32; ++k) {  // 8 elements each
    const int h = k / 2;          // the 16-element half this group is in
    const float dl = d * static_cast<float>(2 * ((sc[h / 4] >> (3 * (h % 4))) & 7) + 1);
    const int nib = (b.qh[k / 2] >> (4 * (k % 2))) & 0x0f;
    const int idx = b.qs[k] | ((nib & 7) << 8);
    put_shifted(y + 8 * k, dl, kIq1sGrid[idx], (nib & 8) ? -kIq1Delta : kIq1Delta);
  }
}

template <class Block, void (*Decode)(const Block&, float*)>
void to_float(const void* vx, float* y, int64_t n) {
  const auto* x = static_cast<const Block*>(vx);
  for (int64_t i = 0, nb = n_blocks(n); i < nb; ++i) Decode(x[i], y + i * kQK_K);
}

}  // namespace

void iq2_xxs_to_float(const void* x, float* y, int64_t n) { to_float<BlockIQ2_XXS, block_iq2_xxs>(x, y, n); }
void iq2_xs_to_float(const void* x, float* y, int64_t n) { to_float<BlockIQ2_XS, block_iq2_xs>(x, y, n); }
void iq2_s_to_float(const void* x, float* y, int64_t n) { to_float<BlockIQ2_S, block_iq2_s>(x, y, n); }
void iq3_xxs_to_float(const void* x, float* y, int64_t n) { to_float<BlockIQ3_XXS, block_iq3_xxs>(x, y, n); }
void iq3_s_to_float(const void* x, float* y, int64_t n) { to_float<BlockIQ3_S, block_iq3_s>(x, y, n); }
void iq1_s_to_float(const void* x, float* y, int64_t n) { to_float<BlockIQ1_S, block_iq1_s>(x, y, n); }
void iq1_m_to_float(const void* x, float* y, int64_t n) { to_float<BlockIQ1_M, block_iq1_m>(x, y, n); }
float iq2_xxs_vec_dot(int64_t n, const void* x, const void* y) { return dequant_dot_q8_k<BlockIQ2_XXS, block_iq2_xxs>(n, x, y); }
float iq2_xs_vec_dot(int64_t n, const void* x, const void* y) { return dequant_dot_q8_k<BlockIQ2_XS, block_iq2_xs>(n, x, y); }
float iq2_s_vec_dot(int64_t n, const void* x, const void* y) { return dequant_dot_q8_k<BlockIQ2_S, block_iq2_s>(n, x, y); }
float iq3_xxs_vec_dot(int64_t n, const void* x, const void* y) { return dequant_dot_q8_k<BlockIQ3_XXS, block_iq3_xxs>(n, x, y); }
float iq3_s_vec_dot(int64_t n, const void* x, const void* y) { return dequant_dot_q8_k<BlockIQ3_S, block_iq3_s>(n, x, y); }
float iq1_s_vec_dot(int64_t n, const void* x, const void* y) { return dequant_dot_q8_k<BlockIQ1_S, block_iq1_s>(n, x, y); }
float iq1_m_vec_dot(int64_t n, const void* x, const void* y) { return dequant_dot_q8_k<BlockIQ1_M, block_iq1_m>(n, x, y); }

}  // namespace edgelm::kernels
