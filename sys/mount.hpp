// The mount API: detached bind trees (open_tree), attributes set before a
// tree becomes visible (mount_setattr), attachment (move_mount), fresh
// file systems, pivot_root. Every wrapper names its syscall in errors.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::sys {

/// Mount attributes the launcher sets (MOUNT_ATTR_*), never clears: the
/// one flag set of mount tables, child requests and plan steps alike.
/// Written with designated initialisers ({.rdonly = true, .nosuid = true}):
/// an unnamed flag is unset, and no reader has to count positions.
struct MountAttrs {
  bool rdonly = false;
  bool nosuid = false;
  bool nodev = false;
  bool noexec = false;

  bool operator==(const MountAttrs&) const = default;
};

/// Every flag set in a or in b.
constexpr MountAttrs operator|(const MountAttrs& a, const MountAttrs& b) {
  return {.rdonly = a.rdonly || b.rdonly,
          .nosuid = a.nosuid || b.nosuid,
          .nodev = a.nodev || b.nodev,
          .noexec = a.noexec || b.noexec};
}

/// open_tree(OPEN_TREE_CLONE): a detached copy of the mount at dirfd/path
/// (AT_RECURSIVE when recursive: with every mount below it). An empty path
/// means dirfd itself.
Result<UniqueFd> clone_tree(int dirfd, const std::string& path, bool recursive);

/// mount_setattr(2) on a detached or attached tree: sets attrs (recursively
/// when asked). Flags already set, including those the kernel locked, are
/// kept because nothing is cleared.
Result<void> set_mount_attrs(int treefd, const MountAttrs& attrs, bool recursive);

/// move_mount(2) of a detached tree onto an open target (O_PATH is enough).
Result<void> attach_tree(int treefd, int targetfd);

/// Makes every mount in the caller's mount namespace private, so nothing
/// done in the sandbox propagates to the host (mount(MS_REC|MS_PRIVATE)).
Result<void> make_mounts_private();

/// Mounts a fresh file system of `fstype` ("proc", "tmpfs", "devpts",
/// "mqueue") onto the open directory targetfd with mount(2) flags and data.
Result<void> mount_fresh(const std::string& fstype, int targetfd, unsigned long flags, const std::string& data);

/// A new FUSE file system on the /dev/fuse descriptor fuse_fd, as a
/// detached mount (fsopen, fsconfig, fsmount; Linux 5.2): read-only,
/// nosuid, nodev, `allow_other` (the agent may run as other ids than the
/// one mounting it, within this user namespace) and `default_permissions`
/// (the kernel checks the mode bits the server reports). uid and gid are
/// the mounting process's, as its user namespace sees them.
Result<UniqueFd> mount_fuse(int fuse_fd, std::uint32_t uid, std::uint32_t gid);

/// Binds `new_root` (a directory fd that is a mount point) as "/" with
/// pivot_root(".", ".") and detaches the old root (umount2 MNT_DETACH), so
/// the host tree is gone from the namespace, not merely unreachable.
Result<void> pivot_to(int new_rootfd);

}  // namespace ctx::sys
