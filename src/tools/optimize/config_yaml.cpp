#include "tools/optimize/config_yaml.h"

#include <fstream>

#include <nlohmann/json.hpp>

namespace edgelm::tools::optimize {
namespace {

// A YAML double-quoted scalar (JSON string syntax is valid YAML).
std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

}  // namespace

std::string candidate_yaml(const Candidate& c, const std::string& model_path, const std::vector<std::string>& comment) {
  std::string y;
  for (const std::string& line : comment) y += "# " + line + "\n";
  y += "model_path: " + quoted(model_path) + "\n";
  y += "host: \"127.0.0.1\"\nport: 8080\n";
  y += fmt::format("threads: {}\n", c.threads);
  if (c.pinned) y += "cpu_affinity: " + quoted(cpu_list(c.threads)) + "\n";
  y += "kv_type: " + quoted(c.kv_type) + "\n";
  if (c.kv_memory_bytes > 0) y += fmt::format("kv_memory: \"{}M\"\n", (c.kv_memory_bytes + (1 << 20) - 1) >> 20);
  if (c.max_batch_size > 0) y += fmt::format("max_batch_size: {}\n", c.max_batch_size);
  if (c.max_batch_tokens > 0) y += fmt::format("max_batch_tokens: {}\n", c.max_batch_tokens);
  if (c.target_step_ms >= 0) y += fmt::format("target_step_ms: {:g}\n", c.target_step_ms);
  const engine::DraftSpec ds = draft_spec(c);
  if (!ds.draft_quant.empty())
    y += "draft_quant: " + quoted(ds.draft_quant) + "\n";
  else
    y += "spec: " + quoted(ds.spec) + "\n";
  return y;
}

Status write_candidate_yaml(const std::string& path, const Candidate& c, const std::string& model_path,
                            const std::vector<std::string>& comment) {
  std::ofstream out(path, std::ios::trunc);
  if (!out) return make_error("cannot write '{}'", path);
  out << candidate_yaml(c, model_path, comment);
  if (!out.flush()) return make_error("cannot write '{}'", path);
  return ok_status();
}

}  // namespace edgelm::tools::optimize
