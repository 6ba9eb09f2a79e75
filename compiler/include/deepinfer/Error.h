// Errors as values: what failed and why, carried up to the caller. No exit() in library code.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace deepinfer {

struct Error {
  std::string message;
};

// A value or an error. Minimal on purpose: construction, test, access.
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error err) : v_(std::move(err)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

template <>
class Result<void> {
 public:
  Result() = default;
  Result(Error err) : err_(std::move(err)) {}
  bool ok() const { return !err_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return *err_; }

 private:
  std::optional<Error> err_;
};

using Status = Result<void>;

}  // namespace deepinfer

// Propagate an error from an expression returning Result<...>.
#define DI_TRY(expr)                                   \
  do {                                                 \
    auto di_try_status_ = (expr);                      \
    if (!di_try_status_.ok()) return di_try_status_.error(); \
  } while (0)
