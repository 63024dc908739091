#include "cgroup/discover.hpp"

#include <vector>

#include "base/path.hpp"

namespace ctx::cgroup {

namespace {

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

std::optional<Cgroup2Mount> find_cgroup2(const std::vector<sys::MountEntry>& mounts) {
  for (const auto& m : mounts)
    if (m.fstype == "cgroup2") return Cgroup2Mount{m.target, m.root};
  return std::nullopt;
}

Result<std::optional<Cgroup2Mount>> find_cgroup2_mount() {
  // Where systemd and most distributions mount it (pure v2, then the
  // hybrid layout's), two system calls each; else the first of the table.
  // Each place counts only if the cgroup2 mount is on top there.
  for (const char* at : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
    auto m = sys::mount_at(at, sys::kCgroup2);
    if (!m) break;  // no statx mount id or statmount here: the table
    if (*m) return std::optional<Cgroup2Mount>(Cgroup2Mount{(*m)->target, (*m)->root});
  }
  CTX_TRY_ASSIGN(std::vector<sys::MountEntry> mounts, sys::mount_table_of(sys::kCgroup2));
  return find_cgroup2(mounts);
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
