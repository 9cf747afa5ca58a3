// The streaming multipart/form-data parser against whole bodies fed in every split, so a
// delimiter that spans two reads is found; and its errors.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "http/multipart.h"

namespace edgelm::http {
namespace {

struct Parsed {
  std::map<std::string, std::string> fields;  // name -> content
  std::map<std::string, std::string> files;   // name -> filename
  bool ok = false;
  std::string error;
};

// Feeds `body` in pieces of `step` bytes.
Parsed parse(const std::string& boundary, const std::string& body, size_t step) {
  Parsed p;
  std::string current;
  MultipartParser parser(
      boundary,
      [&](const MultipartPart& part) {
        current = part.name;
        p.fields[current];
        if (!part.filename.empty()) p.files[current] = part.filename;
        return true;
      },
      [&](const char* d, size_t n) {
        p.fields[current].append(d, n);
        return true;
      });
  bool fed = true;
  for (size_t i = 0; i < body.size() && fed; i += step)
    fed = parser.feed(body.data() + i, std::min(step, body.size() - i));
  p.ok = fed && parser.finish();
  p.error = parser.error();
  return p;
}

const std::string kBoundary = "----edgelmXYZ";

std::string body_with(const std::string& model_bytes) {
  return "--" + kBoundary +
         "\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\ntiny\r\n"
         "--" +
         kBoundary +
         "\r\nContent-Disposition: form-data; name=\"model\"; filename=\"m.gguf\"\r\n"
         "Content-Type: application/octet-stream\r\n\r\n" +
         model_bytes + "\r\n--" + kBoundary + "--\r\n";
}

TEST(Multipart, EverySplitGivesTheSameParts) {
  // Content that contains near-delimiters: CRLF, "--", the boundary without its dashes.
  const std::string model = std::string("GGUF\0\r\n--", 9) + "----edgelmXY" + std::string(300, 'x') + "\r\n-";
  const std::string body = body_with(model);
  for (size_t step = 1; step <= body.size(); ++step) {
    Parsed p = parse(kBoundary, body, step);
    ASSERT_TRUE(p.ok) << "step " << step << ": " << p.error;
    EXPECT_EQ(p.fields["name"], "tiny") << step;
    EXPECT_EQ(p.fields["model"], model) << step;
    EXPECT_EQ(p.files["model"], "m.gguf") << step;
  }
}

TEST(Multipart, BoundaryFromContentType) {
  auto b = multipart_boundary("multipart/form-data; boundary=abc123");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, "abc123");
  auto q = multipart_boundary("multipart/form-data; charset=utf-8; boundary=\"a b;c\"");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, "a b;c");
  EXPECT_FALSE(multipart_boundary("multipart/form-data").ok());
  EXPECT_FALSE(multipart_boundary("multipart/form-data; boundary=" + std::string(300, 'a')).ok());
}

TEST(Multipart, MalformedBodiesAreErrors) {
  // Truncated: no closing delimiter.
  std::string body = body_with("abc");
  Parsed t = parse(kBoundary, body.substr(0, body.size() - 10), 7);
  EXPECT_FALSE(t.ok);
  EXPECT_NE(t.error.find("closing"), std::string::npos) << t.error;
  // A part without Content-Disposition.
  Parsed nd = parse(kBoundary, "--" + kBoundary + "\r\nContent-Type: text/plain\r\n\r\nx\r\n--" + kBoundary + "--", 5);
  EXPECT_FALSE(nd.ok);
  EXPECT_NE(nd.error.find("Content-Disposition"), std::string::npos) << nd.error;
  // Endless part headers.
  Parsed big = parse(kBoundary, "--" + kBoundary + "\r\nX: " + std::string(20000, 'a'), 1000);
  EXPECT_FALSE(big.ok);
  // Garbage after the delimiter.
  Parsed g = parse(kBoundary, "--" + kBoundary + "zz\r\n\r\n", 3);
  EXPECT_FALSE(g.ok);
  // No delimiter at all.
  EXPECT_FALSE(parse(kBoundary, std::string(1000, 'q'), 100).ok);
}

TEST(Multipart, ACallbackCanStopTheParse) {
  MultipartParser parser(
      kBoundary, [](const MultipartPart& p) { return p.name != "model"; }, [](const char*, size_t) { return true; });
  const std::string body = body_with("abc");
  EXPECT_FALSE(parser.feed(body.data(), body.size()));
}

}  // namespace
}  // namespace edgelm::http
