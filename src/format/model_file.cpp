#include "format/model_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "format/gguf_reader.h"
#include "format/llama2c.h"

namespace edgelm::format {

std::string TensorInfo::shape_string() const {
  std::string s = "[";
  for (int d = 0; d < n_dims; ++d) s += (d > 0 ? ", " : "") + std::to_string(ne[d]);
  return s + "]";
}

const TensorInfo* ModelFile::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Result<ModelFile> open_model_file(const std::string& path, const std::string& tokenizer_path,
                                  const LoadOptions& options) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return make_error("cannot open '{}': {}", path, std::strerror(errno));
  uint32_t magic = 0;
  const size_t got = std::fread(&magic, 1, sizeof magic, f);
  std::fclose(f);
  if (got == sizeof magic && magic == kGgufMagic) return read_gguf(path, options);
  return read_llama2c(path, tokenizer_path, options);
}

}  // namespace edgelm::format
