#include <catch2/catch.hpp>

#include "mountspec/source_fs.hpp"

using ctx::mountspec::MountEntry;
using ctx::mountspec::root_source_fs_allowed;
using ctx::mountspec::source_fs_issue;
using ctx::mountspec::SourceRole;

namespace {

const std::string kWhy =
    ", which is not a file system of plain files: a root launch takes mount sources only from those "
    "(docs/security.md, \"Mount sources of a root launch\")";

}  // namespace

TEST_CASE("a root launch takes mount sources only from the allow-list of file systems", "[unit]") {
  for (const char* t : {"ext4", "xfs", "btrfs", "f2fs", "zfs", "tmpfs", "overlay", "squashfs", "erofs", "iso9660",
                        "nfs4", "cifs", "9p", "virtiofs", "vfat", "fuse", "fuseblk", "fuse.sshfs", "fuse.ctx-view"})
    CHECK(root_source_fs_allowed(t));
  // The pseudo file systems the old deny-list named, those it missed, and
  // names no list has seen.
  for (const char* t :
       {"proc",     "sysfs",      "debugfs",   "tracefs", "securityfs",  "cgroup",  "cgroup2",   "bpf",  "configfs",
        "efivarfs", "pstore",     "devtmpfs",  "mqueue",  "binfmt_misc", "fusectl", "hugetlbfs", "nsfs", "devpts",
        "autofs",   "rpc_pipefs", "selinuxfs", "fuse.",   "fusex",       "ext",     "",          "EXT4"})
    CHECK_FALSE(root_source_fs_allowed(t));
}

TEST_CASE("a bind of a source off the allow-list, or an rbind holding one, is refused with the reason", "[unit]") {
  const std::vector<MountEntry> mounts{
      {"/", "ext4", "/"},         {"/proc", "proc", "/"},         {"/dev", "devtmpfs", "/"},
      {"/dev/shm", "tmpfs", "/"}, {"/dev/mqueue", "mqueue", "/"}, {"/srv", "xfs", "/"},
      {"/srv/a b", "tmpfs", "/"}, {"/srv/n", "nsfs", "/"},        {"/mnt", "tmpfs", "/"},
      {"/mnt", "hugetlbfs", "/"}, {"/home", "fuse.sshfs", "/"}};
  CHECK(source_fs_issue(SourceRole::bind, "/dev", false, mounts) ==
        "source /dev: EACCES: lies on devtmpfs" + kWhy +
            "; bind a directory of a disk, memory or network file system instead, or remove the line");
  CHECK(source_fs_issue(SourceRole::bind, "/dev/mqueue/q", false, mounts) ==
        "source /dev/mqueue/q: EACCES: lies on mqueue" + kWhy +
            "; bind a directory of a disk, memory or network file system instead, or remove the line");
  CHECK(source_fs_issue(SourceRole::root, "/proc/1", false, mounts) ==
        "root /proc/1: EACCES: lies on proc" + kWhy + "; make the root a directory of a disk or memory file system");
  // The later mount at one target covers the earlier.
  CHECK(source_fs_issue(SourceRole::bind, "/mnt", false, mounts)->find("lies on hugetlbfs,") != std::string::npos);
  // Recursive: the first submount off the list, in the table's order.
  CHECK(source_fs_issue(SourceRole::bind, "/", true, mounts) ==
        "source /: EACCES: holds /proc (proc)" + kWhy +
            "; use bind instead of rbind, or bind only the directories the agent needs");
  CHECK(source_fs_issue(SourceRole::bind, "/srv", true, mounts) ==
        "source /srv: EACCES: holds /srv/n (nsfs)" + kWhy +
            "; use bind instead of rbind, or bind only the directories the agent needs");
  CHECK(source_fs_issue(SourceRole::bind, "/dev/shm", false, mounts) == std::nullopt);
  CHECK(source_fs_issue(SourceRole::bind, "/dev/shm", true, mounts) == std::nullopt);
  CHECK(source_fs_issue(SourceRole::bind, "/", false, mounts) == std::nullopt);
  CHECK(source_fs_issue(SourceRole::bind, "/srv", false, mounts) == std::nullopt);
  CHECK(source_fs_issue(SourceRole::bind, "/srv/a b", true, mounts) == std::nullopt);
  CHECK(source_fs_issue(SourceRole::bind, "/home/u", true, mounts) == std::nullopt);
  CHECK(source_fs_issue(SourceRole::bind, "/usr", true, mounts) == std::nullopt);
  // A path no mount holds: the type is unknown, so refused.
  CHECK(source_fs_issue(SourceRole::bind, "/usr", false, {}) ==
        "source /usr: EACCES: lies on no mount of the launcher's mount table, so its file system is unknown" + kWhy +
            "; name a directory that lies on one of them");
}
