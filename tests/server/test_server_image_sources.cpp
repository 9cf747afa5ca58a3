// Image sources other than data: URLs, over real sockets (serve/image_source.h), on the
// synthetic Gemma 3 of test_server_images.cpp:
//  - file:// only under --media-path: inside it 200 (a %-escaped name too); off when unset (a
//    400 saying how to enable it); outside it, a `..` escape, a symlink leading out, a sibling
//    folder sharing the prefix (/media2 vs /media), a folder, a FIFO, a file over the byte cap:
//    each a 400 naming the content part;
//  - http:// only with --allow-image-urls, against a real HTTP server of the test on 127.0.0.1:
//    refused by default (off), refused as loopback when on, served once --image-url-allow-cidr
//    127.0.0.1/32 lets it in; a server that never answers (the timeout), a redirect to a
//    refused address, a redirect loop, a body over the cap, a 404, an HTML page: 400s naming
//    the part;
//  - /predict's "image" (base64, a data: URL, an array): 200 with the image in the prompt; 400
//    without --mmproj (saying to load one) or for a bad value.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "image_server.h"

namespace edgelm::test {
namespace {

void expect_part_error(const Reply& r, const std::string& param, const std::string& needle) {
  EXPECT_EQ(r.status, 400) << r.body;
  const json e = r.js()["error"];
  EXPECT_EQ(e.value("param", ""), param) << r.body;
  EXPECT_NE(e.value("message", "").find(needle), std::string::npos) << "missing '" << needle << "' in " << r.body;
}

const std::string kPart = "messages[0].content[1]";

std::string png_bytes(const char* b64) { return *serve::base64_decode(b64); }

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

Reply chat_url(const ImageServer& s, const std::string& url) {
  return post(s, "/v1/chat/completions", chat({image_part(url)}));
}

class ServerImageSources : public VisionModelSuite {};

TEST_F(ServerImageSources, FileUrlsOnlyInsideTheMediaPath) {
  TempDir root;
  namespace fs = std::filesystem;
  const std::string media = root.file("media"), sibling = root.file("media2"), outside = root.file("outside");
  for (const auto& d : {media, sibling, outside, media + "/sub"}) fs::create_directories(d);
  write_file(media + "/red.png", png_bytes(kRedPng));
  write_file(media + "/red one.png", png_bytes(kRedPng));
  write_file(media + "/sub/blue.png", png_bytes(kBluePng));
  write_file(sibling + "/red.png", png_bytes(kRedPng));
  write_file(outside + "/secret.png", png_bytes(kBluePng));
  write_file(media + "/big.png", png_bytes(kRedPng) + std::string(5000, 'x'));
  fs::create_symlink(outside + "/secret.png", media + "/link-out.png");
  fs::create_symlink(media + "/red.png", media + "/link-in.png");
  ASSERT_EQ(::mkfifo((media + "/fifo.png").c_str(), 0600), 0);

  {  // Off without --media-path.
    ImageServer off(model_, mmproj_);
    expect_part_error(chat_url(off, "file://" + media + "/red.png"), kPart, "--media-path");
  }
  serve::ImageSourceOptions src;
  src.media_path = media;
  src.max_bytes = 4096;
  ImageServer s(model_, mmproj_, 3, 1000, "off", "gemma3-vision", src);
  const Reply ok = chat_url(s, "file://" + media + "/red.png");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(chat_url(s, "file://localhost" + media + "/sub/blue.png").status, 200);
  EXPECT_EQ(chat_url(s, "file://" + media + "/red%20one.png").status, 200) << "percent-decoded";
  EXPECT_EQ(chat_url(s, "file://" + media + "/link-in.png").status, 200) << "a link that stays inside";
  EXPECT_EQ(chat_url(s, "file://" + media + "/sub/../red.png").status, 200) << "'..' that stays inside";

  expect_part_error(chat_url(s, "file://" + outside + "/secret.png"), kPart, "outside the media folder");
  expect_part_error(chat_url(s, "file://" + media + "/../outside/secret.png"), kPart, "outside the media folder");
  expect_part_error(chat_url(s, "file://" + media + "/%2E%2E/outside/secret.png"), kPart, "outside the media folder");
  expect_part_error(chat_url(s, "file://" + media + "/link-out.png"), kPart, "outside the media folder");
  expect_part_error(chat_url(s, "file://" + sibling + "/red.png"), kPart, "outside the media folder");
  expect_part_error(chat_url(s, "file://" + media + "/sub"), kPart, "folder");
  expect_part_error(chat_url(s, "file://" + media + "/fifo.png"), kPart, "FIFO");
  expect_part_error(chat_url(s, "file://" + media + "/big.png"), kPart, "--image-max-bytes");
  expect_part_error(chat_url(s, "file://" + media + "/none.png"), kPart, "no image file");
  expect_part_error(chat_url(s, "file://" + media + "/red%00.png"), kPart, "NUL");
  expect_part_error(chat_url(s, "file://" + media + "/red%2.png"), kPart, "%-escape");
  expect_part_error(chat_url(s, "file://otherhost" + media + "/red.png"), kPart, "file:///");
  expect_part_error(chat_url(s, "file:///dev/null"), kPart, "outside the media folder");
  // The server is unharmed.
  EXPECT_EQ(chat_url(s, "file://" + media + "/red.png").status, 200);
}

// A listening socket that accepts connections (the kernel's backlog) but never answers.
struct SilentListener {
  int fd = -1;
  int port = 0;
  SilentListener() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(fd, 8), 0);
    socklen_t len = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~SilentListener() { ::close(fd); }
};

// The test's image host on 127.0.0.1.
struct ImageHost {
  httplib::Server svr;
  std::thread thread;
  int port = 0;
  ImageHost() {
    const std::string png = png_bytes(kRedPng);
    svr.Get("/x.png", [png](const httplib::Request&, httplib::Response& res) { res.set_content(png, "image/png"); });
    svr.Get("/untyped", [png](const httplib::Request&, httplib::Response& res) {
      res.set_content(png, "application/octet-stream");
    });
    svr.Get("/page", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("<html><body>not an image</body></html>", "text/html");
    });
    svr.Get("/big.png", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(100000, 'x'), "image/png");
    });
    svr.Get("/to-metadata", [](const httplib::Request&, httplib::Response& res) {
      res.set_redirect("http://169.254.169.254/latest/meta-data/x.png");
    });
    svr.Get("/to-image", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("/x.png"); });
    svr.Get("/loop", [](const httplib::Request&, httplib::Response& res) { res.set_redirect("loop"); });
    port = svr.bind_to_any_port("127.0.0.1");
    thread = std::thread([this] { svr.listen_after_bind(); });
  }
  ~ImageHost() {
    svr.stop();
    thread.join();
  }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port) + path; }
};

