// Result<T>: a value or an Error carrying a one-line, user-facing message.
//
// Everything a user or a file can cause (bad path, truncated GGUF, bad flag) is reported
// through Result; bugs go through EDGELM_CHECK (check.h) instead. Libraries never exit().
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>
#include <variant>

#include "core/check.h"

namespace edgelm {

struct Error {
  std::string message;
};

// Builds an Error from a fmt format string.
template <typename... Args>
Error make_error(fmt::format_string<Args...> f, Args&&... args) {
  return Error{fmt::format(f, std::forward<Args>(args)...)};
}

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    EDGELM_CHECK(ok(), "Result::value() on an error: ", error().message);
    return std::get<0>(v_);
  }
  const T& value() const& {
    EDGELM_CHECK(ok(), "Result::value() on an error: ", error().message);
    return std::get<0>(v_);
  }
  T&& value() && {
    EDGELM_CHECK(ok(), "Result::value() on an error: ", error().message);
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const {
    EDGELM_CHECK(!ok(), "Result::error() on a value");
    return std::get<1>(v_);
  }

 private:
  std::variant<T, Error> v_;
};

template <>
class [[nodiscard]] Result<void> {
 public:
  Result() = default;
  Result(Error error) : error_(std::move(error)), ok_(false) {}  // NOLINT(google-explicit-constructor)

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    EDGELM_CHECK(!ok_, "Result::error() on success");
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

using Status = Result<void>;

inline Status ok_status() { return {}; }

}  // namespace edgelm

#define EDGELM_CONCAT_INNER(a, b) a##b
#define EDGELM_CONCAT(a, b) EDGELM_CONCAT_INNER(a, b)

// EDGELM_TRY(auto x, expr): evaluates expr (a Result<T>); on error returns the error from the
// enclosing function, otherwise binds the value to the declaration.
#define EDGELM_TRY(decl, expr) EDGELM_TRY_IMPL(EDGELM_CONCAT(edgelm_try_, __LINE__), decl, expr)
#define EDGELM_TRY_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                     \
  if (!tmp.ok()) return tmp.error();     \
  decl = std::move(tmp).value()

// EDGELM_TRY_STATUS(expr): returns the error of a Status-returning expression.
#define EDGELM_TRY_STATUS(expr) EDGELM_TRY_STATUS_IMPL(EDGELM_CONCAT(edgelm_st_, __LINE__), expr)
#define EDGELM_TRY_STATUS_IMPL(tmp, expr) \
  do {                                    \
    auto tmp = (expr);                    \
    if (!tmp.ok()) return tmp.error();    \
  } while (0)
