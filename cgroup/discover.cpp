#include "cgroup/discover.hpp"

#include <vector>

#include "base/path.hpp"

namespace ctx::cgroup {

namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '3') {
      int v = (s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0');
      out += static_cast<char>(v);
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string_view> split(std::string_view line, char sep) {
  std::vector<std::string_view> f;
  std::size_t start = 0;
  while (start <= line.size()) {
    std::size_t p = line.find(sep, start);
    f.push_back(line.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return f;
}

}  // namespace

std::optional<Cgroup2Mount> find_cgroup2(std::string_view mountinfo) {
  for (auto line : split(mountinfo, '\n')) {
    auto f = split(line, ' ');
    // id parent maj:min root mountpoint options [optional...] - fstype source superopts
    std::size_t dash = 0;
    for (std::size_t i = 6; i < f.size(); ++i)
      if (f[i] == "-") {
        dash = i;
        break;
      }
    if (dash == 0 || dash + 1 >= f.size() || f[dash + 1] != "cgroup2") continue;
    return Cgroup2Mount{unescape(f[4]), unescape(f[3])};
  }
  return std::nullopt;
}

std::optional<std::string> v2_path(std::string_view proc_cgroup) {
  for (auto line : split(proc_cgroup, '\n'))
    if (line.substr(0, 3) == "0::") return std::string(line.substr(3));
  return std::nullopt;
}

std::optional<std::string> dir_of(const Cgroup2Mount& m, std::string_view path) {
  if (!path_is_at_or_under(path, m.root)) return std::nullopt;
  return path_join(m.mount_point, path_suffix(path, m.root));
}

}  // namespace ctx::cgroup
