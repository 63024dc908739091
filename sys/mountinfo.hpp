// The mount table of the caller's mount namespace, as seen from its root:
// from listmount(2)/statmount(2) (Linux 6.8), which hand out the paths
// as they are, or from /proc/self/mountinfo parsed by libmount (which
// unescapes "\040" and "\012" in mount points). Both give the same entries.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ctx::sys {

/// One mount of a mount table, in the table's order.
struct MountEntry {
  std::string target;  ///< the mount point, decoded ("/mnt/a b")
  std::string fstype;  ///< "ext4", "cgroup2", ...
  std::string root;    ///< the directory of the file system shown at target, "/" for all of it
  bool operator==(const MountEntry&) const = default;
};

/// /proc/self/mountinfo parsed by libmount, in its order (a later mount at
/// the same target covers an earlier one). Loads libmount on first use.
Result<std::vector<MountEntry>> read_mountinfo();

/// The same table from listmount(2) and one statmount(2) per mount, in
/// the order of the mounts' unique ids (creation order, which is also
/// mountinfo's since Linux 6.8). No text is parsed. ENOSYS before Linux
/// 6.8; EPERM where a seccomp filter refuses the calls.
Result<std::vector<MountEntry>> list_mounts();

/// list_mounts(), or read_mountinfo() when listmount is ENOSYS or EPERM.
Result<std::vector<MountEntry>> mount_table();

/// A file system type: its name in mount tables and its superblock magic
/// (statfs(2)'s f_type, <linux/magic.h>).
struct FsType {
  std::string_view name;
  std::uint64_t magic;
};
/// CGROUP2_SUPER_MAGIC.
inline constexpr FsType kCgroup2{"cgroup2", 0x63677270};

/// The mounts of one file system type (by name), in mount_table()'s order.
/// With listmount, a mount's strings are asked for only when its
/// superblock has the type's magic (statmount's strings cost about three
/// times its numbers).
Result<std::vector<MountEntry>> mount_table_of(const FsType& type);

/// The mount of `type` whose mount point is path, if the mount on top
/// there is one: statx's unique mount id and one statmount (Linux 6.8;
/// ENOSYS before), not the whole table.
Result<std::optional<MountEntry>> mount_at(const std::string& path, const FsType& type);

/// The path an open descriptor refers to in the caller's mount namespace
/// (readlink of /proc/self/fd/N).
Result<std::string> fd_path(int fd);

}  // namespace ctx::sys
