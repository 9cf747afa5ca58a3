#include "format/gguf_value.h"

#include <cmath>
#include <limits>

namespace edgelm::format {

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::u8: return "u8";
    case GgufType::i8: return "i8";
    case GgufType::u16: return "u16";
    case GgufType::i16: return "i16";
    case GgufType::u32: return "u32";
    case GgufType::i32: return "i32";
    case GgufType::f32: return "f32";
    case GgufType::boolean: return "bool";
    case GgufType::string: return "string";
    case GgufType::array: return "array";
    case GgufType::u64: return "u64";
    case GgufType::i64: return "i64";
    case GgufType::f64: return "f64";
  }
  return "?";
}

bool gguf_type_valid(uint32_t raw) { return raw <= static_cast<uint32_t>(GgufType::f64); }

size_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::u8: case GgufType::i8: case GgufType::boolean: return 1;
    case GgufType::u16: case GgufType::i16: return 2;
    case GgufType::u32: case GgufType::i32: case GgufType::f32: return 4;
    case GgufType::u64: case GgufType::i64: case GgufType::f64: return 8;
    case GgufType::string: case GgufType::array: return 0;
  }
  return 0;
}

GgufValue GgufValue::from_array(GgufType elem_type, Array items) {
  GgufValue v(GgufType::array, std::move(items));
  v.elem_type_ = elem_type;
  return v;
}

std::optional<int64_t> GgufValue::as_int() const {
  if (const auto* u = std::get_if<uint64_t>(&data_)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&data_)) return *i;
  return std::nullopt;
}

std::optional<uint64_t> GgufValue::as_uint() const {
  if (const auto* u = std::get_if<uint64_t>(&data_)) return *u;
  if (const auto* i = std::get_if<int64_t>(&data_)) {
    if (*i < 0) return std::nullopt;
    return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

std::optional<double> GgufValue::as_double() const {
  if (const auto* d = std::get_if<double>(&data_)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&data_)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&data_)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const {
  if (const auto* b = std::get_if<bool>(&data_)) return *b;
  return std::nullopt;
}

std::string GgufValue::to_display_string(size_t max_items) const {
  if (const auto* s = as_string()) {
    std::string out = "\"";
    for (const char c : s->substr(0, 120)) {
      if (c == '\n') out += "\\n";
      else if (c == '"') out += "\\\"";
      else out += c;
    }
    if (s->size() > 120) out += "...";
    return out + "\"";
  }
  if (const auto* a = as_array()) {
    std::string out = fmt::format("[{} x {}: ", a->size(), gguf_type_name(elem_type_));
    for (size_t i = 0; i < a->size() && i < max_items; ++i) {
      if (i > 0) out += ", ";
      out += (*a)[i].to_display_string(max_items);
    }
    if (a->size() > max_items) out += ", ...";
    return out + "]";
  }
  if (const auto* b = std::get_if<bool>(&data_)) return *b ? "true" : "false";
  if (const auto* d = std::get_if<double>(&data_)) return fmt::format("{}", *d);
  if (const auto* u = std::get_if<uint64_t>(&data_)) return fmt::format("{}", *u);
  return fmt::format("{}", std::get<int64_t>(data_));
}

void GgufMetadata::set(std::string key, GgufValue value) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(value);
    return;
  }
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

bool GgufMetadata::erase(std::string_view key) {
  auto it = index_.find(std::string(key));
  if (it == index_.end()) return false;
  const size_t at = it->second;
  index_.erase(it);
  entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(at));
  for (auto& [name, i] : index_)
    if (i > at) --i;
  return true;
}

const GgufValue* GgufMetadata::find(std::string_view key) const {
  auto it = index_.find(std::string(key));
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

namespace {

Error missing(std::string_view key) { return make_error("metadata key '{}' is missing", key); }
Error wrong_type(std::string_view key, const GgufValue& v, std::string_view want) {
  return make_error("metadata key '{}' has type {}, expected {}", key, gguf_type_name(v.type()), want);
}

}  // namespace

Result<uint32_t> GgufMetadata::get_u32(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  const auto u = v->as_uint();
  if (!u || *u > std::numeric_limits<uint32_t>::max()) return wrong_type(key, *v, "an integer in u32 range");
  return static_cast<uint32_t>(*u);
}

Result<float> GgufMetadata::get_f32(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  const auto d = v->as_double();
  if (!d) return wrong_type(key, *v, "a number");
  return static_cast<float>(*d);
}

Result<bool> GgufMetadata::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  const auto b = v->as_bool();
  if (!b) return wrong_type(key, *v, "bool");
  return *b;
}

Result<std::string> GgufMetadata::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  if (v->as_string() == nullptr) return wrong_type(key, *v, "string");
  return *v->as_string();
}

Result<const GgufValue::Array*> GgufMetadata::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return missing(key);
  if (v->as_array() == nullptr) return wrong_type(key, *v, "array");
  return v->as_array();
}

Result<uint32_t> GgufMetadata::get_u32_or(std::string_view key, uint32_t fallback) const {
  return contains(key) ? get_u32(key) : Result<uint32_t>(fallback);
}

Result<float> GgufMetadata::get_f32_or(std::string_view key, float fallback) const {
  return contains(key) ? get_f32(key) : Result<float>(fallback);
}

Result<bool> GgufMetadata::get_bool_or(std::string_view key, bool fallback) const {
  return contains(key) ? get_bool(key) : Result<bool>(fallback);
}

}  // namespace edgelm::format
