// Byte-level GGUF image builder for reader tests: lets a test write any field, valid or not.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace edgelm::test {

class GgufBytes {
 public:
  template <typename T>
  GgufBytes& pod(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof v);
    return *this;
  }
  GgufBytes& u32(uint32_t v) { return pod(v); }
  GgufBytes& u64(uint64_t v) { return pod(v); }
  GgufBytes& str(std::string_view s) {
    u64(s.size());
    bytes_.insert(bytes_.end(), s.begin(), s.end());
    return *this;
  }
  // Header: magic, version, tensor count, kv count.
  GgufBytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    return u32(0x46554747).u32(version).u64(n_tensors).u64(n_kv);
  }
  // A key with a u32 value.
  GgufBytes& kv_u32(std::string_view key, uint32_t v) { return str(key).u32(4).u32(v); }
  GgufBytes& kv_str(std::string_view key, std::string_view v) { return str(key).u32(8).str(v); }
  // A tensor info (f32 by default).
  GgufBytes& tensor(std::string_view name, std::vector<uint64_t> dims, uint32_t type, uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  GgufBytes& pad_to(size_t align) {
    while (bytes_.size() % align != 0) bytes_.push_back(0);
    return *this;
  }
  GgufBytes& zeros(size_t n) {
    bytes_.resize(bytes_.size() + n, 0);
    return *this;
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace edgelm::test
