#include "tools/fleet_node.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "serve/sha256.h"

namespace edgelm::tools {
namespace {

using nlohmann::json;

// The node's error message from an OpenAI-shaped error body, else the body itself (shortened).
std::string answer_text(int status, const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() && j["error"].contains("message") &&
      j["error"]["message"].is_string())
    return fmt::format("{} {}", status, j["error"]["message"].get<std::string>());
  return fmt::format("{} {}", status, body.substr(0, 200));
}

}  // namespace

Result<FleetNode> FleetNode::make(const std::string& url, std::string token, double timeout_s) {
  FleetNode n;
  EDGELM_TRY(n.target_, parse_http_url(url));
  n.url_ = url;
  n.token_ = std::move(token);
  n.timeout_s_ = timeout_s;
  return n;
}

Result<NodeHealth> FleetNode::health() const {
  auto cli = make_http_client(target_, std::min(timeout_s_, 5.0));
  auto res = cli->Get(target_.base_path + "/health");
  if (!res) return make_error("{}: GET /health: no answer ({})", url_, httplib::to_string(res.error()));
  const json j = json::parse(res->body, nullptr, false);
  if (!j.is_object()) return make_error("{}: GET /health: {} with a body that is not JSON", url_, res->status);
  NodeHealth h;
  h.http_status = res->status;
  h.state = j.value("state", "");
  h.model = j.value("model", "");
  h.model_state = j.value("model_state", h.http_status == 200 ? h.state : "");
  h.drained = j.value("drained", false);
  h.in_flight = j.value("in_flight", int64_t{0});
  h.queue_depth = j.value("queue_depth", int64_t{0});
  h.running = j.value("running", int64_t{0});
  if (j.contains("upstream") && j["upstream"].is_object()) h.breaker = j["upstream"].value("breaker", "");
  return h;
}

Result<json> FleetNode::post_json(const std::string& path, const json& body, double timeout_s) const {
  auto cli = make_http_client(target_, timeout_s);
  auto res = cli->Post(target_.base_path + path, bearer_headers(token_), body.dump(), "application/json");
  if (!res) return make_error("{}: POST {}: no answer ({})", url_, path, httplib::to_string(res.error()));
  if (res->status != 200) return make_error("{}: POST {}: {}", url_, path, answer_text(res->status, res->body));
  json j = json::parse(res->body, nullptr, false);
  if (!j.is_object()) return make_error("{}: POST {}: the answer is not a JSON object", url_, path);
  return j;
}

Result<DrainInfo> FleetNode::drain() const {
  EDGELM_TRY(const json j, post_json("/admin/drain", json::object(), timeout_s_));
  DrainInfo d;
  d.model = j.value("model", "");
  d.model_path = j.value("model_path", "");
  d.tokenizer_path = j.value("tokenizer_path", "");
  d.in_flight = j.value("in_flight", int64_t{0});
  return d;
}

Status FleetNode::undrain() const {
  EDGELM_TRY(const json j, post_json("/admin/undrain", json::object(), timeout_s_));
  (void)j;
  return {};
}

Result<SmokeResult> FleetNode::smoke() const {
  EDGELM_TRY(const json j, post_json("/admin/smoke", json::object(), timeout_s_));
  SmokeResult s;
  s.model = j.value("model", "");
  s.text = j.value("text", "");
  s.completion_tokens = j.value("completion_tokens", 0);
  s.latency_ms = j.value("latency_ms", 0.0);
  if (s.completion_tokens < 1) return make_error("{}: POST /admin/smoke: the model generated no token", url_);
  return s;
}

Result<json> FleetNode::prewarm(const json& body, double timeout_s) const {
  return post_json("/admin/kv/prewarm", body, timeout_s);
}

Result<std::string> FleetNode::reload_path(const std::string& path, const std::string& name,
                                           const std::string& tokenizer) const {
  json body = {{"path", path}};
  if (!name.empty()) body["name"] = name;
  if (!tokenizer.empty()) body["tokenizer"] = tokenizer;
  // Loading a large model takes a while: a generous timeout.
  EDGELM_TRY(const json j, post_json("/reload", body, std::max(timeout_s_, 600.0)));
  return j.value("model", "");
}

Result<std::string> FleetNode::reload_upload(const std::string& path, const std::string& sha256,
                                             const std::string& name) const {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) return make_error("cannot read the model file '{}': {}", path, ec.message());
  const std::string boundary = "edgelm-fleet-7d1c0f3a9b";
  std::string head;
  auto field = [&](const std::string& n, const std::string& v) {
    head += fmt::format("--{}\r\nContent-Disposition: form-data; name=\"{}\"\r\n\r\n{}\r\n", boundary, n, v);
  };
  if (!sha256.empty()) field("sha256", sha256);
  if (!name.empty()) field("name", name);
  head += fmt::format(
      "--{}\r\nContent-Disposition: form-data; name=\"model\"; filename=\"{}\"\r\n"
      "Content-Type: application/octet-stream\r\n\r\n",
      boundary, std::filesystem::path(path).filename().string());
  const std::string tail = fmt::format("\r\n--{}--\r\n", boundary);
  auto file = std::make_shared<std::ifstream>(path, std::ios::binary);
  if (!*file) return make_error("cannot read the model file '{}'", path);
  const size_t total = head.size() + static_cast<size_t>(size) + tail.size();
  const size_t file_end = head.size() + static_cast<size_t>(size);
  auto cli = make_http_client(target_, std::max(timeout_s_, 600.0));
  auto res = cli->Post(
      target_.base_path + "/reload", bearer_headers(token_), total,
      [&](size_t offset, size_t length, httplib::DataSink& sink) {
        std::vector<char> buf(std::min<size_t>(length, 1 << 16));
        size_t n = 0;
        if (offset < head.size()) {
          n = std::min(buf.size(), head.size() - offset);
          std::copy_n(head.data() + offset, n, buf.data());
        } else if (offset < file_end) {
          file->seekg(static_cast<std::streamoff>(offset - head.size()));
          n = std::min(buf.size(), file_end - offset);
          file->read(buf.data(), static_cast<std::streamsize>(n));
          if (file->gcount() != static_cast<std::streamsize>(n)) return false;
        } else {
          n = std::min(buf.size(), total - offset);
          std::copy_n(tail.data() + (offset - file_end), n, buf.data());
        }
        return sink.write(buf.data(), n);
      },
      "multipart/form-data; boundary=" + boundary);
  if (!res) return make_error("{}: POST /reload (upload): no answer ({})", url_, httplib::to_string(res.error()));
  if (res->status != 200) return make_error("{}: POST /reload (upload): {}", url_, answer_text(res->status, res->body));
  const json j = json::parse(res->body, nullptr, false);
  return j.is_object() ? j.value("model", "") : std::string();
}

Result<std::vector<std::string>> parse_node_list(const std::string& text) {
  std::vector<std::string> nodes;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    std::string url = text.substr(pos, comma - pos);
    while (!url.empty() && url.back() == '/') url.pop_back();
    if (url.empty()) return make_error("--nodes: an empty entry in '{}' (give URL,URL,...)", text);
    auto t = parse_http_url(url);
    if (!t) return make_error("--nodes: '{}': {}", url, t.error().message);
    for (const std::string& n : nodes)
      if (n == url) return make_error("--nodes: '{}' is listed twice", url);
    nodes.push_back(url);
    pos = comma + 1;
  }
  return nodes;
}

Result<std::string> file_sha256(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read the model file '{}'", path);
  serve::Sha256 h;
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) h.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return make_error("cannot read the model file '{}'", path);
  return h.hex_digest();
}

}  // namespace edgelm::tools
