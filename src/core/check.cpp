#include "core/check.h"

#include <cstdio>
#include <cstdlib>

namespace edgelm::detail {

void check_failed(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "edgelm: internal error at %s:%d: check '%s' failed%s%s\n", file, line, cond,
               msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace edgelm::detail
