// What ctx-model-forward sends upstream, decided from its environment
// before anything reaches the network (docs/agents.md, "The forwarder").
// The upstream comes from the model's own .d/env (CTX_UPSTREAM_*); the
// request from the CGI variables the model endpoint sets (REQUEST_METHOD,
// PATH_INFO, QUERY_STRING, CONTENT_TYPE, CONTENT_LENGTH, HTTP_*), which
// the agent chooses and so are checked here. The key is not part of
// either: it is taken out of the environment first and only ever joins
// the request as the credential header (relay.hpp). Pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"

namespace ctx::forward {

/// The process environment, name -> value.
using Env = std::map<std::string, std::string, std::less<>>;

/// The upstream API, from the model's .d/env.
struct Upstream {
  std::string url;           ///< CTX_UPSTREAM_URL, without a trailing '/'
  std::string key_header;    ///< CTX_UPSTREAM_KEY_HEADER, in lower case
  std::string key_prefix;    ///< CTX_UPSTREAM_KEY_PREFIX ("Bearer " for OpenAI)
  std::string cainfo;        ///< CTX_UPSTREAM_CAINFO ("": the system's CAs)
  std::string default_path;  ///< CTX_UPSTREAM_DEFAULT_PATH ("": no `ctx model` calls)
  /// CTX_UPSTREAM_HEADER_<NAME>=value: `name: value` sent when the request
  /// has no such header (e.g. anthropic-version for `ctx model` calls).
  std::vector<std::pair<std::string, std::string>> default_headers;
};

/// Reads and checks the CTX_UPSTREAM_* variables. Refused: a missing
/// CTX_UPSTREAM_URL or CTX_UPSTREAM_KEY_HEADER, a URL that is not http(s)
/// or holds user information, a query or a fragment, http:// to a host
/// that is not loopback, a header name outside [A-Za-z0-9-], a value with
/// a control character. Each message names the variable.
Result<Upstream> upstream_from(const Env& env);

/// Checks the key without ever naming it: present, not empty, no control
/// character or blank at its ends (it becomes a header value).
Result<void> check_key(const std::optional<std::string>& key);

/// One request to send upstream, the credential excepted.
struct ForwardRequest {
  std::string method;                           ///< GET HEAD POST PUT PATCH DELETE OPTIONS
  std::string url;                              ///< the upstream URL + path (+ '?' query)
  std::vector<std::string> headers;             ///< "name: value" lines, passed through or default
  bool body = false;                            ///< a body is read from stdin
  std::optional<std::uint64_t> content_length;  ///< its length; none: sent chunked
};

/// The request of a CGI call (REQUEST_METHOD set). PATH_INFO is appended to
/// the upstream URL and must stay beneath it: it starts with '/', holds
/// only URL path characters and no "." or ".." segment; QUERY_STRING has
/// no '#'. Headers come from HTTP_*, except credentials, hop-by-hop ones,
/// and the upstream's key header, which are never passed. Bad input is
/// refused (the caller answers 400).
Result<ForwardRequest> cgi_request(const Upstream& up, const Env& env);

/// The request of a `ctx model` call (no REQUEST_METHOD): POST of stdin,
/// as application/json, to the upstream URL + CTX_UPSTREAM_DEFAULT_PATH.
/// Refused when that variable is not set.
Result<ForwardRequest> plain_request(const Upstream& up);

/// Whether a request header is never passed upstream: credentials
/// (Authorization, X-Api-Key, ...), hop-by-hop headers, Host, Expect,
/// Proxy, and the Content-* ones the CGI variables carry. `name` in lower
/// case.
bool header_withheld(std::string_view name);

}  // namespace ctx::forward
