#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <seccomp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sys/mountinfo.hpp"
#include "test/support/namespaces.hpp"
#include "test/support/tempdir.hpp"

namespace {

using ctx::test::write_file;

// listmount(2), Linux 6.8, the same number on every architecture.
constexpr int kListmount = 458;

// A reader of the mount table: libmount's, statmount's, or the one that
// picks between them.
using Reader = ctx::Result<std::vector<ctx::sys::MountEntry>> (*)();

const ctx::sys::MountEntry* find_target(const std::vector<ctx::sys::MountEntry>& m, const std::string& target) {
  const ctx::sys::MountEntry* found = nullptr;
  for (const auto& e : m)
    if (e.target == target) found = &e;  // the last one covers the others
  return found;
}

std::vector<ctx::sys::MountEntry> only(std::vector<ctx::sys::MountEntry> m, const std::string& fstype) {
  std::erase_if(m, [&](const ctx::sys::MountEntry& e) { return e.fstype != fstype; });
  return m;
}

// TMPFS_MAGIC, <linux/magic.h>.
constexpr ctx::sys::FsType kTmpfs{"tmpfs", 0x01021994};

int wait_status(pid_t p) {
  int st = 0;
  if (::waitpid(p, &st, 0) != p || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

}  // namespace

// The kernel escapes a space as "\040" and a newline as "\012" in
// mountinfo, which libmount decodes; statmount hands the path out as it
// is. Either way the mount point and the mount's root come back exactly.
TEST_CASE("mount tables from libmount and statmount decode a space and a newline", "[userns]") {
  ctx::test::TempDir t;
  const std::string space = t.path() + "/a b", newline = t.path() + "/c\nd", sub = t.path() + "/e f\ng";
  for (const auto& d : {space, newline, sub}) REQUIRE(::mkdir(d.c_str(), 0755) == 0);
  auto [reader, name] = GENERATE(table<Reader, std::string>({{&ctx::sys::read_mountinfo, "libmount"},
                                                             {&ctx::sys::list_mounts, "statmount"},
                                                             {&ctx::sys::mount_table, "mount_table"}}));
  INFO(name);
  pid_t p = ::fork();
  REQUIRE(p >= 0);
  if (p == 0) {
    std::string uid = std::to_string(::geteuid()), gid = std::to_string(::getegid());
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(10);
    if (!write_file("/proc/self/setgroups", "deny") || !write_file("/proc/self/uid_map", "0 " + uid + " 1") ||
        !write_file("/proc/self/gid_map", "0 " + gid + " 1"))
      ::_exit(11);
    if (::mount("tmpfs", space.c_str(), "tmpfs", 0, "size=16k") != 0 ||
        ::mount("tmpfs", newline.c_str(), "tmpfs", 0, "size=16k") != 0)
      ::_exit(12);
    // A bind of a directory inside the tmpfs: the mount's root is "/x y\nz".
    const std::string inner = space + "/x y\nz";
    if (::mkdir(inner.c_str(), 0755) != 0 || ::mount(inner.c_str(), sub.c_str(), nullptr, MS_BIND, nullptr) != 0)
      ::_exit(13);
    auto m = reader();
    if (!m) ::_exit(14);
    auto* s = find_target(*m, space);
    auto* n = find_target(*m, newline);
    auto* b = find_target(*m, sub);
    if (s == nullptr || s->fstype != "tmpfs" || s->root != "/") ::_exit(15);
    if (n == nullptr || n->fstype != "tmpfs" || n->root != "/") ::_exit(16);
    if (b == nullptr || b->fstype != "tmpfs" || b->root != "/x y\nz") ::_exit(17);
    // Both readers see the same table, in the same order.
    auto lm = ctx::sys::read_mountinfo();
    if (!lm || *lm != *m) ::_exit(18);
    // Asking for one type skips the others' strings, and gives the same.
    auto tmpfs = ctx::sys::mount_table_of(kTmpfs);
    if (!tmpfs || *tmpfs != only(*lm, "tmpfs") || find_target(*tmpfs, newline) == nullptr) ::_exit(19);
    ::_exit(0);
  }
  CHECK(wait_status(p) == 0);
}

TEST_CASE("mountinfo of the runner's namespace holds / and /proc, from both readers", "[unit]") {
  auto [reader, name] = GENERATE(table<Reader, std::string>({{&ctx::sys::read_mountinfo, "libmount"},
                                                             {&ctx::sys::list_mounts, "statmount"},
                                                             {&ctx::sys::mount_table, "mount_table"}}));
  INFO(name);
  auto m = reader();
  REQUIRE(m);
  bool root = false, proc = false;
  for (const auto& e : *m) {
    root = root || e.target == "/";
    proc = proc || (e.target == "/proc" && e.fstype == "proc");
  }
  CHECK(root);
  CHECK(proc);
}

// Before Linux 6.8 listmount is ENOSYS; a seccomp filter (a sandbox's, or
// a container runtime's) may make it EPERM. mount_table() then reads
// mountinfo with libmount; list_mounts() says which call failed.
TEST_CASE("mount_table falls back to libmount when listmount is ENOSYS or EPERM", "[unit]") {
  int err = GENERATE(ENOSYS, EPERM);
  INFO(ctx::errno_name(err));
  pid_t p = ::fork();
  REQUIRE(p >= 0);
  if (p == 0) {
    scmp_filter_ctx f = ::seccomp_init(SCMP_ACT_ALLOW);
    if (f == nullptr || ::seccomp_rule_add(f, SCMP_ACT_ERRNO(static_cast<std::uint32_t>(err)), kListmount, 0) != 0 ||
        ::seccomp_load(f) != 0)
      ::_exit(10);
    auto listed = ctx::sys::list_mounts();
    if (listed || listed.error().code != err || listed.error().msg != "listmount: " + ctx::errno_name(err)) ::_exit(11);
    auto table = ctx::sys::mount_table();
    auto lm = ctx::sys::read_mountinfo();
    if (!table || !lm || *table != *lm || find_target(*table, "/") == nullptr) ::_exit(12);
    auto cg = ctx::sys::mount_table_of(ctx::sys::kCgroup2);
    if (!cg || *cg != only(*lm, "cgroup2")) ::_exit(13);
    ::_exit(0);
  }
  CHECK(wait_status(p) == 0);
}

TEST_CASE("the mounts of one type, by superblock magic, are the table's of that name", "[unit]") {
  auto lm = ctx::sys::read_mountinfo();
  REQUIRE(lm);
  // Types the tests running beside this one do not mount in this namespace.
  for (const auto& type : {ctx::sys::kCgroup2, ctx::sys::FsType{"proc", 0x9fa0}}) {
    INFO(type.name);
    auto of = ctx::sys::mount_table_of(type);
    REQUIRE(of);
    CHECK(*of == only(*lm, std::string(type.name)));
  }
}

TEST_CASE("mount_at: the mount of a type whose mount point is the path, alone", "[unit]") {
  auto lm = ctx::sys::read_mountinfo();
  REQUIRE(lm);
  const auto cgroup2 = only(*lm, "cgroup2");
  for (const auto& m : cgroup2) {
    INFO(m.target);
    auto at = ctx::sys::mount_at(m.target, ctx::sys::kCgroup2);
    REQUIRE(at);
    // The one on top there: the last mounted at that point.
    const ctx::sys::MountEntry* top = nullptr;
    for (const auto& e : *lm)
      if (e.target == m.target) top = &e;
    if (top->fstype == "cgroup2") {
      REQUIRE(*at);
      CHECK(**at == *top);
    } else {
      CHECK_FALSE(*at);
    }
  }
  // Not a mount point, another type, nothing there.
  for (const char* p : {"/", "/proc", "/sys/fs", "/nonexistent/path"}) {
    INFO(p);
    auto at = ctx::sys::mount_at(p, ctx::sys::kCgroup2);
    REQUIRE(at);
    CHECK_FALSE(*at);
  }
  auto proc = ctx::sys::mount_at("/proc", ctx::sys::FsType{"proc", 0x9fa0});
  REQUIRE(proc);
  REQUIRE(*proc);
  CHECK((*proc)->target == "/proc");
}
