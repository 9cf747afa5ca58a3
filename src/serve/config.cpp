// Server configuration: YAML file, environment, validation and a secret-free description.
#include "serve/config.h"
#include "serve/url_guard.h"

#include "cache/guards.h"
#include "core/byte_size.h"
#include "engine/speculative.h"
#include "serve/model_spec.h"
#include "serve/router_api.h"

#include <fmt/ranges.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>
#include <variant>

namespace edgelm::serve {
namespace {

using Member = std::variant<std::string ServeConfig::*, int ServeConfig::*, double ServeConfig::*,
                            size_t ServeConfig::*, bool ServeConfig::*, std::vector<std::string> ServeConfig::*>;

struct Field {
  const char* key;
  Member member;
  bool is_size = false;  // size_t written as "1M" etc.
};

// Declaration order of ServeConfig; describe() prints in this order.
const std::vector<Field>& fields() {
  static const std::vector<Field> table = {
      {"model_path", &ServeConfig::model_path},
      {"tokenizer_path", &ServeConfig::tokenizer_path},
      {"host", &ServeConfig::host},
      {"port", &ServeConfig::port},
      {"model_name", &ServeConfig::model_name},
      {"chat_template", &ServeConfig::chat_template},
      {"device_id", &ServeConfig::device_id},
      {"threads", &ServeConfig::threads},
      {"cpu_affinity", &ServeConfig::cpu_affinity},
      {"kv_type", &ServeConfig::kv_type},
      {"kv_memory", &ServeConfig::kv_memory},
      {"max_batch_tokens", &ServeConfig::max_batch_tokens},
      {"max_batch_size", &ServeConfig::max_batch_size},
      {"target_step_ms", &ServeConfig::target_step_ms},
      {"state_snapshot_interval", &ServeConfig::state_snapshot_interval},
      {"kv_disk", &ServeConfig::kv_disk},
      {"kv_disk_size", &ServeConfig::kv_disk_size},
      {"max_queue", &ServeConfig::max_queue},
      {"max_connections", &ServeConfig::max_connections},
      {"header_timeout_s", &ServeConfig::header_timeout_s},
      {"body_timeout_s", &ServeConfig::body_timeout_s},
      {"idle_timeout_s", &ServeConfig::idle_timeout_s},
      {"write_timeout_s", &ServeConfig::write_timeout_s},
      {"stream_buffer_bytes", &ServeConfig::stream_buffer_bytes, true},
      {"max_body_bytes", &ServeConfig::max_body_bytes, true},
      {"max_upload_bytes", &ServeConfig::max_upload_bytes, true},
      {"n_ctx", &ServeConfig::n_ctx},
      {"api_keys", &ServeConfig::api_keys},
      {"admin_token", &ServeConfig::admin_token},
      {"auth_health", &ServeConfig::auth_health},
      {"auth_metrics", &ServeConfig::auth_metrics},
      {"prefix_cache_scope", &ServeConfig::prefix_cache_scope},
      {"drain_timeout_s", &ServeConfig::drain_timeout_s},
      {"cache", &ServeConfig::cache},
      {"cache_threshold", &ServeConfig::cache_threshold},
      {"cache_capacity", &ServeConfig::cache_capacity},
      {"cache_ttl_s", &ServeConfig::cache_ttl_s},
      {"cache_db", &ServeConfig::cache_db},
      {"embedding_model", &ServeConfig::embedding_model},
      {"embedding_prefix", &ServeConfig::embedding_prefix},
      {"cache_calibration", &ServeConfig::cache_calibration},
      {"cache_guards", &ServeConfig::cache_guards},
      {"cache_max_error_rate", &ServeConfig::cache_max_error_rate},
      {"cache_wordnet_dir", &ServeConfig::cache_wordnet_dir},
      {"cache_max_bytes", &ServeConfig::cache_max_bytes, true},
      {"cache_max_prompt_bytes", &ServeConfig::cache_max_prompt_bytes, true},
      {"cache_case_fold", &ServeConfig::cache_case_fold},
      {"cache_nondeterministic", &ServeConfig::cache_nondeterministic},
      {"reasoning_markers", &ServeConfig::reasoning_markers},
      {"reasoning_transition", &ServeConfig::reasoning_transition},
      {"reasoning_effort_low", &ServeConfig::reasoning_effort_low},
      {"reasoning_effort_medium", &ServeConfig::reasoning_effort_medium},
      {"reasoning_effort_high", &ServeConfig::reasoning_effort_high},
      {"spec", &ServeConfig::spec},
      {"draft", &ServeConfig::draft},
      {"draft_model", &ServeConfig::draft_model},
      {"draft_quant", &ServeConfig::draft_quant},
      {"draft_max", &ServeConfig::draft_max},
      {"draft_min", &ServeConfig::draft_min},
      {"models", &ServeConfig::models},
      {"upstream", &ServeConfig::upstream},
      {"default_budget_ms", &ServeConfig::default_budget_ms},
      {"startup_profile", &ServeConfig::startup_profile},
      {"startup_profile_budget_s", &ServeConfig::startup_profile_budget_s},
      {"memory_budget", &ServeConfig::memory_budget},
      {"no_mmap", &ServeConfig::no_mmap},
      {"mmproj", &ServeConfig::mmproj},
      {"image_max_pixels", &ServeConfig::image_max_pixels},
      {"max_images_per_request", &ServeConfig::max_images_per_request},
      {"image_cache", &ServeConfig::image_cache},
      {"media_path", &ServeConfig::media_path},
      {"allow_image_urls", &ServeConfig::allow_image_urls},
      {"image_url_timeout_s", &ServeConfig::image_url_timeout_s},
      {"image_url_allow_cidr", &ServeConfig::image_url_allow_cidr},
      {"image_max_bytes", &ServeConfig::image_max_bytes, true},
      {"pooling", &ServeConfig::pooling},
      {"embed_batch_tokens", &ServeConfig::embed_batch_tokens},
  };
  return table;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// `where` names the source in errors: "config key 'port'" or "EDGELM_PORT".
Result<int> parse_int(std::string_view text, const std::string& where) {
  text = trim(text);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size())
    return make_error("{}: '{}' is not an integer", where, text);
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    return make_error("{}: {} is out of range", where, text);
  return static_cast<int>(v);
}

Result<double> parse_double(std::string_view text, const std::string& where) {
  const std::string s(trim(text));
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(s, &pos);
  } catch (const std::exception&) {
    return make_error("{}: '{}' is not a number", where, s);
  }
  if (pos != s.size() || !std::isfinite(v)) return make_error("{}: '{}' is not a number", where, s);
  return v;
}

Result<bool> parse_bool(std::string_view text, const std::string& where) {
  const std::string s = lower(trim(text));
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  return make_error("{}: '{}' is not a boolean (true/false, 1/0, yes/no, on/off)", where, s);
}

// "1M", "64K", "2G", "1048576" -> bytes (core/byte_size.h), errors prefixed with `where`.
Result<size_t> parse_size(std::string_view text, const std::string& where) {
  Result<size_t> r = parse_byte_size(trim(text));
  if (!r.ok()) return make_error("{}: {}", where, r.error().message);
  return r;
}

std::vector<std::string> split_keys(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = trim(text.substr(start, comma - start));
    if (!item.empty()) out.emplace_back(item);
    start = comma + 1;
  }
  return out;
}

