#include "launcher/control/http_meta.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace ctx::launcher {

namespace {

using nlohmann::json;

constexpr std::size_t kMaxTarget = 8 * 1024;

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// Printable ASCII without space: a request target's bytes.
bool target_ok(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

// The length of the UTF-8 sequence at s[i] that is no control character
// (C0, DEL, C1) and no overlong or surrogate form; 0 when there is none.
std::size_t utf8_char(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c >= 0x20 && c < 0x7f) return 1;
  std::size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  std::uint32_t cp = c & (0x7f >> n);
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3f);
  }
  const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
  if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp <= 0x9f)) return 0;
  return n;
}

bool value_ok(std::string_view v) {
  for (std::size_t i = 0; i < v.size();) {
    std::size_t n = utf8_char(v, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

Error invalid(const std::string& what) { return Error{EINVAL, "http: " + what, "invalid_request"}; }

Result<std::string> string_field(const json& j, const char* key, bool required) {
  if (!j.contains(key)) {
    if (required) return fail(invalid(std::string("\"") + key + "\" is required"));
    return std::string();
  }
  if (!j[key].is_string()) return fail(invalid(std::string("\"") + key + "\" must be a string"));
  return j[key].get<std::string>();
}

Result<std::vector<std::pair<std::string, std::string>>> headers_field(const json& j) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!j.contains("headers")) return out;
  const json& h = j["headers"];
  if (!h.is_array() || h.size() > kHttpMaxHeaders)
    return fail(
        invalid("\"headers\" must be an array of at most " + std::to_string(kHttpMaxHeaders) + " [name, value] pairs"));
  for (const json& p : h) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string())
      return fail(invalid("each header must be a [name, value] pair of strings"));
    out.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
  }
  return out;
}

}  // namespace

bool http_withheld(std::string_view name) {
  const std::string l = lower(name);
  return std::find(std::begin(kHttpWithheld), std::end(kHttpWithheld), l) != std::end(kHttpWithheld);
}

std::optional<std::string> http_header_issue(std::string_view name, std::string_view value) {
  const bool name_ok = !name.empty() && name.size() <= 256 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-';
  });
  if (!name_ok) return "header name '" + std::string(name.substr(0, 64)) + "' is not 1 to 256 of A-Z a-z 0-9 -";
  if (!value_ok(value))
    return "the value of header '" + std::string(name) + "' is not printable ASCII or UTF-8 without control characters";
  return std::nullopt;
}

std::optional<std::string> http_meta_issue(const HttpMeta& m) {
  if (m.protocol != "HTTP/1.0" && m.protocol != "HTTP/1.1") return "protocol must be HTTP/1.0 or HTTP/1.1";
  if (m.method.empty() || m.method.size() > 32 ||
      !std::all_of(m.method.begin(), m.method.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
    return "method must be 1 to 32 of A-Z";
  if (m.path.size() > kMaxTarget || !target_ok(m.path) || (!m.path.empty() && m.path[0] != '/'))
    return "path must be empty or start with '/', at most 8 KiB of printable ASCII without space";
  if (m.query.size() > kMaxTarget || !target_ok(m.query))
    return "query must be at most 8 KiB of printable ASCII without space";
  if (!value_ok(m.content_type)) return "content type is not printable ASCII or UTF-8 without control characters";
  if (m.headers.size() > kHttpMaxHeaders) return "more than " + std::to_string(kHttpMaxHeaders) + " headers";
  std::size_t bytes = m.content_type.size();
  std::set<std::string> seen;
  for (const auto& [name, value] : m.headers) {
    if (auto issue = http_header_issue(name, value)) return issue;
    if (http_withheld(name)) return "header '" + name + "' is never passed to a model";
    if (!seen.insert(lower(name)).second) return "header '" + name + "' appears twice";
    bytes += name.size() + value.size();
  }
  if (bytes > kHttpMaxHeaderBytes) return "headers longer than 32 KiB in all";
  return std::nullopt;
}

json to_json(const HttpMeta& m) {
  json h = json::array();
  for (const auto& [n, v] : m.headers) h.push_back({n, v});
  json j{{"protocol", m.protocol}, {"method", m.method}, {"path", m.path}, {"query", m.query}, {"headers", h}};
  if (!m.content_type.empty()) j["content_type"] = m.content_type;
  if (m.content_length) j["content_length"] = *m.content_length;
  return j;
}

Result<HttpMeta> decode_http_meta(const json& j) {
  if (!j.is_object()) return fail(invalid("must be an object"));
  for (const auto& [k, v] : j.items())
    if (k != "protocol" && k != "method" && k != "path" && k != "query" && k != "headers" && k != "content_type" &&
        k != "content_length")
      return fail(invalid("unknown key '" + k + "'"));
  HttpMeta m;
  CTX_TRY_ASSIGN(m.protocol, string_field(j, "protocol", true));
  CTX_TRY_ASSIGN(m.method, string_field(j, "method", true));
  CTX_TRY_ASSIGN(m.path, string_field(j, "path", true));
  CTX_TRY_ASSIGN(m.query, string_field(j, "query", false));
  CTX_TRY_ASSIGN(m.content_type, string_field(j, "content_type", false));
  if (j.contains("content_length")) {
    if (!j["content_length"].is_number_unsigned())
      return fail(invalid("\"content_length\" must be an unsigned integer"));
    m.content_length = j["content_length"].get<std::uint64_t>();
  }
  CTX_TRY_ASSIGN(m.headers, headers_field(j));
  if (auto issue = http_meta_issue(m)) return fail(invalid(*issue));
  return m;
}

std::vector<std::pair<std::string, std::string>> cgi_env(const HttpMeta& m) {
  std::vector<std::pair<std::string, std::string>> env{{"GATEWAY_INTERFACE", "CGI/1.1"},
                                                       {"SERVER_PROTOCOL", m.protocol},
                                                       {"REQUEST_METHOD", m.method},
                                                       {"PATH_INFO", m.path},
                                                       {"QUERY_STRING", m.query}};
  if (!m.content_type.empty()) env.emplace_back("CONTENT_TYPE", m.content_type);
  if (m.content_length) env.emplace_back("CONTENT_LENGTH", std::to_string(*m.content_length));
  for (const auto& [name, value] : m.headers) {
    std::string var = "HTTP_";
    for (char c : name) var += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    env.emplace_back(std::move(var), value);
  }
  return env;
}

}  // namespace ctx::launcher
