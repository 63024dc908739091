#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "sys/mountinfo.hpp"
#include "test/support/tempdir.hpp"

namespace {

bool write_file(const char* path, const std::string& s) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  ::close(fd);
  return ok;
}

}  // namespace

// libmount unescapes what the kernel escapes in mountinfo ("\040" for a
// space, "\012" for a newline): the target comes back exactly.
TEST_CASE("mountinfo is read with libmount, escaped mount points included", "[userns]") {
  ctx::test::TempDir t;
  const std::string odd = t.path() + "/a b\nc";
  REQUIRE(::mkdir(odd.c_str(), 0755) == 0);
  pid_t p = ::fork();
  if (p == 0) {
    std::string uid = std::to_string(::geteuid()), gid = std::to_string(::getegid());
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) ::_exit(10);
    if (!write_file("/proc/self/setgroups", "deny") || !write_file("/proc/self/uid_map", "0 " + uid + " 1") ||
        !write_file("/proc/self/gid_map", "0 " + gid + " 1"))
      ::_exit(11);
    if (::mount("tmpfs", odd.c_str(), "tmpfs", 0, "size=16k") != 0) ::_exit(12);
    auto m = ctx::sys::read_mountinfo();
    if (!m) ::_exit(13);
    for (const auto& e : *m)
      if (e.target == odd && e.fstype == "tmpfs") ::_exit(0);
    ::_exit(14);
  }
  int st = 0;
  REQUIRE(::waitpid(p, &st, 0) == p);
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("mountinfo of the runner's namespace holds / and /proc", "[unit]") {
  auto m = ctx::sys::read_mountinfo();
  REQUIRE(m);
  bool root = false, proc = false;
  for (const auto& e : *m) {
    root = root || e.target == "/";
    proc = proc || (e.target == "/proc" && e.fstype == "proc");
  }
  CHECK(root);
  CHECK(proc);
}
