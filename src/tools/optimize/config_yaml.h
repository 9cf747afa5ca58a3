// The `serve --config` YAML of a candidate (serve/config.h keys): the model by absolute path,
// threads and pinning, KV type and pool, batch limits, speculation. `comment` lines are
// written first as "# ..." (the SLA and what was measured).
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "tools/optimize/candidate.h"

namespace edgelm::tools::optimize {

std::string candidate_yaml(const Candidate& c, const std::string& model_path,
                           const std::vector<std::string>& comment = {});
// Writes it to `path`. Errors: the file cannot be written.
Status write_candidate_yaml(const std::string& path, const Candidate& c, const std::string& model_path,
                            const std::vector<std::string>& comment = {});

}  // namespace edgelm::tools::optimize
