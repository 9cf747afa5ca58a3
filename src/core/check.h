// Always-on invariant checks. A failed check is a bug in edgelm, never a user error: it prints
// file, line and message to stderr and aborts (so sanitizers and debuggers stop right there).
#pragma once

#include <sstream>
#include <string>

namespace edgelm::detail {

[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);

template <typename... Args>
std::string check_message(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

}  // namespace edgelm::detail

#define EDGELM_CHECK(cond, ...)                                                                     \
  do {                                                                                              \
    if (!(cond)) [[unlikely]]                                                                       \
      ::edgelm::detail::check_failed(__FILE__, __LINE__, #cond,                                     \
                                     ::edgelm::detail::check_message("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
