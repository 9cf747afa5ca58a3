// GGUF reader (versions 2 and 3).
//
// Layout: magic "GGUF", u32 version, u64 tensor count, u64 metadata count, the metadata
// key/values, the tensor infos, padding to general.alignment, then the tensor data section.
// Every count, length, offset and size is checked against the bytes that remain and for
// overflow before it is used, so no input can cause an out-of-bounds read or an allocation
// larger than the input itself. Tensor data is referenced in place in the mapping (or the
// in-memory copy, LoadOptions::no_mmap).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "format/model_file.h"

namespace edgelm::format {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint32_t kGgufDefaultAlignment = 32;
// Where every tensor's data must start (an address multiple): the kernels read quant blocks in
// place, and their scales are fp16 and float.
constexpr uintptr_t kTensorDataAlign = 4;

// Parses a GGUF image held in memory (`data` as mmap or operator new give it: the tensors' data
// addresses are checked against kTensorDataAlign). `keep_alive` (optional) owns the bytes.
Result<ModelFile> parse_gguf(const uint8_t* data, size_t size, std::shared_ptr<const void> keep_alive = {});

// Maps (or with options.no_mmap reads) and parses a GGUF file.
Result<ModelFile> read_gguf(const std::string& path, const LoadOptions& options = {});

}  // namespace edgelm::format
