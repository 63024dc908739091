#include "sys/mount.hpp"

#include <fcntl.h>
#include <linux/mount.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sys/error.hpp"

namespace ctx::sys {

Result<UniqueFd> clone_tree(int dirfd, const std::string& path, bool recursive) {
  unsigned flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0);
  // A named last component is never followed: the clone is of exactly
  // what was checked, not of where a swapped-in symlink points.
  flags |= path.empty() ? AT_EMPTY_PATH : AT_SYMLINK_NOFOLLOW;
  int fd = ::open_tree(dirfd, path.c_str(), flags);
  if (fd < 0) return CTX_FAIL_ERRNO("open_tree");
  return UniqueFd(fd);
}

Result<void> set_mount_attrs(int treefd, const MountAttrs& a, bool recursive) {
  struct mount_attr attr {};
  if (a.rdonly) attr.attr_set |= MOUNT_ATTR_RDONLY;
  if (a.nosuid) attr.attr_set |= MOUNT_ATTR_NOSUID;
  if (a.nodev) attr.attr_set |= MOUNT_ATTR_NODEV;
  if (a.noexec) attr.attr_set |= MOUNT_ATTR_NOEXEC;
  if (attr.attr_set == 0) return {};
  unsigned flags = AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0);
  if (::mount_setattr(treefd, "", flags, &attr, sizeof attr) < 0) return CTX_FAIL_ERRNO("mount_setattr");
  return {};
}

Result<UniqueFd> mount_fuse(int fuse_fd, std::uint32_t uid, std::uint32_t gid) {
  int raw = ::fsopen("fuse", FSOPEN_CLOEXEC);
  if (raw < 0) return CTX_FAIL_ERRNO("fsopen fuse");
  UniqueFd fs(raw);
  const std::pair<const char*, std::string> strings[] = {
      {"fd", std::to_string(fuse_fd)},
      {"rootmode", "40000"},
      {"user_id", std::to_string(uid)},
      {"group_id", std::to_string(gid)},
  };
  // No structured binding: clang 14 cannot capture one in CTX_FAIL_ERRNO's lambda.
  for (const auto& kv : strings)
    if (::fsconfig(fs.get(), FSCONFIG_SET_STRING, kv.first, kv.second.c_str(), 0) < 0)
      return CTX_FAIL_ERRNO(std::string("fsconfig fuse ") + kv.first);
  for (const char* flag : {"allow_other", "default_permissions"})
    if (::fsconfig(fs.get(), FSCONFIG_SET_FLAG, flag, nullptr, 0) < 0)
      return CTX_FAIL_ERRNO(std::string("fsconfig fuse ") + flag);
  if (::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) < 0) return CTX_FAIL_ERRNO("fsconfig fuse create");
  int m = ::fsmount(fs.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
  if (m < 0) return CTX_FAIL_ERRNO("fsmount fuse");
  return UniqueFd(m);
}

Result<void> attach_tree(int treefd, int targetfd) {
  if (::move_mount(treefd, "", targetfd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
    return CTX_FAIL_ERRNO("move_mount");
  return {};
}

Result<void> make_mounts_private() {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) return CTX_FAIL_ERRNO("mount MS_PRIVATE /");
  return {};
}

Result<void> mount_fresh(const std::string& fstype, int targetfd, unsigned long flags, const std::string& data) {
  // mount(2) takes a path: /proc/self/fd/N names the already-resolved
  // target without a second path walk.
  std::string target = "/proc/self/fd/" + std::to_string(targetfd);
  if (::mount(fstype.c_str(), target.c_str(), fstype.c_str(), flags, data.empty() ? nullptr : data.c_str()) < 0)
    return CTX_FAIL_ERRNO("mount " + fstype);
  return {};
}

Result<void> pivot_to(int new_rootfd) {
  if (::fchdir(new_rootfd) < 0) return CTX_FAIL_ERRNO("fchdir new root");
  // pivot_root(".", ".") stacks the old root on top of the new one; the
  // detach below removes it (see pivot_root(2), NOTES).
  if (::syscall(SYS_pivot_root, ".", ".") < 0) return CTX_FAIL_ERRNO("pivot_root");
  if (::umount2(".", MNT_DETACH) < 0) return CTX_FAIL_ERRNO("umount2 old root");
  if (::chdir("/") < 0) return CTX_FAIL_ERRNO("chdir /");
  return {};
}

}  // namespace ctx::sys