// Sets one field from text (environment variables; YAML scalars).
Status set_from_text(ServeConfig& c, const Field& f, std::string_view text, const std::string& where) {
  return std::visit(
      [&](auto member) -> Status {
        using T = std::remove_reference_t<decltype(c.*member)>;
        if constexpr (std::is_same_v<T, std::string>) {
          c.*member = std::string(text);
        } else if constexpr (std::is_same_v<T, int>) {
          EDGELM_TRY(c.*member, parse_int(text, where));
        } else if constexpr (std::is_same_v<T, double>) {
          EDGELM_TRY(c.*member, parse_double(text, where));
        } else if constexpr (std::is_same_v<T, size_t>) {
          EDGELM_TRY(c.*member, parse_size(text, where));
        } else if constexpr (std::is_same_v<T, bool>) {
          EDGELM_TRY(c.*member, parse_bool(text, where));
        } else if (std::string_view(f.key) == "models") {  // specs contain commas
          std::vector<std::string> items;
          for (size_t start = 0; start <= text.size();) {
            const size_t end = std::min(text.find(';', start), text.size());
            if (std::string_view item = trim(text.substr(start, end - start)); !item.empty()) items.emplace_back(item);
            start = end + 1;
          }
          c.*member = std::move(items);
        } else {
          c.*member = split_keys(text);
        }
        return ok_status();
      },
      f.member);
}

