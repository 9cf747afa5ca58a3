// SHA-256 of a byte range as lowercase hex (OpenSSL), for the tests that compare dequantized
// floats or quantized bytes with the reference's recorded hashes.
#pragma once

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <cstddef>
#include <string>

namespace edgelm::kernels::test {

inline std::string sha256_hex(const void* data, size_t size) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EXPECT_EQ(EVP_Digest(data, size, md, &len, EVP_sha256(), nullptr), 1);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

}  // namespace edgelm::kernels::test
