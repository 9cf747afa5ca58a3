#include "core/byte_size.h"

#include <exception>
#include <string>

namespace edgelm {

Result<size_t> parse_byte_size(std::string_view text) {
  const std::string s(text);
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(s, &pos);
  } catch (const std::exception&) {
    return make_error("'{}' is not a size (examples: 512M, 2G, 1048576)", s);
  }
  std::string unit = s.substr(pos);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (!unit.empty() && unit.back() == 'i') unit.pop_back();
  double mult = 1;
  if (unit == "K" || unit == "k") {
    mult = 1024.0;
  } else if (unit == "M" || unit == "m") {
    mult = 1024.0 * 1024;
  } else if (unit == "G" || unit == "g") {
    mult = 1024.0 * 1024 * 1024;
  } else if (!unit.empty()) {
    return make_error("'{}' is not a size: unknown unit '{}' (use K, M or G)", s, unit);
  }
  if (!(value > 0) || value * mult > 1e15) return make_error("size '{}' must be positive and below 1 PB", s);
  return static_cast<size_t>(value * mult);
}

}  // namespace edgelm
