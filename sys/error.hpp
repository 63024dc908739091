// Errors of system calls: errno is captured at the failing call, here and
// nowhere else.
#pragma once

#include <cerrno>
#include <string_view>

#include "base/result.hpp"

namespace ctx::sys {

/// Builds "<call>: <ERRNO>" from the errno value `err`.
inline Error sys_error(std::string_view call, int err) {
  return Error{err, std::string(call) + ": " + errno_name(err)};
}

/// The failure of the call that just set errno: errno is read first, then
/// the message is built, so nothing the message's construction does (an
/// allocation, a conversion) can change the errno reported. Use as
/// `return CTX_FAIL_ERRNO("open " + path);`.
#define CTX_FAIL_ERRNO(what) \
  ([&, ctx_saved_errno_ = errno]() { return ::ctx::fail(::ctx::sys::sys_error((what), ctx_saved_errno_)); }())

}  // namespace ctx::sys
