// A model file's identity for caches that outlive the process: two files with the same
// fingerprint give the same vectors (the semantic cache reuses persisted vectors only under the
// same embedder name, which carries it).
//
// Invariants: reads metadata and the first kSampleBytes of every tensor only (cheap on a mapped
// file); changes with any metadata entry, tensor name/type/shape, or the sampled bytes (so two
// random-weight files of one shape but different seeds differ).
#pragma once

#include <string>

#include "core/result.h"
#include "format/model_file.h"

namespace edgelm::embed {

inline constexpr size_t kFingerprintSampleBytes = 4096;

// 16 lowercase hex digits.
std::string file_fingerprint(const format::ModelFile& file);
Result<std::string> file_fingerprint(const std::string& path);

}  // namespace edgelm::embed
