// The resumable state of `edgelm optimize`: `<-o>.state.json`, every finished measurement by
// key (candidate.h) plus a fingerprint of what the numbers depend on (the model file, the
// workload, the measurement settings). The SLA is not part of it: measurements do not depend on
// it, so a rerun with another SLA reuses them all.
//
// Invariants: save() writes a temporary file and renames it over the state, so an interrupted
// run leaves the previous complete state; load() of a state whose fingerprint differs (or that
// does not parse) starts empty and says why, it never fails the run.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "tools/optimize/candidate.h"

namespace edgelm::tools::optimize {

class StateFile {
 public:
  StateFile(std::string path, nlohmann::json fingerprint);

  // Reads the file if there is one. Returns a note for the log: "resumed: N measurements",
  // "no state file", or why an existing one was not used.
  std::string load();
  // Writes every measurement (atomically). Errors: the folder is not writable.
  Status save() const;

  const Measurement* find(const std::string& key) const;
  void put(const Measurement& m);
  const std::map<std::string, Measurement>& all() const { return rows_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  nlohmann::json fingerprint_;
  std::map<std::string, Measurement> rows_;
};

}  // namespace edgelm::tools::optimize
