#include "http/body_pipe.h"

#include <algorithm>
#include <cstring>

namespace edgelm::http {

long BodyPipe::read(char* out, size_t cap) {
  bool resume = false;
  size_t n = 0;
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return head_ < data_.size() || done_ || failed_; });
    if (head_ == data_.size()) return failed_ ? -1 : 0;
    n = std::min(cap, data_.size() - head_);
    std::memcpy(out, data_.data() + head_, n);
    head_ += n;
    if (head_ == data_.size()) {
      data_.clear();
      head_ = 0;
    }
    if (paused_ && data_.size() - head_ <= capacity_ / 2) {
      paused_ = false;
      resume = true;
    }
  }
  if (resume && on_room_) on_room_();
  return static_cast<long>(n);
}

std::string BodyPipe::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

bool BodyPipe::push(const char* data, size_t n) {
  {
    std::lock_guard lock(mu_);
    if (reader_closed_) return true;
    if (head_ > 0 && head_ >= data_.size() / 2) {  // compact before growing
      data_.erase(0, head_);
      head_ = 0;
    }
    data_.append(data, n);
    paused_ = data_.size() - head_ >= capacity_;
  }
  cv_.notify_all();
  std::lock_guard lock(mu_);
  return !paused_;
}

void BodyPipe::finish() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

void BodyPipe::fail(std::string why) {
  {
    std::lock_guard lock(mu_);
    if (done_ || failed_) return;
    failed_ = true;
    error_ = std::move(why);
  }
  cv_.notify_all();
}

void BodyPipe::close_reader() {
  std::lock_guard lock(mu_);
  reader_closed_ = true;
  data_.clear();
  head_ = 0;
  paused_ = false;
}

bool BodyPipe::reader_closed() const {
  std::lock_guard lock(mu_);
  return reader_closed_;
}

}  // namespace edgelm::http
