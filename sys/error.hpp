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

/// Same, reading errno now. Call it right after the failing call.
inline Unexpected<Error> fail_errno(std::string_view call) {
  int err = errno;
  return fail(sys_error(call, err));
}

}  // namespace ctx::sys
