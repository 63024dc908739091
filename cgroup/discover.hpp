// Finding cgroup v2: the mount in the caller's mount table and the
// caller's own cgroup from /proc/self/cgroup. Pure: the callers read them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "sys/mountinfo.hpp"

namespace ctx::cgroup {

/// A cgroup2 mount: where it is mounted and which cgroup is its root.
struct Cgroup2Mount {
  std::string mount_point;  ///< e.g. /sys/fs/cgroup or /sys/fs/cgroup/unified
  std::string root;         ///< the cgroup shown at the mount point, usually "/"
};

/// The first cgroup2 mount of a mount table (sys::mount_table_of(sys::kCgroup2)
/// on the launcher's path, sys::read_mountinfo() in tests).
std::optional<Cgroup2Mount> find_cgroup2(const std::vector<sys::MountEntry>& mounts);

/// The cgroup2 mount this process uses: the one on top at /sys/fs/cgroup,
/// else at /sys/fs/cgroup/unified (each looked up alone, sys::mount_at),
/// else the first of the mount table (find_cgroup2).
Result<std::optional<Cgroup2Mount>> find_cgroup2_mount();

/// The v2 path ("0::/path") in /proc/<pid>/cgroup text.
std::optional<std::string> v2_path(std::string_view proc_cgroup);

/// The directory of cgroup `path` under a mount, or nullopt if the mount
/// does not show it (path outside the mount's root).
std::optional<std::string> dir_of(const Cgroup2Mount& m, std::string_view path);

}  // namespace ctx::cgroup
