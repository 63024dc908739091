// The HTTP metadata of a model call made through the HTTP model endpoint
// (docs/models.md, "The HTTP endpoint"): what the endpoint tells the
// model gate about the request, and the CGI/1.1 environment the gate
// gives the model from it. The endpoint runs inside the agent's sandbox
// with the agent's authority only, so the gate trusts none of it: every
// field is checked here, by the rules the endpoint itself answers 400
// with. Pure.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"

namespace ctx::launcher {

/// One HTTP request, as the model's CGI environment needs it.
struct HttpMeta {
  std::string protocol;                         ///< "HTTP/1.0" or "HTTP/1.1"
  std::string method;                           ///< "POST"
  std::string path;                             ///< the path after the model's name: "" or "/v1/messages"
  std::string query;                            ///< without its '?'
  std::string content_type;                     ///< "" when the request has none
  std::optional<std::uint64_t> content_length;  ///< when the request has one
  /// The other headers, names as sent; never one of kHttpWithheld.
  std::vector<std::pair<std::string, std::string>> headers;
};

/// Headers never passed to a model: credentials (the agent's token among
/// them), hop-by-hop headers, the two the CGI names carry, and the ones a
/// program would take for its own settings (`Proxy` becomes HTTP_PROXY,
/// which many HTTP clients read as their proxy: a model's upstream request,
/// key and all, would go to the agent's address).
inline constexpr std::string_view kHttpWithheld[] = {
    "authorization", "x-api-key",      "proxy-authorization", "cookie",           "host",
    "connection",    "keep-alive",     "transfer-encoding",   "te",               "trailer",
    "upgrade",       "content-length", "content-type",        "proxy",            "proxy-connection",
    "forwarded",     "expect"};

/// At most this many headers, and this many bytes of names and values.
inline constexpr std::size_t kHttpMaxHeaders = 64;
inline constexpr std::size_t kHttpMaxHeaderBytes = 32 * 1024;

/// Whether a header name is withheld (kHttpWithheld, any case).
bool http_withheld(std::string_view name);

/// What is wrong with one header (a name of [A-Za-z0-9-], a value of
/// printable ASCII or UTF-8 without control characters), or nullopt.
std::optional<std::string> http_header_issue(std::string_view name, std::string_view value);

/// What is wrong with the whole request (each field, the headers by
/// http_header_issue, none withheld, none twice in any case, the limits),
/// or nullopt.
std::optional<std::string> http_meta_issue(const HttpMeta& m);

/// The "http" field of a model request.
nlohmann::json to_json(const HttpMeta& m);

/// Decodes and checks the "http" field; EINVAL, reason invalid_request,
/// "http: <what is wrong>" for anything else.
Result<HttpMeta> decode_http_meta(const nlohmann::json& j);

/// The model's CGI/1.1 variables (GATEWAY_INTERFACE, SERVER_PROTOCOL,
/// REQUEST_METHOD, PATH_INFO, QUERY_STRING, CONTENT_TYPE and
/// CONTENT_LENGTH when present, HTTP_<NAME> for each header: upper case,
/// '-' as '_'), in that order.
std::vector<std::pair<std::string, std::string>> cgi_env(const HttpMeta& m);

}  // namespace ctx::launcher
