#include "base/names.hpp"

#include <cstdint>
#include <cstdio>

#include "base/name_rules.hpp"

namespace ctx {

namespace {

using names::is_alnum;

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool ends_with(std::string_view s, std::string_view suf) {
  return s.size() >= suf.size() && s.substr(s.size() - suf.size()) == suf;
}

// Checks length, first character and allowed set; `extra` lists the
// punctuation allowed besides alphanumerics.
std::optional<std::string> simple_issue(std::string_view n, std::size_t max, std::string_view extra,
                                        std::string_view what) {
  const std::string allowed(extra);
  switch (names::simple_rule(n.data(), n.size(), max, allowed.c_str())) {
    case names::Broken::none: return std::nullopt;
    case names::Broken::empty: return std::string(what) + " is empty";
    case names::Broken::too_long: return std::string(what) + " is longer than " + std::to_string(max) + " bytes";
    case names::Broken::first_char: return std::string(what) + " must begin with a letter or digit";
    case names::Broken::char_set:
    case names::Broken::dot_dot:
    case names::Broken::last_char: break;
  }
  return std::string(what) + " may contain only letters, digits and '" + allowed + "'";
}

}  // namespace

std::optional<std::string> agent_name_issue(std::string_view n) { return simple_issue(n, 64, "_-", "agent name"); }

std::optional<std::string> tool_name_issue(std::string_view n) {
  switch (names::tool_name_rule(n.data(), n.size())) {
    case names::Broken::none: return std::nullopt;
    case names::Broken::dot_dot: return "tool name must not contain '..'";
    case names::Broken::last_char: return "tool name must not end in '.' or '.d'";
    case names::Broken::empty:
    case names::Broken::too_long:
    case names::Broken::first_char:
    case names::Broken::char_set: break;
  }
  return simple_issue(n, 128, "_.-", "tool name");
}

std::optional<std::string> model_name_issue(std::string_view n) {
  if (n.empty()) return "model name is empty";
  if (n.size() > 255) return "model name is longer than 255 bytes";
  std::size_t start = 0;
  while (true) {
    std::size_t end = n.find('/', start);
    std::string_view seg = n.substr(start, end == std::string_view::npos ? end : end - start);
    if (auto e = simple_issue(seg, 64, "_.-", "model name segment")) return e;
    if (seg.find("..") != std::string_view::npos) return "model name must not contain '..'";
    if (seg.back() == '.' || ends_with(seg, ".d")) return "model name segment must not end in '.' or '.d'";
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> space_name_issue(std::string_view n) {
  if (auto e = simple_issue(n, 64, "_.-", "name")) return e;
  if (n.find("..") != std::string_view::npos) return "name must not contain '..'";
  if (n.back() == '.') return "name must not end in '.'";
  return std::nullopt;
}

std::optional<std::string> type_name_issue(std::string_view n) {
  if (n.empty()) return "type is empty";
  if (n.size() > 64) return "type is longer than 64 bytes";
  if (!is_alpha(n.front())) return "type must begin with a letter";
  for (char c : n)
    if (!is_alnum(c) && c != '_') return "type may contain only letters, digits and '_'";
  return std::nullopt;
}

std::string instance_name(std::string_view agent, std::string_view ctx_root) {
  if (ctx_root == "/ctx") return std::string(agent);
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (unsigned char c : ctx_root) h = (h ^ c) * 16777619u;
  char hex[9];
  std::snprintf(hex, sizeof hex, "%08x", h);
  return std::string(agent) + "-" + hex;
}

std::string sessions_rel(std::uint32_t owner, std::string_view agent) {
  return std::to_string(owner) + "/agent/" + std::string(agent) + "/session";
}

std::string session_rel(std::uint32_t owner, std::string_view agent, std::string_view session) {
  return sessions_rel(owner, agent) + "/" + std::string(session);
}

std::optional<std::string> session_name_issue(std::string_view n) {
  if (auto e = space_name_issue(n)) return e;
  if (n == "index")
    return std::string("'index' is reserved (session/index/ holds the by-cwd index); choose another name");
  return std::nullopt;
}

std::optional<std::string> cwd_index_name(std::string_view cwd) {
  if (cwd.empty() || cwd.front() != '/') return std::nullopt;
  std::string out;
  for (char c : cwd) {
    if (c == '%')
      out += "%25";
    else if (c == '/')
      out += "%2F";
    else
      out += c;
  }
  if (out.size() > 255) return std::nullopt;
  return out;
}

}  // namespace ctx
