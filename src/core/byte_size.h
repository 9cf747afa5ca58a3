// Sizes as people write them in flags and config files: "512M", "2G", "64K", "1048576"
// (binary units; an optional trailing "B" or "iB"; fractions allowed, e.g. "1.5G").
#pragma once

#include <cstddef>
#include <string_view>

#include "core/result.h"

namespace edgelm {

// Bytes; errors name the text: not a number, unknown unit, not positive, or above 1 PB.
Result<size_t> parse_byte_size(std::string_view text);

}  // namespace edgelm
