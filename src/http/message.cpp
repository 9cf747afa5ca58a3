#include "http/message.h"

#include <algorithm>
#include <cctype>

namespace edgelm::http {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(s[i + 1]) * 16 + hex_value(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

std::string Headers::get(std::string_view name) const {
  for (const auto& [k, v] : fields_)
    if (iequals(k, name)) return v;
  return "";
}

bool Headers::has(std::string_view name) const {
  return std::any_of(fields_.begin(), fields_.end(), [&](const auto& f) { return iequals(f.first, name); });
}

void Headers::set(std::string_view name, std::string value) {
  erase(name);
  fields_.emplace_back(std::string(name), std::move(value));
}

void Headers::add(std::string name, std::string value) { fields_.emplace_back(std::move(name), std::move(value)); }

void Headers::erase(std::string_view name) {
  fields_.erase(std::remove_if(fields_.begin(), fields_.end(), [&](const auto& f) { return iequals(f.first, name); }),
                fields_.end());
}

std::optional<std::string> Request::param(std::string_view name) const {
  std::string_view q = query;
  while (!q.empty()) {
    const size_t amp = q.find('&');
    const std::string_view item = q.substr(0, amp);
    const size_t eq = item.find('=');
    if (percent_decode(item.substr(0, eq)) == name)
      return eq == std::string_view::npos ? std::string() : percent_decode(item.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    q.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

bool Request::is_multipart() const {
  const std::string ct = header("Content-Type");
  const std::string_view want = "multipart/form-data";
  return ct.size() >= want.size() && iequals(std::string_view(ct).substr(0, want.size()), want);
}

void StreamSource::set_waker(std::function<void()> w) {
  bool call = false;
  {
    std::lock_guard lock(slot_->mu);
    slot_->fn = std::move(w);
    call = slot_->pending;
    slot_->pending = false;
  }
  if (call) slot_->wake();
}

void StreamSource::wake() { slot_->wake(); }

std::function<void()> StreamSource::waker() const {
  return [slot = slot_] { slot->wake(); };
}

void StreamSource::WakeSlot::wake() {
  std::function<void()> w;
  {
    std::lock_guard lock(mu);
    if (!fn) {
      pending = true;
      return;
    }
    w = fn;
  }
  w();
}

void Response::set_content(std::string b, std::string_view content_type) {
  body = std::move(b);
  headers.set("Content-Type", std::string(content_type));
}

}  // namespace edgelm::http
