#include "serve/sha256.h"

#include <openssl/evp.h>

#include "core/check.h"

namespace edgelm::serve {

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EDGELM_CHECK(ctx_ != nullptr && EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr) == 1, "SHA-256 init failed");
}

Sha256::~Sha256() { EVP_MD_CTX_free(ctx_); }

void Sha256::update(const void* data, size_t n) {
  EDGELM_CHECK(EVP_DigestUpdate(ctx_, data, n) == 1, "SHA-256 update failed");
}

std::string Sha256::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EDGELM_CHECK(EVP_DigestFinal_ex(ctx_, digest, &len) == 1, "SHA-256 final failed");
  static const char* const kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

}  // namespace edgelm::serve
