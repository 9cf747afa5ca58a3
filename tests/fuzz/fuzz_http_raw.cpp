// libFuzzer target: raw bytes on a socket of an in-process server — malformed request lines,
// huge or broken headers, bad chunking, pipelined garbage, invalid UTF-8 and NUL bytes. The
// server must answer with a well-formed HTTP response (or close) within a deadline, never
// crash, never answer 500, and keep answering /health.
#include <cstdint>
#include <string>

#include "fuzz_server.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  edgelm::fuzz::fuzz_server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& s = edgelm::fuzz::fuzz_server();
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  edgelm::fuzz::check_response(s.exchange(bytes));
  static unsigned n = 0;
  if (++n % 64 == 0) {  // still alive for everyone else
    const std::string h = s.exchange("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    if (h.rfind("HTTP/1.1 200", 0) != 0) {
      std::fprintf(stderr, "fuzz: /health after %u inputs: %.200s\n", n, h.c_str());
      std::abort();
    }
  }
  return 0;
}
