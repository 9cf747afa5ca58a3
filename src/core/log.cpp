#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace edgelm {
namespace {

LogLevel level_from_env() {
  const char* v = std::getenv("EDGELM_LOG");
  if (v == nullptr) return LogLevel::warn;
  if (std::strcmp(v, "error") == 0) return LogLevel::error;
  if (std::strcmp(v, "info") == 0) return LogLevel::info;
  if (std::strcmp(v, "debug") == 0) return LogLevel::debug;
  return LogLevel::warn;
}

std::atomic<LogLevel>& level_ref() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::error: return "error";
    case LogLevel::warn: return "warn";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

}  // namespace

void set_log_level(LogLevel level) { level_ref().store(level); }
LogLevel log_level() { return level_ref().load(std::memory_order_relaxed); }

void log_write(LogLevel level, std::string_view message) {
  std::fprintf(stderr, "edgelm [%s] %.*s\n", level_name(level), static_cast<int>(message.size()),
               message.data());
}

}  // namespace edgelm
