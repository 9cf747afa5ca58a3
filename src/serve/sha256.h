// SHA-256, incremental (OpenSSL's EVP digest), for checking uploaded and referenced model files.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

struct evp_md_ctx_st;

namespace edgelm::serve {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  // Lower-case hex of the digest; the object must not be updated afterwards.
  std::string hex_digest();

 private:
  evp_md_ctx_st* ctx_;
};

}  // namespace edgelm::serve
