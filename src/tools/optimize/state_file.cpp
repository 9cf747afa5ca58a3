#include "tools/optimize/state_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace edgelm::tools::optimize {

namespace {
constexpr int kVersion = 1;
}

StateFile::StateFile(std::string path, nlohmann::json fingerprint)
    : path_(std::move(path)), fingerprint_(std::move(fingerprint)) {}

std::string StateFile::load() {
  rows_.clear();
  std::ifstream in(path_);
  if (!in) return "no state file " + path_ + ": starting afresh";
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    return fmt::format("state file {} does not parse ({}): starting afresh", path_, e.what());
  }
  if (!j.is_object() || j.value("version", 0) != kVersion || !j.contains("measurements"))
    return fmt::format("state file {} is not a version {} state: starting afresh", path_, kVersion);
  if (j.value("fingerprint", nlohmann::json()) != fingerprint_)
    return fmt::format(
        "state file {} was written for another model, workload or settings ({} vs now {}): starting "
        "afresh",
        path_, j.value("fingerprint", nlohmann::json()).dump(), fingerprint_.dump());
  for (const auto& [key, row] : j["measurements"].items()) {
    auto m = measurement_from_json(row);
    if (!m) return fmt::format("state file {}: measurement '{}': {}: starting afresh", path_, key, m.error().message);
    if (measurement_key(*m) != key) {
      rows_.clear();
      return fmt::format("state file {}: measurement '{}' does not match its key: starting afresh", path_, key);
    }
    rows_[key] = std::move(m).value();
  }
  return fmt::format("resumed from {}: {} finished measurement(s)", path_, rows_.size());
}

Status StateFile::save() const {
  nlohmann::json j = {{"version", kVersion}, {"fingerprint", fingerprint_}, {"measurements", nlohmann::json::object()}};
  for (const auto& [key, m] : rows_) j["measurements"][key] = to_json(m);
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return make_error("cannot write the state file '{}'", tmp);
    out << j.dump(1) << "\n";
    if (!out.flush()) return make_error("cannot write the state file '{}'", tmp);
  }
  if (std::rename(tmp.c_str(), path_.c_str()) != 0) return make_error("cannot rename '{}' to '{}'", tmp, path_);
  return ok_status();
}

const Measurement* StateFile::find(const std::string& key) const {
  auto it = rows_.find(key);
  return it == rows_.end() ? nullptr : &it->second;
}

void StateFile::put(const Measurement& m) { rows_[measurement_key(m)] = m; }

}  // namespace edgelm::tools::optimize
