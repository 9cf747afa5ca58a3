// libFuzzer target: arbitrary bodies for every route's request parser (completions, chat,
// predict, embeddings, tokenize, detokenize, reload, the cache admin routes), sent as real
// requests to an in-process server. The first byte picks the route and the framing
// (Content-Length or chunked); the rest is the body. Every answer must be a well-formed HTTP
// response that is not a 500 (an exception escaping a parser), within a deadline.
#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "fuzz_server.h"

namespace {

struct Target {
  const char* path;
  bool admin;
};

constexpr Target kTargets[] = {
    {"/v1/completions", false}, {"/v1/chat/completions", false}, {"/predict", false},
    {"/v1/embeddings", false},  {"/tokenize", false},            {"/detokenize", false},
    {"/reload", true},          {"/admin/cache/flush", true},    {"/v1/completions", false},
};

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  edgelm::fuzz::fuzz_server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const Target& t = kTargets[data[0] % (sizeof(kTargets) / sizeof(kTargets[0]))];
  const bool chunked = (data[0] & 0x80) != 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string req = fmt::format("POST {} HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\n", t.path);
  if (t.admin) req += "Authorization: Bearer fuzz-admin\r\n";
  if (chunked)
    req += fmt::format("Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body);
  else
    req += fmt::format("Content-Length: {}\r\n\r\n{}", body.size(), body);
  edgelm::fuzz::check_response(edgelm::fuzz::fuzz_server().exchange(req));
  return 0;
}
