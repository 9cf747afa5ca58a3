// The HTTP client side of loadtest and soak (see http_client.h).
#include "tools/http_client.h"

#include <cmath>
#include <regex>

namespace edgelm::tools {

Result<HttpTarget> parse_http_url(const std::string& url) {
  static const std::regex re(R"(^(https?)://([A-Za-z0-9.\-_]+|\[[0-9A-Fa-f:.]+\])(:([0-9]{1,5}))?(/.*)?$)");
  std::smatch m;
  if (!std::regex_match(url, m, re))
    return make_error("--url '{}' is not an http(s) URL like http://127.0.0.1:8080", url);
  if (m[4].matched && std::stoi(m[4].str()) > 65535) return make_error("--url '{}': port out of range", url);
  HttpTarget t;
  t.scheme_host_port = m[1].str() + "://" + m[2].str() + (m[3].matched ? m[3].str() : "");
  t.base_path = m[5].matched ? m[5].str() : "";
  while (!t.base_path.empty() && t.base_path.back() == '/') t.base_path.pop_back();
  return t;
}

std::unique_ptr<httplib::Client> make_http_client(const HttpTarget& target, double timeout_s) {
  auto cli = std::make_unique<httplib::Client>(target.scheme_host_port);
  const auto secs = [](double s, auto setter) {
    const double whole = std::floor(s);
    setter(static_cast<time_t>(whole), static_cast<time_t>((s - whole) * 1e6));
  };
  secs(std::min(timeout_s, 10.0), [&](time_t s, time_t us) { cli->set_connection_timeout(s, us); });
  secs(timeout_s, [&](time_t s, time_t us) { cli->set_read_timeout(s, us); });
  secs(timeout_s, [&](time_t s, time_t us) { cli->set_write_timeout(s, us); });
  cli->set_keep_alive(true);
  // Without it a keep-alive POST (headers, then body) meets Nagle + delayed ACK: +40 ms each.
  cli->set_tcp_nodelay(true);
  return cli;
}

httplib::Headers bearer_headers(const std::string& token) {
  httplib::Headers h;
  if (!token.empty()) h.emplace("Authorization", "Bearer " + token);
  return h;
}

bool http_send(httplib::Client& cli, httplib::Request& req, httplib::Response& res, httplib::Error& err,
               const std::function<bool()>& received_nothing) {
  err = httplib::Error::Success;
  bool sent = cli.send(req, res, err);
  // A kept-alive connection the server closed after its last response fails at once with a
  // read or write error and no byte received (llama-server closes after each stream).
  if (!sent && (err == httplib::Error::Read || err == httplib::Error::Write) && received_nothing()) {
    res = httplib::Response();
    sent = cli.send(req, res, err);
  }
  return sent;
}

std::optional<size_t> completion_tokens(const nlohmann::json& j) {
  if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("completion_tokens") &&
      j["usage"]["completion_tokens"].is_number_unsigned())
    return j["usage"]["completion_tokens"].get<size_t>();
  for (const char* key : {"completion_tokens", "tokens_generated", "n_tokens"})
    if (j.contains(key) && j[key].is_number_unsigned()) return j[key].get<size_t>();
  return std::nullopt;
}

void SseReader::feed(const char* data, size_t n) {
  bytes_ += n;
  for (size_t i = 0; i < n; ++i)
    if (data[i] != '\r') buf_ += data[i];
  size_t end;
  while ((end = buf_.find("\n\n")) != std::string::npos) {
    handle_event(buf_.substr(0, end));
    buf_.erase(0, end + 2);
  }
}

void SseReader::handle_event(const std::string& event) {
  size_t pos = 0;
  while (pos < event.size()) {
    size_t nl = event.find('\n', pos);
    if (nl == std::string::npos) nl = event.size();
    std::string_view line(event.data() + pos, nl - pos);
    pos = nl + 1;
    if (line.substr(0, 5) != "data:") continue;
    line.remove_prefix(5);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (line == "[DONE]") {
      done_ = true;
      continue;
    }
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) continue;
    if (j.contains("error")) {
      if (!failed_)
        error_ =
            j["error"].is_object() && j["error"].contains("message") ? j["error"]["message"].dump() : j["error"].dump();
      failed_ = true;
      continue;
    }
    if (auto n = completion_tokens(j)) usage_tokens_ = n;
    if (auto u = j.find("usage"); u != j.end() && u->is_object()) usage_ = *u;
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
    const auto& c = j["choices"][0];
    std::string text;
    if (c.contains("text") && c["text"].is_string()) text = c["text"].get<std::string>();
    if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content") &&
        c["delta"]["content"].is_string())
      text = c["delta"]["content"].get<std::string>();
    if (text.empty()) continue;
    ++chunks_;
    if (on_text_) on_text_(text);
  }
}

}  // namespace edgelm::tools
