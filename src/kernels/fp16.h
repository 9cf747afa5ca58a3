// IEEE half (F16) and bfloat16 (BF16) <-> float conversions, exact in both directions for
// every value (subnormals, infinities and NaN included); float -> half rounds to nearest even.
#pragma once

#include <cstdint>
#include <cstring>

namespace edgelm::kernels {

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

inline uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return bits_to_float(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return bits_to_float(sign);  // signed zero
  // Subnormal half: normalize into a float.
  int e = -1;
  do {
    ++e;
    mant <<= 1;
  } while ((mant & 0x400u) == 0);
  return bits_to_float(sign | static_cast<uint32_t>(112 - e) << 23 | ((mant & 0x3ffu) << 13));
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = float_to_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;  // NaN stays NaN (quiet)
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to or beyond infinity
  if (abs >= 0x38800000u) {  // normal half
    const uint32_t mant_round = abs + 0x0fffu + ((abs >> 13) & 1u);  // round to nearest even
    return sign | static_cast<uint16_t>((mant_round - 0x38000000u) >> 13);
  }
  if (abs < 0x33000001u) return sign;  // below half the smallest subnormal: +-0
  // Subnormal half: shift the implicit-one mantissa and round to nearest even.
  const uint32_t e = abs >> 23;
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 14..24
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rem = mant & ((1u << shift) - 1);
  uint32_t q = mant >> shift;
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return sign | static_cast<uint16_t>(q);
}

inline float bf16_to_fp32(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = float_to_bits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

}  // namespace edgelm::kernels
