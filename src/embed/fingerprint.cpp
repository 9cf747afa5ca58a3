#include "embed/fingerprint.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/xxhash64.h"

namespace edgelm::embed {
namespace {

void add_string(Xxh64& h, const std::string& s) {
  const uint64_t n = s.size();
  h.update(&n, sizeof n);
  h.update(s.data(), s.size());
}

}  // namespace

std::string file_fingerprint(const format::ModelFile& file) {
  Xxh64 h;
  for (const auto& [key, value] : file.metadata.entries()) {
    add_string(h, key);
    add_string(h, value.to_display_string(256));
  }
  for (const format::TensorInfo& t : file.tensors) {
    add_string(h, t.name);
    const auto type = static_cast<int32_t>(t.type);
    h.update(&type, sizeof type);
    h.update(t.ne.data(), sizeof(int64_t) * t.ne.size());
    if (t.data != nullptr) h.update(t.data, std::min<uint64_t>(t.n_bytes, kFingerprintSampleBytes));
  }
  return fmt::format("{:016x}", h.digest());
}

Result<std::string> file_fingerprint(const std::string& path) {
  EDGELM_TRY(format::ModelFile file, format::open_model_file(path));
  return file_fingerprint(file);
}

}  // namespace edgelm::embed
