#include "serve/model_spec.h"

#include <charconv>
#include <set>

namespace edgelm::serve {
namespace {

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    const size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

Result<sample::DynamicTemperature> parse_dyn_temp(std::string_view text, std::string_view spec) {
  const std::vector<std::string_view> parts = split(text, ':');
  if (parts.size() != 3)
    return make_error("model spec '{}': dyn_temp must be MIN:START:FULL (e.g. 0.2:256:2048), got '{}'", spec, text);
  sample::DynamicTemperature d;
  d.enabled = true;
  try {
    size_t used = 0;
    const std::string min_text(parts[0]);
    d.min_temperature = std::stof(min_text, &used);
    if (used != min_text.size()) throw std::invalid_argument("min");
  } catch (const std::exception&) {
    return make_error("model spec '{}': dyn_temp MIN '{}' is not a number", spec, parts[0]);
  }
  for (int i = 1; i <= 2; ++i) {
    int32_t& v = i == 1 ? d.start_tokens : d.full_tokens;
    auto [end, ec] = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), v);
    if (ec != std::errc() || end != parts[i].data() + parts[i].size())
      return make_error("model spec '{}': dyn_temp {} '{}' is not an integer", spec, i == 1 ? "START" : "FULL",
                        parts[i]);
  }
  if (!(d.min_temperature >= 0.0f) || d.start_tokens < 0 || d.full_tokens <= d.start_tokens)
    return make_error("model spec '{}': dyn_temp needs MIN >= 0 and 0 <= START < FULL", spec);
  return d;
}

}  // namespace

bool looks_like_model_spec(std::string_view text) {
  const std::string_view first = text.substr(0, text.find(','));
  return first.find('=') != std::string_view::npos;
}

Result<ModelSpec> parse_model_spec(std::string_view text) {
  const std::vector<std::string_view> items = split(text, ',');
  ModelSpec m;
  const size_t eq = items[0].find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == items[0].size())
    return make_error("model spec '{}': expected NAME=PATH[,tier=small|medium|large,...]", text);
  m.name = std::string(items[0].substr(0, eq));
  m.path = std::string(items[0].substr(eq + 1));
  if (m.name == "auto") return make_error("model spec '{}': 'auto' is reserved for the router", text);
  for (size_t i = 1; i < items.size(); ++i) {
    const size_t e = items[i].find('=');
    if (e == std::string_view::npos) return make_error("model spec '{}': '{}' is not KEY=VALUE", text, items[i]);
    const std::string_view key = items[i].substr(0, e), value = items[i].substr(e + 1);
    if (key == "tier") {
      EDGELM_TRY(m.tier, parse_tier(value));
    } else if (key == "tokenizer") {
      m.tokenizer_path = std::string(value);
    } else if (key == "profile") {
      m.profile_path = std::string(value);
    } else if (key == "dyn_temp") {
      EDGELM_TRY(m.dyn_temp, parse_dyn_temp(value, text));
    } else {
      return make_error("model spec '{}': unknown key '{}' (tier, tokenizer, profile, dyn_temp)", text, key);
    }
  }
  return m;
}

Result<std::vector<ModelSpec>> model_specs(const ServeConfig& cfg) {
  std::vector<ModelSpec> out;
  if (cfg.models.empty()) {
    ModelSpec m;
    m.name = cfg.model_name;
    m.path = cfg.model_path;
    m.tokenizer_path = cfg.tokenizer_path;
    out.push_back(std::move(m));
    return out;
  }
  if (!cfg.model_path.empty())
    return make_error("set either model_path (one model) or models (several), not both");
  std::set<std::string> names;
  for (const std::string& text : cfg.models) {
    ModelSpec m;
    EDGELM_TRY(m, parse_model_spec(text));
    if (m.tokenizer_path.empty()) m.tokenizer_path = cfg.tokenizer_path;
    if (!names.insert(m.name).second) return make_error("model name '{}' is used twice", m.name);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace edgelm::serve
