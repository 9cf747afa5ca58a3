// A bounded pipe from the IO thread, which reads a request body off the socket, to the handler
// thread that consumes it (BodyReader): at most `capacity` bytes wait in between, so an upload
// is never held whole in memory and a slow consumer slows the socket, not the heap.
//
// Invariants: push() is called only while has_room(); after finish() or fail() no more
// pushes; read() returns 0 only after finish() and every byte was taken; on_room runs (on the
// consumer's thread, no lock held) when a paused producer may push again.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

#include "http/message.h"

namespace edgelm::http {

class BodyPipe : public BodyReader {
 public:
  BodyPipe(size_t capacity, std::function<void()> on_room) : capacity_(capacity), on_room_(std::move(on_room)) {}

  long read(char* out, size_t cap) override;
  std::string error() const override;

  // Producer side (IO thread).
  // Appends; returns true while there is room for more, false when the producer must pause
  // until on_room.
  bool push(const char* data, size_t n);
  void finish();
  void fail(std::string why);
  // The consumer will read no more (its handler returned): pushes are dropped from now on.
  void close_reader();
  bool reader_closed() const;

 private:
  const size_t capacity_;
  std::function<void()> on_room_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string data_;
  size_t head_ = 0;  // bytes of data_ already read
  bool done_ = false, failed_ = false, paused_ = false, reader_closed_ = false;
  std::string error_;
};

}  // namespace edgelm::http