Status set_from_yaml(ServeConfig& c, const Field& f, const YAML::Node& node) {
  const std::string where = fmt::format("config key '{}'", f.key);
  const bool is_list = std::holds_alternative<std::vector<std::string> ServeConfig::*>(f.member);
  if (is_list && node.IsSequence()) {
    std::vector<std::string> keys;
    for (const auto& item : node) {
      if (!item.IsScalar()) return make_error("{}: expected a list of strings", where);
      keys.push_back(item.Scalar());
    }
    c.*std::get<std::vector<std::string> ServeConfig::*>(f.member) = std::move(keys);
    return ok_status();
  }
  if (node.IsNull()) return make_error("{}: has no value", where);
  if (!node.IsScalar())
    return make_error("{}: expected {}, got a {}", where, is_list ? "a list of strings" : "a single value",
                      node.IsSequence() ? "list" : "mapping");
  return set_from_text(c, f, node.Scalar(), where);
}

std::string display_value(const ServeConfig& c, const Field& f) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& v = c.*member;
        using T = std::remove_cvref_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return v.empty() ? std::string("(none)") : v;
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          return std::string();  // handled by the caller (secrets)
        } else {
          return fmt::format("{}", v);
        }
      },
      f.member);
}

Status check_secret(const std::string& secret, const char* what) {
  if (secret.empty()) return make_error("{}: an empty key is not allowed", what);
  for (char ch : secret)
    if (std::isspace(static_cast<unsigned char>(ch)) || std::iscntrl(static_cast<unsigned char>(ch)))
      return make_error("{}: keys must not contain blanks or control characters", what);
  return ok_status();
}

}  // namespace

Result<ServeConfig> load_config_file(const std::string& yaml_path, ServeConfig base) {
  std::ifstream in(yaml_path);
  if (!in) return make_error("cannot read config file '{}'", yaml_path);
  YAML::Node root;
  try {
    root = YAML::Load(in);
  } catch (const YAML::Exception& e) {
    return make_error("config file '{}': line {}: {}", yaml_path, e.mark.line + 1, e.msg);
  }
  if (root.IsNull()) return base;  // empty file: nothing to override
  if (!root.IsMap()) return make_error("config file '{}': expected a mapping of settings at the top level", yaml_path);
  std::vector<std::string> key_files;
  for (const auto& kv : root) {
    if (!kv.first.IsScalar()) return make_error("config file '{}': keys must be plain names", yaml_path);
    const std::string key = kv.first.Scalar();
    if (key == "api_key_file") {
      if (!kv.second.IsScalar())
        return make_error("config file '{}': config key 'api_key_file': expected a path", yaml_path);
      key_files.push_back(kv.second.Scalar());
      continue;
    }
    const auto& table = fields();
    auto it = std::find_if(table.begin(), table.end(), [&](const Field& f) { return key == f.key; });
    if (it == table.end()) return make_error("config file '{}': unknown key '{}'", yaml_path, key);
    if (Status st = set_from_yaml(base, *it, kv.second); !st.ok())
      return make_error("config file '{}': {}", yaml_path, st.error().message);
  }
  // Key files apply after the inline list, so both can be combined.
  for (const auto& file : key_files) {
    std::filesystem::path p(file);
    if (p.is_relative()) p = std::filesystem::path(yaml_path).parent_path() / p;
    EDGELM_TRY_STATUS(load_api_key_file(base, p.string()));
  }
  return base;
}

