// A plain TCP connection to a test server, for requests (and misbehaviour) cpp-httplib's client
// will not produce: partial headers, chunked bodies by hand, pipelining, readers that stall.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cerrno>

#include <chrono>
#include <string>

namespace edgelm::test {

class RawConnection {
 public:
  // `rcvbuf` > 0 sets SO_RCVBUF before connecting (a reader that leaves little room).
  explicit RawConnection(int port, int rcvbuf = 0) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawConnection() { close(); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  bool send_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until the peer closes or `timeout` passes.
  std::string read_all(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    set_timeout(timeout);
    std::string out;
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // Reads until `out` holds `marker` (true), the peer closes or `timeout` passes (false).
  bool read_until(const std::string& marker, std::string& out,
                  std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    set_timeout(timeout);
    char buf[4096];
    while (out.find(marker) == std::string::npos) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return false;
      out.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  // True when the peer has closed: a read sees EOF (or a reset) within `timeout`.
  bool closed_by_peer(std::chrono::milliseconds timeout) {
    set_timeout(timeout);
    char buf[4096];
    for (;;) {
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  void set_timeout(std::chrono::milliseconds t) {
    timeval tv{static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>((t.count() % 1000) * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }

  int fd_ = -1;
  bool connected_ = false;
};

// The status code of a raw HTTP/1.1 response ("HTTP/1.1 413 Payload Too Large"); 0 if none.
inline int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::stoi(response.substr(9, 3));
}

}  // namespace edgelm::test
