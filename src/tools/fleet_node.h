// One edgelm node as `edgelm fleet` talks to it: GET /health, the admin routes (POST
// /admin/drain, /admin/undrain, /admin/smoke: serve/drain.h) and POST /reload (by server-side
// path, or streaming a local model file as multipart with its SHA-256 for the node to check).
// Every call has a finite timeout; every error names the node, the call and the node's answer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "tools/http_client.h"

namespace edgelm::tools {

struct NodeHealth {
  int http_status = 0;      // 200 in rotation, 503 loading / draining / failed
  std::string state;        // /health "state"
  std::string model;        // the served model's name
  std::string model_state;  // the state without a drain ("ready" when the model serves)
  bool drained = false;     // by POST /admin/drain
  int64_t in_flight = 0, queue_depth = 0, running = 0;
  std::string breaker;  // the upstream's circuit breaker; "" without an upstream
};

struct DrainInfo {
  std::string model, model_path, tokenizer_path;  // what the node served when it was drained
  int64_t in_flight = 0;
};

struct SmokeResult {
  std::string model, text;
  int completion_tokens = 0;
  double latency_ms = 0;
};

class FleetNode {
 public:
  // url: "http://host:port"; token: the admin token (may be empty for health()).
  static Result<FleetNode> make(const std::string& url, std::string token, double timeout_s = 30);

  const std::string& url() const { return url_; }
  Result<NodeHealth> health() const;
  Result<DrainInfo> drain() const;
  Status undrain() const;
  Result<SmokeResult> smoke() const;
  // POST /admin/kv/prewarm with `body` (serve/routes_kv.cpp); the node's answer.
  Result<nlohmann::json> prewarm(const nlohmann::json& body, double timeout_s) const;
  // POST /reload {"path", "name"?, "tokenizer"?}; returns the node's model name after the reload.
  Result<std::string> reload_path(const std::string& path, const std::string& name,
                                  const std::string& tokenizer = "") const;
  // POST /reload as multipart: the file `path` streamed as field "model", with "sha256" (hex)
  // and "name" when given. Returns the node's model name after the reload.
  Result<std::string> reload_upload(const std::string& path, const std::string& sha256, const std::string& name) const;

 private:
  Result<nlohmann::json> post_json(const std::string& path, const nlohmann::json& body, double timeout_s) const;

  std::string url_, token_;
  HttpTarget target_;
  double timeout_s_ = 30;
};

// "URL,URL,..." (each http://host:port) -> the list; errors name --nodes.
Result<std::vector<std::string>> parse_node_list(const std::string& text);

// The hex SHA-256 of a file. Errors: it cannot be read.
Result<std::string> file_sha256(const std::string& path);

}  // namespace edgelm::tools
