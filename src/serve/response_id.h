// Response ids: every answer (completions, chat, /predict; cached or generated) carries an id
// "<prefix>-<32 hex digits>", 128 random bits from the system's entropy source, so ids are unique
// across restarts and processes (a per-process counter restarts at 1): feedback on an old id can
// never reach a newer answer. Thread-safe (one generator per thread).
#pragma once

#include <string>
#include <string_view>

namespace edgelm::serve {

std::string new_response_id(std::string_view prefix);

}  // namespace edgelm::serve
