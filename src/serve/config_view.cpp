#include "serve/config_view.h"

#include <algorithm>
#include <cctype>

namespace edgelm::serve {
namespace {

using nlohmann::json;

bool secret_name(std::string_view key) {
  if (key.ends_with("_env")) return false;  // the name of a variable, not its value
  for (std::string_view word : {"key", "token", "secret", "password"})
    if (key.find(word) != std::string_view::npos) return true;
  return false;
}

}  // namespace

std::string mask_url_credentials(const std::string& text) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t scheme = text.find("://", pos);
    if (scheme == std::string::npos) break;
    const size_t host = scheme + 3;
    // The authority ends at '/', '?', '#', ',' or a blank; user-info is what precedes its last '@'.
    size_t end = host;
    while (end < text.size() && text[end] != '/' && text[end] != '?' && text[end] != '#' && text[end] != ',' &&
           !std::isspace(static_cast<unsigned char>(text[end])))
      ++end;
    const size_t at = text.rfind('@', end == host ? host : end - 1);
    out.append(text, pos, host - pos);
    if (at != std::string::npos && at >= host && at < end) {
      out += "****";
      out.append(text, at, end - at);
    } else {
      out.append(text, host, end - host);
    }
    pos = end;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

json effective_config_json(const ServeConfig& config) {
  json out = json::object();
  for_each_setting(config, [&](std::string_view key, const SettingValue& value, bool) {
    const std::string k(key);
    if (k == "api_keys") {
      out[k] = {{"count", config.api_keys.size()}, {"keys", std::vector<std::string>(config.api_keys.size(), "****")}};
      return;
    }
    if (secret_name(key)) {
      // A secret: whether it is set, never what it is.
      const bool set = std::visit(
          [](const auto& v) {
            using T = std::remove_cvref_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::vector<std::string>>)
              return !v.empty();
            else
              return true;
          },
          value);
      out[k] = set ? json("****") : json(nullptr);
      return;
    }
    std::visit(
        [&](const auto& v) {
          using T = std::remove_cvref_t<decltype(v)>;
          if constexpr (std::is_same_v<T, std::string>) {
            out[k] = mask_url_credentials(v);
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            json list = json::array();
            for (const std::string& item : v) list.push_back(mask_url_credentials(item));
            out[k] = std::move(list);
          } else {
            out[k] = v;
          }
        },
        value);
  });
  return out;
}

}  // namespace edgelm::serve
