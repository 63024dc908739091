// The header block a model writes before its body when it is called over
// HTTP (a CGI/1.1 response, RFC 3875 section 6): `Status: 200 OK`
// (optional, default 200), other header lines, an empty line. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"

namespace ctx::endpoint {

/// The header block of a model's answer.
struct CgiHead {
  unsigned status = 200;
  /// The headers to send, in the model's order; never Status, nor the
  /// ones the HTTP server writes itself (Connection, Transfer-Encoding,
  /// Content-Length, ...).
  std::vector<std::pair<std::string, std::string>> headers;
  std::optional<std::uint64_t> content_length;
};

/// A model's header block may be at most this long.
inline constexpr std::size_t kMaxCgiHead = 32 * 1024;

/// Where the body starts in `out` (just after the empty line that ends the
/// header block, "\n" or "\r\n"), or nullopt while the block is not
/// complete.
std::optional<std::size_t> cgi_head_end(std::string_view out);

/// Parses a complete header block (up to cgi_head_end): at least one
/// `Name: value` line, names of [A-Za-z0-9-], values without control
/// characters, Status a code from 100 to 599. EPROTO saying what is wrong.
Result<CgiHead> parse_cgi_head(std::string_view head);

}  // namespace ctx::endpoint