Status apply_env(ServeConfig& config, const std::function<const char*(const char*)>& getenv) {
  for (const Field& f : fields()) {
    std::vector<std::string> names = {"EDGELM_" + upper(f.key)};
    if (std::string_view(f.key) == "model_path") names.insert(names.begin(), "EDGELM_MODEL");
    if (std::string_view(f.key) == "tokenizer_path") names.insert(names.begin(), "EDGELM_TOKENIZER");
    for (const auto& name : names) {
      const char* value = getenv(name.c_str());
      if (value == nullptr || *value == '\0') continue;
      EDGELM_TRY_STATUS(set_from_text(config, f, value, name));
      break;  // the short name wins over the long one
    }
  }
  return ok_status();
}

Status load_api_key_file(ServeConfig& config, const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("cannot read API key file '{}'", path);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    const std::string_view key = trim(line);
    if (key.empty() || key.front() == '#') continue;
    config.api_keys.emplace_back(key);
    ++n;
  }
  if (n == 0) return make_error("API key file '{}' has no keys", path);
  return ok_status();
}

void fill_derived_defaults(ServeConfig& config) {
  if (config.model_name.empty() && !config.model_path.empty())
    config.model_name = std::filesystem::path(config.model_path).stem().string();
  if (config.device_id.empty()) config.device_id = default_device_id();
}

