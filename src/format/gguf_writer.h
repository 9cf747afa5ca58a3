// GGUF v3 writer. Tensors are written in the given order, each aligned to general.alignment
// (default 32), so the reference implementation and our reader map them in place. The file is
// written under a temporary name and renamed at the end: an interrupted write never leaves a
// partial file under the final name.
#pragma once

#include <string>

#include "format/model_file.h"

namespace edgelm::format {

// Serializes metadata + tensor infos + aligned data of `file` to `path`.
// TensorInfo::offset is ignored (recomputed); n_bytes must match the type and shape.
Status write_gguf(const std::string& path, const ModelFile& file);

}  // namespace edgelm::format
