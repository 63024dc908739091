#include "models/forward/response.hpp"

#include "models/forward/header_text.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <utility>

namespace ctx::forward {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

bool token_char(char c) {
  static constexpr std::string_view kOther = "!#$%&'*+-.^_`|~";
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         kOther.find(c) != std::string_view::npos;
}

}  // namespace

bool response_header_withheld(std::string_view name) {
  static constexpr std::array<std::string_view, 13> kWithheld = {
      "connection", "keep-alive",  "transfer-encoding",  "te",
      "trailer",    "upgrade",     "proxy-authenticate", "proxy-connection",
      "set-cookie", "set-cookie2", "content-length",     "status",
      "alt-svc"};
  return std::find(kWithheld.begin(), kWithheld.end(), name) != kWithheld.end();
}

bool ResponseHead::take(std::string_view line) {
  std::string_view l = trim(line);
  if (l.empty()) return status_ >= 200;
  if (l.rfind("HTTP/", 0) == 0) {
    // "HTTP/1.1 200 OK", "HTTP/2 200": a new answer's head.
    headers_.clear();
    reason_.clear();
    status_ = 0;
    std::size_t sp = l.find(' ');
    if (sp == std::string_view::npos) return false;
    std::string_view rest = l.substr(sp + 1);
    std::size_t i = 0;
    for (; i < rest.size() && i < 3 && rest[i] >= '0' && rest[i] <= '9'; ++i) status_ = status_ * 10 + (rest[i] - '0');
    if (i != 3) status_ = 0;
    if (rest.size() > 4 && header_value_ok(rest.substr(4))) reason_ = trim(rest.substr(4));
    return false;
  }
  if (line.front() == ' ' || line.front() == '\t') return false;  // an obsolete folded line: dropped
  std::size_t colon = l.find(':');
  if (colon == std::string_view::npos || colon == 0) return false;
  std::string_view name = l.substr(0, colon);
  std::string_view value = trim(l.substr(colon + 1));
  if (!std::all_of(name.begin(), name.end(), token_char) || !header_value_ok(value)) return false;
  if (response_header_withheld(lower_ascii(name))) return false;
  headers_.push_back(std::string(name) + ": " + std::string(value));
  return false;
}

std::string ResponseHead::cgi_block() const {
  std::string out =
      "Status: " + std::to_string(status_) + " " + (reason_.empty() ? reason_phrase(status_) : reason_) + "\r\n";
  for (const auto& h : headers_) out += h + "\r\n";
  out += "\r\n";
  return out;
}

std::string reason_phrase(int status) {
  static constexpr std::array<std::pair<int, std::string_view>, 22> kReasons = {{
      {200, "OK"},
      {201, "Created"},
      {202, "Accepted"},
      {204, "No Content"},
      {301, "Moved Permanently"},
      {302, "Found"},
      {304, "Not Modified"},
      {307, "Temporary Redirect"},
      {308, "Permanent Redirect"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {413, "Content Too Large"},
      {429, "Too Many Requests"},
      {500, "Internal Server Error"},
      {502, "Bad Gateway"},
      {503, "Service Unavailable"},
      {504, "Gateway Timeout"},
      {529, "Overloaded"},
  }};
  for (const auto& [code, text] : kReasons)
    if (code == status) return std::string(text);
  return "Status " + std::to_string(status);
}

std::string error_body(std::string_view type, std::string_view message) {
  nlohmann::ordered_json j = {{"type", "error"},
                              {"error", {{"type", type}, {"message", "ctx-model-forward: " + std::string(message)}}}};
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string cgi_error(int status, std::string_view type, std::string_view message) {
  return "Status: " + std::to_string(status) + " " + reason_phrase(status) +
         "\r\nContent-Type: application/json\r\n\r\n" + error_body(type, message) + "\n";
}

}  // namespace ctx::forward