TEST_F(ServerImageSources, HttpUrlsOnlyWhenAllowedAndOnlyToAllowedAddresses) {
  ImageHost host;
  {  // Off by default.
    ImageServer off(model_, mmproj_);
    expect_part_error(chat_url(off, host.url("/x.png")), kPart, "--allow-image-urls");
  }
  serve::ImageSourceOptions src;
  src.allow_urls = true;
  src.url_timeout_s = 1;
  src.max_bytes = 4096;
  {  // On, but 127.0.0.1 is loopback.
    ImageServer guarded(model_, mmproj_, 3, 1000, "off", "gemma3-vision", src);
    expect_part_error(chat_url(guarded, host.url("/x.png")), kPart, "loopback");
    expect_part_error(chat_url(guarded, "http://[::ffff:127.0.0.1]:" + std::to_string(host.port) + "/x.png"), kPart,
                      "loopback");
    expect_part_error(chat_url(guarded, "http://169.254.169.254/latest/meta-data"), kPart, "metadata");
    expect_part_error(chat_url(guarded, "http://10.1.2.3/x.png"), kPart, "private");
    expect_part_error(chat_url(guarded, "http://user@example.com/x.png"), kPart, "user info");
  }
  src.allow_cidrs = {"127.0.0.1/32"};
  ImageServer s(model_, mmproj_, 3, 1000, "off", "gemma3-vision", src);
  const Reply ok = chat_url(s, host.url("/x.png"));
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(chat_url(s, host.url("/to-image")).status, 200) << "a redirect to an allowed address";
  EXPECT_EQ(chat_url(s, host.url("/untyped")).status, 200) << "an untyped body that decodes";
  expect_part_error(chat_url(s, host.url("/to-metadata")), kPart, "169.254.169.254");
  expect_part_error(chat_url(s, host.url("/loop")), kPart, "redirected more than 3 times");
  expect_part_error(chat_url(s, host.url("/big.png")), kPart, "--image-max-bytes");
  expect_part_error(chat_url(s, host.url("/missing.png")), kPart, "HTTP 404");
  expect_part_error(chat_url(s, host.url("/page")), kPart, "text/html");
  expect_part_error(chat_url(s, "http://127.0.0.2:" + std::to_string(host.port) + "/x.png"), kPart, "loopback");
  {
    SilentListener silent;
    const auto t0 = std::chrono::steady_clock::now();
    expect_part_error(chat_url(s, "http://127.0.0.1:" + std::to_string(silent.port) + "/x.png"), kPart,
                      "--image-url-timeout");
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(took, 5.0) << "the fetch must end by its timeout";
  }
  EXPECT_EQ(chat_url(s, host.url("/x.png")).status, 200) << "the server is unharmed";
}

