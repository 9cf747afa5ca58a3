#include "serve/embedding_vectors.h"

#include <bit>
#include <cmath>

namespace edgelm::serve {

std::vector<std::pair<size_t, size_t>> split_by_token_budget(std::span<const size_t> sizes, size_t budget) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0, sum = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > begin && sum + sizes[i] > budget) {
      out.emplace_back(begin, i);
      begin = i;
      sum = 0;
    }
    sum += sizes[i];
  }
  if (begin < sizes.size()) out.emplace_back(begin, sizes.size());
  return out;
}

std::vector<float> truncate_and_normalize(std::span<const float> v, size_t dims) {
  std::vector<float> out(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(dims));
  double sq = 0.0;
  for (const float x : out) sq += static_cast<double>(x) * x;
  if (sq > 0.0) {
    const double inv = 1.0 / std::sqrt(sq);
    for (float& x : out) x = static_cast<float>(x * inv);
  }
  return out;
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t n = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16 |
                       static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8 |
                       static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 2]));
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += kAlphabet[(n >> 6) & 63];
    out += kAlphabet[n & 63];
  }
  const size_t left = bytes.size() - i;
  if (left > 0) {
    uint32_t n = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (left == 2) n |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += left == 2 ? kAlphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string floats_to_base64(std::span<const float> v) {
  std::string bytes;
  bytes.reserve(v.size() * 4);
  for (const float x : v) {
    const auto u = std::bit_cast<uint32_t>(x);
    for (int b = 0; b < 4; ++b) bytes += static_cast<char>((u >> (8 * b)) & 0xff);  // little-endian
  }
  return base64_encode(bytes);
}

}  // namespace edgelm::serve
