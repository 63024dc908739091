#include "mountspec/pseudo_fs.hpp"

#include "base/path.hpp"

namespace ctx::mountspec {

bool is_pseudo_fs(std::string_view t) {
  for (std::string_view p : {"proc", "sysfs", "debugfs", "tracefs", "securityfs", "cgroup", "cgroup2", "bpf",
                             "configfs", "efivarfs", "pstore"})
    if (t == p) return true;
  return false;
}

std::optional<std::string> pseudo_fs_issue(std::string_view source, bool recursive,
                                           const std::vector<MountEntry>& mounts) {
  // The mount the source lies on: the deepest target holding it, the last
  // of equal depth (it covers the earlier ones).
  const MountEntry* on = nullptr;
  for (const auto& m : mounts)
    if (path_is_at_or_under(source, m.target) && (on == nullptr || m.target.size() >= on->target.size())) on = &m;
  if (on != nullptr && is_pseudo_fs(on->fstype))
    return "source " + std::string(source) + " is on " + on->fstype +
           ", a pseudo file system that exposes the host's processes and kernel state: a root launch does not bind it; "
           "remove the line";
  if (!recursive) return std::nullopt;
  for (const auto& m : mounts)
    if (path_is_at_or_under(m.target, source) && m.target != source && is_pseudo_fs(m.fstype))
      return "source " + std::string(source) + " holds " + m.target + " (" + m.fstype +
             "), a pseudo file system that exposes the host's processes and kernel state: a root launch does not bind "
             "it; use bind instead of rbind, or bind only the directories the agent needs";
  return std::nullopt;
}

}  // namespace ctx::mountspec