Status validate(const ServeConfig& c) {
  if (c.model_path.empty() && c.models.empty())
    return make_error("no model: set model_path (or models) in the config file, EDGELM_MODEL or --model");
  EDGELM_TRY(const std::vector<ModelSpec> specs, model_specs(c));
  if (!c.upstream.empty()) {
    EDGELM_TRY(const UpstreamConfig up, parse_upstream_flag(c.upstream));
    for (const ModelSpec& m : specs)
      if (m.name == up.name) return make_error("the upstream and a local model are both named '{}'", up.name);
  }
  if (!(c.default_budget_ms > 0)) return make_error("default_budget_ms must be > 0, got {}", c.default_budget_ms);
  if (c.startup_profile != "quick" && c.startup_profile != "off")
    return make_error("startup_profile '{}' is not one of quick, off", c.startup_profile);
  if (!(c.startup_profile_budget_s >= 0))
    return make_error("startup_profile_budget_s must be >= 0, got {}", c.startup_profile_budget_s);
  EDGELM_TRY_STATUS(memory_budget_bytes(c));
  if (c.host.empty()) return make_error("host must not be empty");
  if (c.port < 0 || c.port > 65535)
    return make_error("port {} is out of range (0..65535; 0 picks a free port)", c.port);
  if (c.threads < 0) return make_error("threads must be >= 0 (0: all hardware threads), got {}", c.threads);
  if (c.kv_type != "f16" && c.kv_type != "f32" && c.kv_type != "q8_0")
    return make_error("kv_type '{}' is not one of f16, f32, q8_0", c.kv_type);
  EDGELM_TRY_STATUS(parse_size(c.kv_memory, "kv_memory"));
  {
    EDGELM_TRY(const size_t disk_size, parse_size(c.kv_disk_size, "kv_disk_size"));
    if (!c.kv_disk.empty() && disk_size < (size_t{1} << 20))
      return make_error("kv_disk_size must be at least 1M, got {}", c.kv_disk_size);
  }
  if (c.max_batch_tokens < 1) return make_error("max_batch_tokens must be >= 1, got {}", c.max_batch_tokens);
  if (c.max_batch_size < 1) return make_error("max_batch_size must be >= 1, got {}", c.max_batch_size);
  if (!(c.target_step_ms >= 0)) return make_error("target_step_ms must be >= 0, got {}", c.target_step_ms);
  if (c.state_snapshot_interval < 0 || c.state_snapshot_interval > (1 << 20))
    return make_error("state_snapshot_interval must be in [0, {}] blocks, got {}", 1 << 20, c.state_snapshot_interval);
  if (c.max_queue < 1) return make_error("max_queue must be >= 1, got {}", c.max_queue);
  if (c.max_connections < 1) return make_error("max_connections must be >= 1, got {}", c.max_connections);
  for (const auto& [name, v] : {std::pair{"header_timeout_s", c.header_timeout_s},
                                {"body_timeout_s", c.body_timeout_s},
                                {"idle_timeout_s", c.idle_timeout_s},
                                {"write_timeout_s", c.write_timeout_s}})
    if (!(v > 0)) return make_error("{} must be > 0, got {}", name, v);
  if (c.stream_buffer_bytes < 4096)
    return make_error("stream_buffer_bytes must be >= 4096, got {}", c.stream_buffer_bytes);
  if (!c.prefix_cache_scope.empty() && c.prefix_cache_scope != "key" && c.prefix_cache_scope != "global")
    return make_error("prefix_cache_scope '{}' is not one of key, global", c.prefix_cache_scope);
  if (c.max_body_bytes < 1) return make_error("max_body_bytes must be >= 1");
  if (c.max_upload_bytes < 1) return make_error("max_upload_bytes must be >= 1");
  if (c.n_ctx < 0) return make_error("n_ctx must be >= 0 (0: the model's), got {}", c.n_ctx);
  if (c.image_max_pixels < 1) return make_error("image_max_pixels must be >= 1, got {}", c.image_max_pixels);
  if (c.max_images_per_request < 1)
    return make_error("max_images_per_request must be >= 1, got {}", c.max_images_per_request);
  if (c.image_cache < 0) return make_error("image_cache must be >= 0 (0: no encoder cache), got {}", c.image_cache);
  if (!(c.image_url_timeout_s > 0))
    return make_error("image_url_timeout_s must be > 0 seconds, got {}", c.image_url_timeout_s);
  if (c.image_max_bytes < 1) return make_error("image_max_bytes must be >= 1");
  if (!c.pooling.empty() && c.pooling != "mean" && c.pooling != "cls" && c.pooling != "last")
    return make_error("pooling '{}' is not one of mean, cls, last (empty: the model file's)", c.pooling);
  if (c.embed_batch_tokens < 1) return make_error("embed_batch_tokens must be >= 1, got {}", c.embed_batch_tokens);
  for (const std::string& r : c.image_url_allow_cidr)
    if (auto cidr = Cidr::parse(r); !cidr.ok()) return make_error("image_url_allow_cidr: {}", cidr.error().message);
  for (const auto& [key, v] : {std::pair{"reasoning_effort_low", c.reasoning_effort_low},
                               std::pair{"reasoning_effort_medium", c.reasoning_effort_medium},
                               std::pair{"reasoning_effort_high", c.reasoning_effort_high}})
    if (v < 0) return make_error("{} must be >= 0 tokens, got {}", key, v);
  if (!c.reasoning_markers.empty()) {
    const size_t comma = c.reasoning_markers.find(',');
    if (comma == std::string::npos || comma == 0 || comma + 1 == c.reasoning_markers.size())
      return make_error("reasoning_markers must be \"START,END\" (e.g. \"<think>,</think>\"), got '{}'",
                        c.reasoning_markers);
  }
  for (const auto& key : c.api_keys) EDGELM_TRY_STATUS(check_secret(key, "api_keys"));
  if (!c.admin_token.empty()) EDGELM_TRY_STATUS(check_secret(c.admin_token, "admin_token"));
  if (!(c.drain_timeout_s >= 0)) return make_error("drain_timeout_s must be >= 0, got {}", c.drain_timeout_s);
  if (c.cache != "off" && c.cache != "exact" && c.cache != "semantic")
    return make_error("cache '{}' is not one of off, exact, semantic", c.cache);
  if (!(c.cache_threshold >= 0 && c.cache_threshold <= 1))
    return make_error("cache_threshold must be in [0, 1], got {}", c.cache_threshold);
  if (c.cache_capacity < 1) return make_error("cache_capacity must be >= 1, got {}", c.cache_capacity);
  if (!(c.cache_ttl_s >= 0)) return make_error("cache_ttl_s must be >= 0 (0: no expiry), got {}", c.cache_ttl_s);
  if (c.cache_max_bytes < 1) return make_error("cache_max_bytes must be >= 1");
  if (auto g = cache::parse_guard_list(c.cache_guards); !g.ok())
    return make_error("cache_guards: {}", g.error().message);
  if (!(c.cache_max_error_rate > 0 && c.cache_max_error_rate < 1))
    return make_error("cache_max_error_rate must be in (0, 1) (e.g. 0.01), got {}", c.cache_max_error_rate);
  if (c.embedding_model.empty())
    return make_error("embedding_model must be lexical, lexical-plain, self or the path of an embedding GGUF");
  engine::SpecOptions spec;
  spec.draft_max = c.draft_max;
  spec.draft_min = c.draft_min;
  EDGELM_TRY_STATUS(engine::parse_spec_mode(c.spec, spec));
  EDGELM_TRY_STATUS(engine::validate(spec));  // ranges; the draft itself loads with the model
  if (!c.draft_model.empty() && !c.draft_quant.empty())
    return make_error("draft_model and draft_quant exclude each other");
  if (!c.draft.empty() && c.draft != "mtp")
    return make_error("draft: '{}' is not a built-in draft source (mtp; a draft model file is draft_model)", c.draft);
  const bool mtp = c.draft == "mtp" || spec.mode == engine::SpecMode::mtp;
  if (mtp && (!c.draft_model.empty() || !c.draft_quant.empty() || spec.mode == engine::SpecMode::ngram))
    return make_error("draft mtp excludes spec ngram, draft_model and draft_quant");
  if ((!c.draft_model.empty() || !c.draft_quant.empty()) && spec.mode == engine::SpecMode::ngram)
    return make_error("spec ngram and a draft model exclude each other");
  return ok_status();
}

