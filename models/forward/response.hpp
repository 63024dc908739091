// What ctx-model-forward writes back: the upstream's answer as a CGI
// response (a header block, an empty line, the body as it streams), or an
// error in the API's own JSON shape. Pure.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ctx::forward {

/// The head of the upstream's answer, fed line by line as libcurl hands
/// the lines over (status lines of interim 1xx answers and of a proxy's
/// CONNECT included: each status line starts the head anew).
class ResponseHead {
 public:
  /// Takes one line (with or without its CRLF). True when it was the
  /// empty line that ends the head of a final (not 1xx) answer.
  bool take(std::string_view line);

  /// The status code (0 before a status line).
  int status() const { return status_; }

  /// The CGI header block: `Status: <code> <reason>`, the upstream
  /// headers that may pass (not hop-by-hop, not Set-Cookie, not
  /// Content-Length: the endpoint frames the body itself), an empty line.
  std::string cgi_block() const;

 private:
  int status_ = 0;
  std::string reason_;
  std::vector<std::string> headers_;
};

/// The standard reason phrase of an HTTP status ("Bad Gateway"), or
/// "Status <code>" for one without.
std::string reason_phrase(int status);

/// Whether an upstream response header is kept from the agent: hop-by-hop
/// headers, cookies, Content-Length, and a Status header (which would
/// take the CGI Status line's place). `name` in lower case.
bool response_header_withheld(std::string_view name);

/// A whole CGI response for an error of the forwarder: the status, a JSON
/// content type, and {"type":"error","error":{"type":<type>,"message":
/// "ctx-model-forward: <message>"}}.
std::string cgi_error(int status, std::string_view type, std::string_view message);

/// The JSON error body alone (for `ctx model` calls, on stderr).
std::string error_body(std::string_view type, std::string_view message);

}  // namespace ctx::forward
