#include "models/forward/request.hpp"

#include "models/forward/header_text.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <array>
#include <memory>

namespace ctx::forward {

namespace {

constexpr std::string_view kHeaderPrefix = "CTX_UPSTREAM_HEADER_";

struct UrlFree {
  void operator()(CURLU* u) const { curl_url_cleanup(u); }
};
using Url = std::unique_ptr<CURLU, UrlFree>;

struct CurlFree {
  void operator()(char* p) const { curl_free(p); }
};

// A part of a parsed URL ("" when it has none).
std::string url_part(CURLU* u, CURLUPart what) {
  char* raw = nullptr;
  if (curl_url_get(u, what, &raw, 0) != CURLUE_OK || !raw) return "";
  std::unique_ptr<char, CurlFree> p(raw);
  return p.get();
}

// The URL parsed by libcurl, as libcurl will read it when it sends.
Result<Url> parse_url(const std::string& text, std::string_view what) {
  Url u(curl_url());
  if (!u) return fail(ENOMEM, "curl_url: out of memory");
  if (CURLUcode rc = curl_url_set(u.get(), CURLUPART_URL, text.c_str(), 0); rc != CURLUE_OK)
    return fail(EINVAL, std::string(what) + " is not a URL (" + curl_url_strerror(rc) + ")");
  return u;
}

// localhost, ::1, or an IPv4 address in 127.0.0.0/8 (only digits and
// dots: "127.example.net" is a name anyone may point anywhere).
bool loopback_host(const std::string& host) {
  if (host == "localhost" || host == "[::1]") return true;
  return host.rfind("127.", 0) == 0 &&
         std::all_of(host.begin(), host.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

bool valid_header_name(std::string_view n) { return !n.empty() && std::all_of(n.begin(), n.end(), token_char); }

// CGI's HTTP_ACCEPT_ENCODING -> accept-encoding.
std::string header_name_of(std::string_view cgi_suffix) {
  std::string out = lower_ascii(cgi_suffix);
  std::replace(out.begin(), out.end(), '_', '-');
  return out;
}

std::optional<std::string> get(const Env& env, std::string_view name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

Result<std::string> required(const Env& env, std::string_view name, std::string_view what_to_do) {
  auto v = get(env, name);
  if (!v || v->empty()) return fail(EINVAL, std::string(name) + " is not set: " + std::string(what_to_do));
  return *v;
}

// The upstream URL: http(s), nothing after its path, plain http only to
// this machine (a test's fake API), so that the key never crosses a
// network in clear text.
Result<std::string> checked_url(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  CTX_TRY_ASSIGN(Url u, parse_url(url, "CTX_UPSTREAM_URL"));
  // Where a key may hide (user information, a query such as ?key=) is
  // refused first, and no refusal repeats more of the URL than its
  // scheme, host and port: the answer goes to the agent.
  if (!url_part(u.get(), CURLUPART_USER).empty() || !url_part(u.get(), CURLUPART_PASSWORD).empty())
    return fail(EINVAL, "CTX_UPSTREAM_URL holds user information: put the credential in CTX_UPSTREAM_KEY");
  if (!url_part(u.get(), CURLUPART_QUERY).empty() || !url_part(u.get(), CURLUPART_FRAGMENT).empty())
    return fail(EINVAL,
                "CTX_UPSTREAM_URL has a query or a fragment: give the base URL only (a key goes in CTX_UPSTREAM_KEY)");
  const std::string scheme = url_part(u.get(), CURLUPART_SCHEME);
  const std::string host = url_part(u.get(), CURLUPART_HOST);
  const std::string port = url_part(u.get(), CURLUPART_PORT);
  const std::string origin = scheme + "://" + host + (port.empty() ? "" : ":" + port);
  if (scheme != "https" && scheme != "http")
    return fail(EINVAL, "CTX_UPSTREAM_URL " + origin + " is not an https:// URL");
  if (scheme == "http" && !loopback_host(host))
    return fail(EINVAL, "CTX_UPSTREAM_URL " + origin +
                            ": plain http is allowed only to a loopback host (127.0.0.1, ::1, localhost); use https");
  return url;
}

Result<std::vector<std::pair<std::string, std::string>>> default_headers(const Env& env) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : env) {
    if (k.rfind(kHeaderPrefix, 0) != 0) continue;
    std::string name = header_name_of(std::string_view(k).substr(kHeaderPrefix.size()));
    if (!valid_header_name(name)) return fail(EINVAL, k + ": the header name must be [A-Za-z0-9_] after the prefix");
    if (!header_value_ok(v)) return fail(EINVAL, k + " holds a control character");
    out.emplace_back(std::move(name), v);
  }
  return out;
}

bool path_char(char c) {
  static constexpr std::string_view kOther = "-._~!$&'()*+,;=:@/%";
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         kOther.find(c) != std::string_view::npos;
}

// A segment that names the current or the parent directory, spelt out
// or percent-encoded.
bool dot_segment(std::string_view seg) {
  std::string plain;
  for (std::size_t i = 0; i < seg.size(); ++i) {
    if (seg[i] == '%' && i + 2 < seg.size() && seg[i + 1] == '2' && (seg[i + 2] == 'e' || seg[i + 2] == 'E')) {
      plain += '.';
      i += 2;
    } else {
      plain += seg[i];
    }
  }
  return plain == "." || plain == "..";
}

Result<void> check_path(std::string_view path) {
  if (path.empty()) return {};
  if (path[0] != '/') return fail(EINVAL, "PATH_INFO must start with '/'");
  if (!std::all_of(path.begin(), path.end(), path_char))
    return fail(EINVAL, "PATH_INFO holds a character that is not allowed in a URL path");
  for (std::size_t start = 1; start <= path.size();) {
    std::size_t end = std::min(path.find('/', start), path.size());
    if (dot_segment(path.substr(start, end - start)))
      return fail(EINVAL, "PATH_INFO has a '.' or '..' segment: the path stays beneath the upstream URL");
    start = end + 1;
  }
  return {};
}

Result<void> check_query(std::string_view q) {
  if (!std::all_of(q.begin(), q.end(), [](char c) { return path_char(c) || c == '?'; }))
    return fail(EINVAL, "QUERY_STRING holds a character that is not allowed in a URL query");
  return {};
}

// The composed URL reaches the upstream's own scheme, host and port, as
// libcurl reads it (a check of the result, beside the checks of the
// parts).
Result<void> same_origin(const std::string& base, const std::string& composed) {
  CTX_TRY_ASSIGN(Url a, parse_url(base, "CTX_UPSTREAM_URL"));
  CTX_TRY_ASSIGN(Url b, parse_url(composed, "the request URL"));
  for (CURLUPart part : {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT, CURLUPART_USER})
    if (url_part(a.get(), part) != url_part(b.get(), part))
      return fail(EINVAL, "PATH_INFO would take the request away from the upstream host");
  return {};
}

Result<std::string> method_of(const Env& env) {
  static constexpr std::array<std::string_view, 7> kMethods = {"GET",   "HEAD",   "POST",   "PUT",
                                                               "PATCH", "DELETE", "OPTIONS"};
  std::string m = get(env, "REQUEST_METHOD").value_or("");
  if (std::find(kMethods.begin(), kMethods.end(), m) == kMethods.end())
    return fail(EINVAL, "REQUEST_METHOD '" + m + "' is not one of GET HEAD POST PUT PATCH DELETE OPTIONS");
  return m;
}

Result<std::optional<std::uint64_t>> length_of(const Env& env) {
  auto v = get(env, "CONTENT_LENGTH");
  if (!v || v->empty()) return std::optional<std::uint64_t>();
  if (v->size() > 15 || !std::all_of(v->begin(), v->end(), [](char c) { return c >= '0' && c <= '9'; }))
    return fail(EINVAL, "CONTENT_LENGTH '" + *v + "' is not a number of bytes");
  return std::optional<std::uint64_t>(std::stoull(*v));
}

// The request's headers: the passed-through HTTP_* ones, Content-Type,
// then each default the request lacks.
Result<std::vector<std::string>> headers_of(const Upstream& up, const Env& env) {
  std::vector<std::string> out;
  std::vector<std::string> names;
  for (const auto& [k, v] : env) {
    if (k.rfind("HTTP_", 0) != 0) continue;
    std::string name = header_name_of(std::string_view(k).substr(5));
    if (!valid_header_name(name)) return fail(EINVAL, k + " is not a header name");
    if (header_withheld(name) || name == up.key_header) continue;
    if (!header_value_ok(v)) return fail(EINVAL, "the header " + name + " holds a control character");
    out.push_back(name + ": " + v);
    names.push_back(std::move(name));
  }
  if (auto ct = get(env, "CONTENT_TYPE"); ct && !ct->empty()) {
    if (!header_value_ok(*ct)) return fail(EINVAL, "CONTENT_TYPE holds a control character");
    out.push_back("content-type: " + *ct);
    names.emplace_back("content-type");
  }
  for (const auto& [name, value] : up.default_headers)
    if (std::find(names.begin(), names.end(), name) == names.end() && name != up.key_header)
      out.push_back(name + ": " + value);
  return out;
}

}  // namespace

bool header_withheld(std::string_view name) {
  static constexpr std::string_view kCredentials[] = {"authorization", "x-api-key", "proxy-authorization",
                                                      "cookie",        "api-key",   "x-goog-api-key"};
  static constexpr std::string_view kHopByHop[] = {"connection", "keep-alive", "transfer-encoding", "te",
                                                   "trailer",    "upgrade",    "proxy-connection"};
  // Set by libcurl, or carried by the CGI variables, or a proxy's.
  static constexpr std::string_view kOthers[] = {"host",         "expect", "content-length",
                                                 "content-type", "proxy",  "forwarded"};
  auto in = [name](const auto& list) { return std::find(std::begin(list), std::end(list), name) != std::end(list); };
  return in(kCredentials) || in(kHopByHop) || in(kOthers);
}

Result<Upstream> upstream_from(const Env& env) {
  Upstream up;
  CTX_TRY_ASSIGN(std::string url, required(env, "CTX_UPSTREAM_URL",
                                           "name the upstream API in the model's .d/env "
                                           "(CTX_UPSTREAM_URL=https://api.anthropic.com)"));
  CTX_TRY_ASSIGN(up.url, checked_url(std::move(url)));
  CTX_TRY_ASSIGN(std::string header, required(env, "CTX_UPSTREAM_KEY_HEADER",
                                              "name the header that carries the key in the model's .d/env "
                                              "(CTX_UPSTREAM_KEY_HEADER=x-api-key or Authorization)"));
  if (!valid_header_name(header)) return fail(EINVAL, "CTX_UPSTREAM_KEY_HEADER must be a header name ([A-Za-z0-9-])");
  up.key_header = lower_ascii(header);
  up.key_prefix = get(env, "CTX_UPSTREAM_KEY_PREFIX").value_or("");
  if (!header_value_ok(up.key_prefix)) return fail(EINVAL, "CTX_UPSTREAM_KEY_PREFIX holds a control character");
  up.cainfo = get(env, "CTX_UPSTREAM_CAINFO").value_or("");
  up.default_path = get(env, "CTX_UPSTREAM_DEFAULT_PATH").value_or("");
  if (auto ok = check_path(up.default_path); !ok)
    return fail(EINVAL, "CTX_UPSTREAM_DEFAULT_PATH" + ok.error().msg.substr(std::string_view("PATH_INFO").size()));
  CTX_TRY_ASSIGN(up.default_headers, default_headers(env));
  return up;
}

Result<void> check_key(const std::optional<std::string>& key) {
  if (!key || key->empty())
    return fail(EINVAL, "CTX_UPSTREAM_KEY is not set: put the API key in the model's .d/env (CTX_UPSTREAM_KEY=...)");
  if (!header_value_ok(*key) || key->front() == ' ' || key->back() == ' ' || key->front() == '\t' ||
      key->back() == '\t')
    return fail(EINVAL, "CTX_UPSTREAM_KEY holds a control character or a blank at an end: check the line in .d/env");
  return {};
}

Result<ForwardRequest> cgi_request(const Upstream& up, const Env& env) {
  ForwardRequest r;
  CTX_TRY_ASSIGN(r.method, method_of(env));
  const std::string path = get(env, "PATH_INFO").value_or("");
  const std::string query = get(env, "QUERY_STRING").value_or("");
  CTX_TRY(check_path(path));
  CTX_TRY(check_query(query));
  r.url = up.url + path + (query.empty() ? "" : "?" + query);
  CTX_TRY(same_origin(up.url, r.url));
  CTX_TRY_ASSIGN(r.content_length, length_of(env));
  r.body = r.method != "HEAD" &&
           (r.method == "POST" || r.method == "PUT" || r.method == "PATCH" || r.content_length.value_or(0) > 0);
  if (!r.body) r.content_length.reset();
  CTX_TRY_ASSIGN(r.headers, headers_of(up, env));
  return r;
}

Result<ForwardRequest> plain_request(const Upstream& up) {
  if (up.default_path.empty())
    return fail(EINVAL,
                "no REQUEST_METHOD (not an HTTP call) and no CTX_UPSTREAM_DEFAULT_PATH: to serve `ctx model`, set "
                "CTX_UPSTREAM_DEFAULT_PATH in the model's .d/env (e.g. /v1/messages)");
  ForwardRequest r;
  r.method = "POST";
  r.url = up.url + up.default_path;
  r.body = true;
  Env json_body{{"CONTENT_TYPE", "application/json"}};
  CTX_TRY_ASSIGN(r.headers, headers_of(up, json_body));
  return r;
}

}  // namespace ctx::forward
