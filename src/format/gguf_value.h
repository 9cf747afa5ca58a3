// GGUF metadata values and the ordered key/value table of a model file.
//
// A value keeps the exact GGUF type it was read with (u32 stays u32), so a file read and
// written back keeps its types; the typed getters convert between numeric types when the
// value fits, so callers need not care whether a converter wrote u32 or i32.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "core/result.h"

namespace edgelm::format {

enum class GgufType : uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

std::string_view gguf_type_name(GgufType t);
bool gguf_type_valid(uint32_t raw);
// Size in bytes of a fixed-size scalar type; 0 for string and array.
size_t gguf_scalar_size(GgufType t);

class GgufValue {
 public:
  using Array = std::vector<GgufValue>;

  GgufValue() : GgufValue(GgufType::u8, uint64_t{0}) {}
  static GgufValue from_u32(uint32_t v) { return {GgufType::u32, uint64_t{v}}; }
  static GgufValue from_i32(int32_t v) { return {GgufType::i32, int64_t{v}}; }
  static GgufValue from_u64(uint64_t v) { return {GgufType::u64, v}; }
  static GgufValue from_f32(float v) { return {GgufType::f32, double{v}}; }
  static GgufValue from_bool(bool v) { return {GgufType::boolean, v}; }
  static GgufValue from_string(std::string v) { return {GgufType::string, std::move(v)}; }
  static GgufValue from_array(GgufType elem_type, Array items);
  // Any scalar type from its widest representation (used by the reader).
  static GgufValue from_unsigned(GgufType t, uint64_t v) { return {t, v}; }
  static GgufValue from_signed(GgufType t, int64_t v) { return {t, v}; }
  static GgufValue from_float(GgufType t, double v) { return {t, v}; }

  GgufType type() const { return type_; }
  GgufType array_type() const { return elem_type_; }  // meaningful for arrays only
  bool is_array() const { return type_ == GgufType::array; }

  // Numeric views; nullopt when the type is not numeric or the value does not fit.
  std::optional<int64_t> as_int() const;
  std::optional<uint64_t> as_uint() const;
  std::optional<double> as_double() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const { return std::get_if<std::string>(&data_); }
  const Array* as_array() const { return std::get_if<Array>(&data_); }

  // Short human-readable rendering (arrays are abbreviated), for `edgelm info`.
  std::string to_display_string(size_t max_items = 8) const;

 private:
  template <typename V>
  GgufValue(GgufType t, V v) : type_(t), data_(std::move(v)) {}

  GgufType type_;
  GgufType elem_type_ = GgufType::u8;
  std::variant<uint64_t, int64_t, double, bool, std::string, Array> data_;
};

// Ordered key/value table; keys are unique.
class GgufMetadata {
 public:
  void set(std::string key, GgufValue value);
  // Removes a key (false when absent); the other entries keep their order.
  bool erase(std::string_view key);
  const GgufValue* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  const std::vector<std::pair<std::string, GgufValue>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

  // Typed getters: an error names the key when it is missing or of the wrong type.
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<float> get_f32(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<const GgufValue::Array*> get_array(std::string_view key) const;
  // Same, with a default when the key is absent (a present key of the wrong type is an error).
  Result<uint32_t> get_u32_or(std::string_view key, uint32_t fallback) const;
  Result<float> get_f32_or(std::string_view key, float fallback) const;
  Result<bool> get_bool_or(std::string_view key, bool fallback) const;

 private:
  std::vector<std::pair<std::string, GgufValue>> entries_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace edgelm::format
