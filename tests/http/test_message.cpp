// Request and header helpers: case-insensitive headers, percent-decoded query parameters,
// the multipart test, and a stream's wake before and after its waker is installed.
#include <gtest/gtest.h>

#include "http/message.h"

namespace edgelm::http {
namespace {

TEST(HttpMessage, HeadersAreCaseInsensitiveAndSetReplaces) {
  Headers h;
  h.add("Content-Type", "a");
  h.add("content-type", "b");
  EXPECT_EQ(h.get("CONTENT-TYPE"), "a");
  h.set("Content-type", "c");
  EXPECT_EQ(h.fields().size(), 1u);
  EXPECT_EQ(h.get("content-type"), "c");
  h.erase("CONTENT-TYPE");
  EXPECT_FALSE(h.has("content-type"));
}

TEST(HttpMessage, QueryParametersAreDecoded) {
  Request r;
  r.query = "a=1&name=hello%20world&plus=a+b&empty&bad=%zz&last=%41";
  EXPECT_EQ(r.param("a"), "1");
  EXPECT_EQ(r.param("name"), "hello world");
  EXPECT_EQ(r.param("plus"), "a b");
  EXPECT_EQ(r.param("empty"), "");
  EXPECT_EQ(r.param("bad"), "%zz");
  EXPECT_EQ(r.param("last"), "A");
  EXPECT_FALSE(r.param("missing").has_value());
}

TEST(HttpMessage, MultipartDetection) {
  Request r;
  r.headers.add("Content-Type", "Multipart/Form-Data; boundary=x");
  EXPECT_TRUE(r.is_multipart());
  r.headers.set("Content-Type", "application/json");
  EXPECT_FALSE(r.is_multipart());
}

class Source : public StreamSource {
 public:
  bool pull(std::string&) override { return true; }
  void abort(StreamEnd) override {}
};

TEST(HttpMessage, AWakeBeforeTheWakerIsKept) {
  Source s;
  int wakes = 0;
  s.wake();  // before the transport installed its waker
  s.set_waker([&] { ++wakes; });
  EXPECT_EQ(wakes, 1);
  auto w = s.waker();
  w();
  EXPECT_EQ(wakes, 2);
}

}  // namespace
}  // namespace edgelm::http
