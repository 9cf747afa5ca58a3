#include "tools/optimize/sla.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/byte_size.h"

namespace edgelm::tools::optimize {
namespace {

struct Key {
  const char* name;
  const char* op;  // the only operator it takes
  std::optional<double> Sla::*field;
  bool is_size;
  const char* example;
};

const Key kKeys[] = {
    {"p95_ms", "<=", &Sla::p95_ms, false, "p95_ms<=800"},
    {"ttft_p95_ms", "<=", &Sla::ttft_p95_ms, false, "ttft_p95_ms<=300"},
    {"qps", ">=", &Sla::qps, false, "qps>=20"},
    {"kld", "<=", &Sla::kld, false, "kld<=0.05"},
    {"rss", "<=", &Sla::rss_bytes, true, "rss<=1.5G"},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string key_list() {
  std::string out;
  for (const Key& k : kKeys) out += fmt::format("{}{}", out.empty() ? "" : ", ", k.example);
  return out;
}

std::string number_text(double v) { return fmt::format("{:g}", v); }

std::string size_text(double bytes) {
  if (bytes >= double(1 << 30)) return fmt::format("{:g}G", bytes / double(1 << 30));
  if (bytes >= double(1 << 20)) return fmt::format("{:g}M", bytes / double(1 << 20));
  return fmt::format("{:g}", bytes);
}

}  // namespace

Result<Sla> parse_sla(std::string_view text) {
  Sla sla;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = trim(text.substr(start, comma - start));
    start = comma + 1;
    if (item.empty()) continue;
    const size_t op_at = item.find_first_of("<>=!");
    if (op_at == std::string_view::npos)
      return make_error("--sla: '{}' has no operator (items are KEY<=NUMBER or qps>=NUMBER, e.g. {})", item,
                        key_list());
    const std::string_view name = trim(item.substr(0, op_at));
    const Key* key = nullptr;
    for (const Key& k : kKeys)
      if (name == k.name) key = &k;
    if (key == nullptr) return make_error("--sla: unknown key '{}' (known: {})", name, key_list());
    size_t value_at = op_at;
    while (value_at < item.size() && std::string_view("<>=!").find(item[value_at]) != std::string_view::npos)
      ++value_at;
    const std::string_view op = item.substr(op_at, value_at - op_at);
    if (op != key->op)
      return make_error("--sla: '{}': {} takes '{}' ({}), not '{}'", item, key->name, key->op,
                        std::string_view(key->op) == ">=" ? "a floor" : "an upper bound", op);
    if (sla.*(key->field)) return make_error("--sla: {} is given twice", key->name);
    const std::string value(trim(item.substr(value_at)));
    double v = 0;
    if (key->is_size) {
      auto bytes = parse_byte_size(value);
      if (!bytes) return make_error("--sla: {}: {}", key->name, bytes.error().message);
      v = static_cast<double>(*bytes);
    } else {
      size_t pos = 0;
      try {
        v = std::stod(value, &pos);
      } catch (const std::exception&) {
        pos = std::string::npos;
      }
      if (value.empty() || pos != value.size() || !std::isfinite(v))
        return make_error("--sla: {}: '{}' is not a number (e.g. {})", key->name, value, key->example);
      const bool zero_ok = std::string_view(key->name) == "kld";
      if (v < 0 || (v == 0 && !zero_ok))
        return make_error("--sla: {}: {} must be {}", key->name, value, zero_ok ? ">= 0" : "> 0");
    }
    sla.*(key->field) = v;
  }
  return sla;
}

std::string sla_text(const Sla& sla) {
  std::string out;
  for (const Key& k : kKeys) {
    if (!(sla.*(k.field))) continue;
    const double v = *(sla.*(k.field));
    out += fmt::format("{}{}{}{}", out.empty() ? "" : ",", k.name, k.op, k.is_size ? size_text(v) : number_text(v));
  }
  return out;
}

std::vector<SlaCheck> check_sla(const Sla& sla, const Observed& o) {
  std::vector<SlaCheck> out;
  auto add = [&](const char* key, const std::optional<double>& limit, const std::optional<double>& measured, bool floor,
                 bool size) {
    if (!limit) return;
    SlaCheck c;
    c.key = key;
    c.text = fmt::format("{}{}{}", key, floor ? ">=" : "<=", size ? size_text(*limit) : number_text(*limit));
    c.limit = *limit;
    c.measured = measured;
    if (measured) {
      const double num = floor ? *limit : *measured;
      const double den = floor ? *measured : *limit;
      c.ratio = den > 0 ? num / den : (num > 0 ? std::numeric_limits<double>::infinity() : 0.0);
    }
    out.push_back(std::move(c));
  };
  add("p95_ms", sla.p95_ms, o.p95_ms, false, false);
  add("ttft_p95_ms", sla.ttft_p95_ms, o.ttft_p95_ms, false, false);
  add("qps", sla.qps, o.qps, true, false);
  add("kld", sla.kld, o.kld, false, false);
  add("rss", sla.rss_bytes, o.rss_bytes, false, true);
  return out;
}

bool sla_met(const std::vector<SlaCheck>& checks) {
  return std::all_of(checks.begin(), checks.end(), [](const SlaCheck& c) { return c.met(); });
}

bool sla_plausible(const std::vector<SlaCheck>& checks, double time_slack, double rss_slack) {
  return std::all_of(checks.begin(), checks.end(), [&](const SlaCheck& c) {
    const double slack = c.key == "kld" ? 1.0 : c.key == "rss" ? rss_slack : time_slack;
    return !c.measured || c.ratio <= slack;
  });
}

const SlaCheck* worst_check(const std::vector<SlaCheck>& checks) {
  const SlaCheck* worst = nullptr;
  for (const SlaCheck& c : checks)
    if (c.measured && (worst == nullptr || c.ratio > worst->ratio)) worst = &c;
  return worst;
}

}  // namespace edgelm::tools::optimize
