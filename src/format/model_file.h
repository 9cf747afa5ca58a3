// A model file in memory: metadata plus named tensors whose bytes live in a backing store
// (the file's mmap or an in-memory copy of it, or buffers a converter filled). GGUF files and
// llama2.c checkpoints both load into this one shape, so everything above the format layer
// reads a single thing.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "format/gguf_value.h"

namespace edgelm::format {

constexpr int kMaxDims = 4;

struct TensorInfo {
  std::string name;
  DType type = DType::f32;
  int n_dims = 0;
  // ne[0] is the innermost (contiguous) dimension, as in GGUF: a weight applied as
  // y[out] = W[out, in] x[in] has ne = {in, out}. Unused dims are 1.
  std::array<int64_t, kMaxDims> ne{1, 1, 1, 1};
  uint64_t offset = 0;  // offset within the data section (GGUF only)
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;  // e.g. "[64, 512]"
};

class ModelFile {
 public:
  uint32_t version = 3;     // GGUF version (3 for converted files)
  uint32_t alignment = 32;  // general.alignment
  GgufMetadata metadata;
  std::vector<TensorInfo> tensors;

  const TensorInfo* find_tensor(std::string_view name) const;

  // Keeps the storage behind TensorInfo::data alive as long as this file.
  void keep_alive(std::shared_ptr<const void> storage) { storage_.push_back(std::move(storage)); }
  // The bytes that are a read-only mapping of the file itself (empty when the file was read into
  // memory): pages there can be dropped from the process and read again from the file.
  void set_file_mapping(const uint8_t* data, size_t size) { mapping_ = {data, size}; }
  bool in_file_mapping(const void* p, size_t n) const {
    const auto b = reinterpret_cast<uintptr_t>(p), m = reinterpret_cast<uintptr_t>(mapping_.data());
    return !mapping_.empty() && b >= m && b - m <= mapping_.size() && n <= mapping_.size() - (b - m);
  }

 private:
  std::vector<std::shared_ptr<const void>> storage_;
  std::span<const uint8_t> mapping_;
};

// How a model file's bytes are brought into memory.
struct LoadOptions {
  // Read the whole file into memory and close it instead of mapping it (FileAccess::read):
  // the file can then be truncated, overwritten or deleted without effect on the loaded
  // model, at the cost of its size in RAM up front and a full read before the first token.
  bool no_mmap = false;
  // engine::load_model: once the tokenizer is built, erase the metadata's copies of the
  // vocabulary (tokenizer.ggml.tokens, scores, ...: 38 MB for a 262k vocabulary; the tokenizer
  // keeps compact tables of its own). For long-running processes that never need them again
  // (serve); a model loaded so cannot be quantized in memory (engine::quantize_loaded_model).
  bool release_vocabulary = false;
};

// Opens a model by sniffing its first bytes: GGUF, or a llama2.c checkpoint (which needs the
// llama2.c tokenizer.bin path for its vocabulary; empty means "no vocabulary").
Result<ModelFile> open_model_file(const std::string& path, const std::string& tokenizer_path = "",
                                  const LoadOptions& options = {});

}  // namespace edgelm::format
