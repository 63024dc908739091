#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

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
        "source /usr: EACCES: lies on no mount of the launcher's mount table, so its file system is unknown: a root "
        "launch takes mount sources only from file systems of plain files (docs/security.md, \"Mount sources of a "
        "root launch\"); name a directory that lies on one of them");
}

// docs/security.md's table of the allow-list must name exactly the code's
// types, each under its kind, in the code's order.
TEST_CASE("the allow-list table of docs/security.md matches the code", "[unit]") {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  std::ifstream in(std::string(src) + "/docs/security.md");
  REQUIRE(in);
  std::vector<std::string> documented;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#", 0) == 0) in_section = line == "### Mount sources of a root launch";
    if (!in_section || line.rfind("| ", 0) != 0) continue;
    std::size_t kind_end = line.find(" |", 2);
    std::string kind = line.substr(2, kind_end - 2);
    std::string types = line.substr(kind_end + 2, line.find(" |", kind_end + 2) - kind_end - 2);
    for (std::size_t p = types.find('`'); p != std::string::npos; p = types.find('`', p + 1)) {
      std::size_t q = types.find('`', p + 1);
      documented.push_back(kind + " " + types.substr(p + 1, q - p - 1));
      p = q;
    }
  }
  std::vector<std::string> code;
  for (const auto& a : ctx::mountspec::root_source_fs_types())
    code.push_back(std::string(to_string(a.kind)) + " " + std::string(a.name));
  CHECK(documented == code);
}
