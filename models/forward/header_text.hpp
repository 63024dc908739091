// Text checks that the request and the answer share. Pure.
#pragma once

#include <string>
#include <string_view>

namespace ctx::forward {

/// ASCII letters in lower case, other bytes kept (header names compare so).
std::string lower_ascii(std::string_view s);

/// Whether a header value may be sent or relayed: no control character
/// but tab (CR or LF would start a header of the sender's choosing), no DEL.
bool header_value_ok(std::string_view v);

}  // namespace ctx::forward
