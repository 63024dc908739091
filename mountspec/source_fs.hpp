// The file systems a root launch takes mount sources from: an allow-list
// of those that hold plain files (docs/security.md, "Mount sources of a
// root launch"). A root launch makes its binds with root's capabilities
// in the initial namespaces, where no user namespace and no locked mount
// bounds what a bind shows, so the launcher itself decides what kind of
// thing it binds. Through a bound /proc an agent reached the owner's
// processes' files (/proc/<pid>/root) around its mount table; devtmpfs,
// mqueue, hugetlbfs, binfmt_misc, fusectl and nsfs show devices, IPC
// objects and kernel state the same way. A list of what to refuse misses
// what it does not name, and every kernel adds names; a list of what to
// bind fails closed.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sys/mountinfo.hpp"

namespace ctx::mountspec {

using sys::MountEntry;

/// What a file system of the allow-list holds, which is why it is on it.
enum class FsKind { disk, removable, memory, layered, image, network, vm_share, fuse };

/// "disk", "removable", ... (docs/security.md names the kinds).
std::string_view to_string(FsKind k);

/// One type of the allow-list: its name in mount tables ("fuse.*": any
/// FUSE subtype) and its kind.
struct AllowedFs {
  std::string_view name;
  FsKind kind;
};

/// The allow-list, in docs/security.md's order.
std::span<const AllowedFs> root_source_fs_types();

/// Whether a root launch takes a mount source from a file system of this
/// type (a mount table's name: "ext4", "fuse.sshfs").
bool root_source_fs_allowed(std::string_view fstype);

/// The mount of `mounts` that `path` (a real path) lies on: the deepest
/// target holding it, the last of equal depth (it covers the earlier
/// ones); nullptr when none holds it.
const MountEntry* mount_holding(std::string_view path, const std::vector<MountEntry>& mounts);

/// The first mount of `mounts` strictly below `source` whose file system
/// is off the allow-list (what an rbind of it would carry along), or
/// nullptr.
const MountEntry* refused_submount(std::string_view source, const std::vector<MountEntry>& mounts);

/// What a checked source is to the launch (the fix differs).
enum class SourceRole { bind, root };

/// Why a root launch refuses `source` (a real path, no symlinks) as a
/// mount source: it lies on a file system off the allow-list or, when
/// `recursive`, one is mounted below it; nullopt when neither. The text
/// is "source /dev: EACCES: lies on devtmpfs, ..." with the fix. `mounts`
/// is the mount table the source is seen in. Pure.
std::optional<std::string> source_fs_issue(SourceRole role, std::string_view source, bool recursive,
                                           const std::vector<MountEntry>& mounts);

}  // namespace ctx::mountspec