TEST_F(ServerImageSources, PredictTakesImages) {
  ImageServer s(model_, mmproj_);
  const json plain = {{"input", "What is this?"}, {"max_tokens", 3}};
  const Reply text = post(s, "/predict", plain);
  ASSERT_EQ(text.status, 200) << text.body;
  json one = plain;
  one["image"] = kRedPng;
  const Reply a = post(s, "/predict", one);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.js()["usage"]["completion_tokens"], 3);
  // <start_of_image> + 4 soft tokens + <end_of_image> (and the prompt form's newlines) join the text.
  EXPECT_GE(a.js()["usage"]["prompt_tokens"].get<int>(), text.js()["usage"]["prompt_tokens"].get<int>() + 6) << a.body;
  json url = plain;
  url["image"] = data_url(kRedPng);
  const Reply b = post(s, "/predict", url);
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.js()["output"], a.js()["output"]) << "a data: URL of the same bytes is the same image";
  const auto header = [](const Reply& r, const std::string& name) {
    for (const auto& h : r.headers)
      if (h.first == name) return h.second;
    return std::string("(none)");
  };
  EXPECT_GT(std::stod(header(a, "x-edgelm-image-ms")), 0.0) << "the first encode took time";
  EXPECT_EQ(header(a, "x-edgelm-images-cached"), "0");
  EXPECT_EQ(header(b, "x-edgelm-images-cached"), "1") << "the same bytes again come from the encoder cache";
  EXPECT_EQ(header(text, "x-edgelm-image-ms"), "(none)");
  json two = plain;
  two["input"] = "<__media__> and <__media__>: which is red?";
  two["image"] = json::array({kRedPng, kBluePng});
  const Reply c = post(s, "/predict", two);
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_GT(c.js()["usage"]["prompt_tokens"].get<int>(), a.js()["usage"]["prompt_tokens"].get<int>());
  json marks = plain;
  marks["input"] = "<__media__> <__media__> <__media__>";
  marks["image"] = kRedPng;
  EXPECT_EQ(post(s, "/predict", marks).status, 400) << "three markers for one image";
  json bad = plain;
  bad["image"] = "@@@";
  expect_part_error(post(s, "/predict", bad), "image", "base64");
  bad["image"] = json::array({kRedPng, 7});
  expect_part_error(post(s, "/predict", bad), "image[1]", "base64 string");
  bad["image"] = json::array({kRedPng, "aGVsbG8gd29ybGQ="});
  expect_part_error(post(s, "/predict", bad), "image[1]", "decoded");

  ImageServer none(model_, "");
  expect_part_error(post(none, "/predict", one), "image", "--mmproj");
}

}  // namespace
}  // namespace edgelm::test
