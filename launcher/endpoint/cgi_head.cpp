#include "launcher/endpoint/cgi_head.hpp"

#include <algorithm>
#include <cctype>

#include "launcher/control/http_meta.hpp"

namespace ctx::endpoint {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Headers the HTTP server owns: framing and the connection's.
bool server_owned(std::string_view name) {
  const std::string l = lower(name);
  for (const char* n : {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "date"})
    if (l == n) return true;
  return false;
}

Error bad(const std::string& what) { return Error{EPROTO, "the model's CGI header block: " + what}; }

std::optional<std::uint64_t> digits(std::string_view s) {
  if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  std::uint64_t v = 0;
  for (char c : s) v = v * 10 + static_cast<std::uint64_t>(c - '0');
  return v;
}

}  // namespace

std::optional<std::size_t> cgi_head_end(std::string_view out) {
  if (out.starts_with("\n")) return 1;
  if (out.starts_with("\r\n")) return 2;
  const std::size_t lf = out.find("\n\n"), crlf = out.find("\n\r\n");
  if (lf == std::string_view::npos && crlf == std::string_view::npos) return std::nullopt;
  if (crlf == std::string_view::npos || (lf != std::string_view::npos && lf < crlf)) return lf + 2;
  return crlf + 3;
}

Result<CgiHead> parse_cgi_head(std::string_view head) {
  CgiHead h;
  std::size_t fields = 0;
  for (std::size_t start = 0; start < head.size();) {
    std::size_t nl = head.find('\n', start);
    std::string_view line = head.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    start = nl == std::string_view::npos ? head.size() : nl + 1;
    if (line.ends_with("\r")) line.remove_suffix(1);
    if (line.empty()) break;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) return fail(bad("a line without ':' (the block ends with an empty line)"));
    std::string_view name = line.substr(0, colon), value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
    if (auto issue = launcher::http_header_issue(name, value)) return fail(bad(*issue));
    ++fields;
    const std::string l = lower(name);
    if (l == "status") {
      auto code = digits(value.substr(0, 3));
      if (!code || *code < 100 || *code > 599 || (value.size() > 3 && value[3] != ' '))
        return fail(bad("Status must start with a code from 100 to 599"));
      h.status = static_cast<unsigned>(*code);
    } else if (l == "content-length") {
      h.content_length = digits(value);
      if (!h.content_length) return fail(bad("Content-Length must be a number"));
    } else if (!server_owned(name)) {
      h.headers.emplace_back(std::string(name), std::string(value));
    }
  }
  if (fields == 0) return fail(bad("no header line before the body"));
  return h;
}

}  // namespace ctx::endpoint
