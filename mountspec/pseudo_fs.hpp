// Mount sources a privileged launch never binds: pseudo file systems that
// expose the host's processes and kernel state. Through a bound /proc an
// agent would reach the owner's processes' files (/proc/<pid>/root) and
// write into them as the owner, whatever its own mount table says.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sys/mountinfo.hpp"

namespace ctx::mountspec {

using sys::MountEntry;

/// proc, sysfs, debugfs, tracefs, securityfs, cgroup, cgroup2, bpf,
/// configfs, efivarfs, pstore.
bool is_pseudo_fs(std::string_view fstype);

/// Why a bind of `source` (a real path, no symlinks) must be refused, or
/// nullopt: the source lies on a pseudo file system, or (recursive) a
/// pseudo file system is mounted at or below it. `mounts` is the mount
/// table the source is seen in.
std::optional<std::string> pseudo_fs_issue(std::string_view source, bool recursive,
                                           const std::vector<MountEntry>& mounts);

}  // namespace ctx::mountspec
