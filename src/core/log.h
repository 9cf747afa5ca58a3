// Leveled logging to stderr. The level comes from EDGELM_LOG (error|warn|info|debug; default
// warn) or set_log_level(). Messages are single lines so that logs stay greppable.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace edgelm {

enum class LogLevel { error = 0, warn = 1, info = 2, debug = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_write(LogLevel level, std::string_view message);

template <typename... Args>
void log_at(LogLevel level, fmt::format_string<Args...> f, Args&&... args) {
  if (level <= log_level()) log_write(level, fmt::format(f, std::forward<Args>(args)...));
}

#define EDGELM_LOG_ERROR(...) ::edgelm::log_at(::edgelm::LogLevel::error, __VA_ARGS__)
#define EDGELM_LOG_WARN(...) ::edgelm::log_at(::edgelm::LogLevel::warn, __VA_ARGS__)
#define EDGELM_LOG_INFO(...) ::edgelm::log_at(::edgelm::LogLevel::info, __VA_ARGS__)
#define EDGELM_LOG_DEBUG(...) ::edgelm::log_at(::edgelm::LogLevel::debug, __VA_ARGS__)

}  // namespace edgelm
