#include "base/path.hpp"

#include <algorithm>

namespace ctx {

std::optional<PathIssue> abs_path_issue(std::string_view p) {
  if (p.empty()) return PathIssue{0, "path is empty"};
  if (p.front() != '/') return PathIssue{0, "path must be absolute (start with '/')"};
  if (p.size() > 4095) return PathIssue{4095, "path is longer than 4095 bytes"};
  for (std::size_t i = 0; i < p.size(); ++i) {
    auto c = static_cast<unsigned char>(p[i]);
    if (c == '\t') return PathIssue{i, "TAB in path"};
    if (c == '\n') return PathIssue{i, "newline in path"};
    if (c < 0x20 || c == 0x7f) return PathIssue{i, "control character in path"};
  }
  if (p.size() == 1) return std::nullopt;
  if (p.back() == '/') return PathIssue{p.size() - 1, "trailing '/' in path"};
  std::size_t start = 1;
  while (start <= p.size()) {
    std::size_t end = p.find('/', start);
    if (end == std::string_view::npos) end = p.size();
    std::string_view comp = p.substr(start, end - start);
    if (comp.empty()) return PathIssue{start, "empty path component ('//')"};
    if (comp == ".") return PathIssue{start, "'.' component in path"};
    if (comp == "..") return PathIssue{start, "'..' component in path"};
    if (comp.size() > 255) return PathIssue{start, "path component longer than 255 bytes"};
    start = end + 1;
  }
  return std::nullopt;
}

bool path_is_at_or_under(std::string_view p, std::string_view prefix) {
  if (prefix == "/") return !p.empty() && p.front() == '/';
  if (p.size() < prefix.size() || p.substr(0, prefix.size()) != prefix) return false;
  return p.size() == prefix.size() || p[prefix.size()] == '/';
}

std::string_view path_suffix(std::string_view p, std::string_view prefix) {
  if (prefix == "/") return p.substr(1);
  if (p.size() == prefix.size()) return {};
  return p.substr(prefix.size() + 1);
}

std::string path_join(std::string_view base, std::string_view rel) {
  std::string out(base);
  if (rel.empty()) return out;
  if (out != "/") out += '/';
  out += rel;
  return out;
}

bool path_less(std::string_view a, std::string_view b) {
  // Comparing with '/' mapped below every other byte gives component-wise
  // order: "/a/b" < "/a-b" because '/' < '-'.
  auto key = [](char c) { return c == '/' ? 0 : static_cast<unsigned char>(c) + 1; };
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [&](char x, char y) { return key(x) < key(y); });
}

std::size_t path_depth(std::string_view p) {
  if (p == "/") return 0;
  return static_cast<std::size_t>(std::count(p.begin(), p.end(), '/'));
}

std::string_view path_dirname(std::string_view p) {
  auto slash = p.rfind('/');
  if (slash == std::string_view::npos) return ".";
  return slash == 0 ? p.substr(0, 1) : p.substr(0, slash);
}

std::string_view path_basename(std::string_view p) {
  auto slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

}  // namespace ctx
