// GET /admin/config: the effective configuration (defaults < YAML < environment < flags, as
// the server runs with it) as JSON, every secret masked.
//
// Masked: api_keys (their count only), admin_token, any setting whose name says key, token,
// secret or password, and the user:password part of a URL (upstream). Never masked: the
// *names* of environment variables that hold keys (api_key_env=VAR).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "serve/config.h"

namespace edgelm::serve {

// {"key": value, ...} by key (numbers, booleans, strings, lists; byte sizes as numbers).
nlohmann::json effective_config_json(const ServeConfig& config);

// `text` with the user-info of every URL in it ("scheme://user:pass@host") replaced by "****".
std::string mask_url_credentials(const std::string& text);

}  // namespace edgelm::serve