std::string describe(const ServeConfig& c) {
  std::string out;
  for (const Field& f : fields()) {
    std::string value;
    if (std::string_view(f.key) == "api_keys") {
      value = c.api_keys.empty() ? "(none)"
                                 : fmt::format("**** ({} key{})", c.api_keys.size(), c.api_keys.size() == 1 ? "" : "s");
    } else if (std::string_view(f.key) == "models") {
      value = c.models.empty() ? "(none)" : fmt::format("{}", fmt::join(c.models, "; "));
    } else if (std::string_view(f.key) == "admin_token") {
      value = c.admin_token.empty() ? "(none)" : "**** (1 token)";
    } else {
      value = display_value(c, f);
    }
    out += fmt::format("{}: {}\n", f.key, value);
  }
  return out;
}

void for_each_setting(const ServeConfig& c,
                      const std::function<void(std::string_view key, const SettingValue& value, bool is_size)>& fn) {
  for (const Field& f : fields()) {
    std::visit(
        [&](auto member) {
          const auto& v = c.*member;
          using T = std::remove_cvref_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int> || std::is_same_v<T, size_t>)
            fn(f.key, SettingValue(static_cast<int64_t>(v)), f.is_size);
          else
            fn(f.key, SettingValue(v), f.is_size);
        },
        f.member);
  }
}

Result<size_t> memory_budget_bytes(const ServeConfig& c) {
  const std::string_view text = trim(c.memory_budget);
  if (text.empty() || text == "0") return size_t{0};
  return parse_size(text, "memory_budget");
}

std::string default_device_id() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "edge";
  return name;
}

}  // namespace edgelm::serve
