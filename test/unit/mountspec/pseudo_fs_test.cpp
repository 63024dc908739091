#include <catch2/catch.hpp>

#include "mountspec/pseudo_fs.hpp"

using ctx::mountspec::MountEntry;
using ctx::mountspec::pseudo_fs_issue;

TEST_CASE("a bind of a pseudo file system, or an rbind holding one, is refused with the reason", "[unit]") {
  const std::vector<MountEntry> mounts{
      {"/", "ext4", "/"},    {"/proc", "proc", "/"},     {"/sys", "sysfs", "/"}, {"/sys/fs/cgroup", "cgroup2", "/"},
      {"/srv", "ext4", "/"}, {"/srv/a b", "tmpfs", "/"}, {"/mnt", "tmpfs", "/"}, {"/mnt", "proc", "/"}};
  CHECK(pseudo_fs_issue("/proc", false, mounts) ==
        "source /proc is on proc, a pseudo file system that exposes the host's processes and kernel state: a root "
        "launch does not bind it; remove the line");
  CHECK(pseudo_fs_issue("/proc/1/root", true, mounts)->find("is on proc") != std::string::npos);
  CHECK(pseudo_fs_issue("/sys/fs/cgroup/x", false, mounts)->find("is on cgroup2") != std::string::npos);
  // The later mount at one target covers the earlier.
  CHECK(pseudo_fs_issue("/mnt", false, mounts)->find("is on proc") != std::string::npos);
  CHECK(pseudo_fs_issue("/", true, mounts) ==
        "source / holds /proc (proc), a pseudo file system that exposes the host's processes and kernel state: a root "
        "launch does not bind it; use bind instead of rbind, or bind only the directories the agent needs");
  CHECK_FALSE(pseudo_fs_issue("/", false, mounts));
  CHECK_FALSE(pseudo_fs_issue("/srv", true, mounts));
  CHECK_FALSE(pseudo_fs_issue("/usr", true, mounts));
}
