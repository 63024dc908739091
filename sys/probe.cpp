#include "sys/probe.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "sys/error.hpp"

namespace ctx::sys {

namespace {

bool put(const std::string& path, const std::string& v) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size());
  ::close(fd);
  return ok;
}

}  // namespace

Result<void> probe_user_namespace() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) < 0) return CTX_FAIL_ERRNO("pipe2");
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  pid_t pid = ::fork();
  if (pid < 0) return CTX_FAIL_ERRNO("fork");
  if (pid == 0) {
    // Reports "<step> <errno>" and exits.
    auto report = [&](const char* step) {
      std::string m = std::string(step) + " " + std::to_string(errno);
      (void)!::write(p[1], m.data(), m.size());
      _exit(1);
    };
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) report("unshare");
    if (!put("/proc/self/setgroups", "deny") ||
        !put("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
        !put("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1"))
      report("id_map");
    if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) report("mount");
    if (::mount("tmpfs", "/tmp", "tmpfs", 0, "size=4k") < 0) report("mount");
    _exit(0);
  }
  ::close(p[1]);
  char buf[64] = {};
  ssize_t n = ::read(p[0], buf, sizeof buf - 1);
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  std::string r(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  auto sp = r.find(' ');
  int err = sp == std::string::npos ? EIO : std::atoi(r.c_str() + sp + 1);
  std::string step = sp == std::string::npos ? std::string("probe") : r.substr(0, sp);
  Error e = sys_error(step, err);
  e.reason = step;  // unshare, id_map, mount: what callers decide from
  return fail(e);
}

Result<int> landlock_abi() {
  long v = ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (v < 0) return CTX_FAIL_ERRNO("landlock_create_ruleset");
  return static_cast<int>(v);
}

Result<void> probe_open_rw(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return CTX_FAIL_ERRNO("open " + path);
  ::close(fd);
  return {};
}

}  // namespace ctx::sys
