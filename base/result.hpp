// Result<T> and Error: the one error currency of the project.
//
// The API is a subset of std::expected (C++23) so that a later switch is a
// mechanical rename: Result<T> holds either a T or an Error; a failure is
// made with ctx::fail(...) which returns an Unexpected. Exceptions never
// cross into the core; errno is captured inside sys/ only.
#pragma once

#include <cerrno>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace ctx {

/// Returns the symbolic name of an errno value ("EINVAL"), or "E<number>"
/// for values the C library does not name.
std::string errno_name(int code);

/// An error: an errno value and a complete human sentence. Context is added
/// on the way up with with_context(); exactly one place (a program's main)
/// prints it.
struct Error {
  int code = 0;
  std::string msg;
  /// Optional machine-readable reason for denials ("mount_not_visible",
  /// "agent_policy"); empty for ordinary errors.
  std::string reason = {};

  /// Returns a copy whose message is "<ctx>: <msg>".
  [[nodiscard]] Error with_context(std::string_view ctx) const {
    return Error{code, std::string(ctx) + ": " + msg, reason};
  }
  bool operator==(const Error&) const = default;
};

/// Wraps an Error on its way into a Result (std::unexpected's role).
template <class E>
class Unexpected {
 public:
  explicit Unexpected(E e) : e_(std::move(e)) {}
  E& error() & { return e_; }
  E&& error() && { return std::move(e_); }

 private:
  E e_;
};

/// Makes a failure: code is an errno value, msg the sentence.
inline Unexpected<Error> fail(int code, std::string msg) { return Unexpected<Error>(Error{code, std::move(msg)}); }
/// Forwards an existing error.
inline Unexpected<Error> fail(Error e) { return Unexpected<Error>(std::move(e)); }

/// Either a T or an Error.
template <class T>
class [[nodiscard]] Result {
 public:
  using value_type = T;

  Result(const T& v) : v_(std::in_place_index<0>, v) {}        // NOLINT: implicit like expected
  Result(T&& v) : v_(std::in_place_index<0>, std::move(v)) {}  // NOLINT
  template <class U>
  requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, Result> &&
           !std::is_same_v<std::decay_t<U>, T> && !std::is_same_v<std::decay_t<U>, Unexpected<Error>>) Result(U&& v)
      : v_(std::in_place_index<0>, T(std::forward<U>(v))) {}                         // NOLINT
  Result(Unexpected<Error> e) : v_(std::in_place_index<1>, std::move(e).error()) {}  // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Error& error() const& { return std::get<1>(v_); }
  Error&& error() && { return std::get<1>(std::move(v_)); }

  template <class U>
  T value_or(U&& dflt) const& {
    return has_value() ? value() : static_cast<T>(std::forward<U>(dflt));
  }

 private:
  std::variant<T, Error> v_;
};

/// Success without a value, or an Error.
template <>
class [[nodiscard]] Result<void> {
 public:
  using value_type = void;

  Result() = default;
  Result(Unexpected<Error> e) : err_(std::move(e).error()), ok_(false) {}  // NOLINT

  bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  void value() const {}
  const Error& error() const& { return err_; }
  Error&& error() && { return std::move(err_); }

 private:
  Error err_;
  bool ok_ = true;
};

}  // namespace ctx

#define CTX_CONCAT_INNER_(a, b) a##b
#define CTX_CONCAT_(a, b) CTX_CONCAT_INNER_(a, b)

/// Evaluates a Result<void> expression and returns its error from the
/// enclosing function on failure.
#define CTX_TRY(expr)                                                   \
  do {                                                                  \
    auto ctx_try_r_ = (expr);                                           \
    if (!ctx_try_r_) return ::ctx::fail(std::move(ctx_try_r_).error()); \
  } while (0)

/// Declares `lhs` from a Result<T> expression, or returns its error.
/// Usage: CTX_TRY_ASSIGN(auto fd, sys::open(sys::at_cwd, path, sys::Open::directory));
#define CTX_TRY_ASSIGN(lhs, expr) CTX_TRY_ASSIGN_IMPL_(CTX_CONCAT_(ctx_try_r_, __LINE__), lhs, expr)
#define CTX_TRY_ASSIGN_IMPL_(tmp, lhs, expr)            \
  auto tmp = (expr);                                    \
  if (!tmp) return ::ctx::fail(std::move(tmp).error()); \
  lhs = std::move(tmp).value()

/// Like CTX_TRY but wraps the error with a context string first.
#define CTX_TRY_CTX(expr, ctxstr)                                                 \
  do {                                                                            \
    auto ctx_try_r_ = (expr);                                                     \
    if (!ctx_try_r_) return ::ctx::fail(ctx_try_r_.error().with_context(ctxstr)); \
  } while (0)
