// chronoq/result.h: a value or the Status explaining why there is none.
//
//   Result<Task> r = engine->Get("share:42");
//   if (!r.ok()) return r.status();
//   Use(*r);
//
// std::expected is C++23; this is the small subset chronoq needs.
#pragma once

#include <cstdlib>
#include <utility>
#include <variant>

#include "chronoq/status.h"

// Exported by libchronoq.so, as every public declaration is (docs/ARCHITECTURE.md).
#pragma GCC visibility push(default)
namespace chronoq {

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  // REQUIRES: !status.ok()
  Result(Status status) : v_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) std::abort();   // an OK status has no value
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // OK when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  // REQUIRES: ok()
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  void IgnoreError() const {}

 private:
  std::variant<Status, T> v_;
};

}  // namespace chronoq
#pragma GCC visibility pop

#define CHRONOQ_CONCAT_INNER_(a, b) a##b
#define CHRONOQ_CONCAT_(a, b) CHRONOQ_CONCAT_INNER_(a, b)

// CHRONOQ_ASSIGN_OR_RETURN(auto x, Compute()); returns the error, else binds x.
#define CHRONOQ_ASSIGN_OR_RETURN(lhs, expr) \
  CHRONOQ_ASSIGN_OR_RETURN_IMPL_(CHRONOQ_CONCAT_(chronoq_result_, __LINE__), lhs, expr)
#define CHRONOQ_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
