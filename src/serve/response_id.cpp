#include "serve/response_id.h"

#include <fmt/format.h>

#include <random>

namespace edgelm::serve {

std::string new_response_id(std::string_view prefix) {
  thread_local std::mt19937_64 rng = [] {
    std::random_device rd;  // /dev/urandom on Linux
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }();
  const uint64_t hi = rng(), lo = rng();
  return fmt::format("{}-{:016x}{:016x}", prefix, hi, lo);
}

}  // namespace edgelm::serve
