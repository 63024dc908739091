#include "sys/probe.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "sys/error.hpp"
#include "sys/identity.hpp"
#include "sys/mount.hpp"
#include "sys/process.hpp"

namespace ctx::sys {

namespace {

bool put(const std::string& path, const std::string& v) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = ::write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size());
  ::close(fd);
  return ok;
}

// A probe child's half: its report "<step>\t<errno>" to the parent
// (probe_outcome), then its end.
[[noreturn]] void report_step(int fd, const char* step, int err) {
  std::string m = std::string(step) + "\t" + std::to_string(err);
  (void)!::write(fd, m.data(), m.size());
  _exit(1);
}

// The parent's half of a probe child (p: its pipe, pid: the child): ok
// when the child exited 0, else the Error of its report "<step>\t<errno>",
// with the step as the reason (unshare, id_map, mount, ...: what callers
// decide from).
Result<void> probe_outcome(int p[2], pid_t pid) {
  ::close(p[1]);
  char buf[64] = {};
  ssize_t n = ::read(p[0], buf, sizeof buf - 1);
  ::close(p[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  std::string r(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
  auto tab = r.find('\t');
  int err = tab == std::string::npos ? EIO : std::atoi(r.c_str() + tab + 1);
  std::string step = tab == std::string::npos ? std::string("probe") : r.substr(0, tab);
  Error e = sys_error(step, err);
  e.reason = step;
  return fail(e);
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
    auto report = [&](const char* step) { report_step(p[1], step, errno); };
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) report("unshare");
    if (!put("/proc/self/setgroups", "deny") ||
        !put("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
        !put("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1"))
      report("id_map");
    if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) report("mount");
    if (::mount("tmpfs", "/tmp", "tmpfs", 0, "size=4k") < 0) report("mount");
    _exit(0);
  }
  return probe_outcome(p, pid);
}

namespace {

// The grandchild of probe_fresh_procfs: pid 1 of the new pid namespace.
[[noreturn]] void mount_procfs_as_init(int report_fd) {
  int err = 0;
  const char* step = "mount proc";
  if (::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) {
    err = errno;
    step = "mount";
  } else if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) < 0) {
    err = errno;
  }
  if (err == 0) _exit(0);
  report_step(report_fd, step, err);
}

}  // namespace

Result<void> probe_fresh_procfs() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) < 0) return CTX_FAIL_ERRNO("pipe2");
  const bool root = ::geteuid() == 0;
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  pid_t pid = ::fork();
  if (pid < 0) return CTX_FAIL_ERRNO("fork");
  if (pid == 0) {
    auto report = [&](const char* step) { report_step(p[1], step, errno); };
    if (::unshare((root ? 0 : CLONE_NEWUSER) | CLONE_NEWNS | CLONE_NEWPID) < 0) report("unshare");
    if (!root && (!put("/proc/self/setgroups", "deny") ||
                  !put("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
                  !put("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1")))
      report("id_map");
    pid_t init = ::fork();
    if (init < 0) report("fork");
    if (init == 0) mount_procfs_as_init(p[1]);
    int st = 0;
    ::waitpid(init, &st, 0);
    _exit(WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1);
  }
  return probe_outcome(p, pid);
}

Result<void> probe_own_hostname() {
  const bool root = ::geteuid() == 0;
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  auto r = in_forked_child([&]() -> Result<void> {
    auto step = [](const char* name) { return fail(sys_error(name, errno)); };
    if (::unshare((root ? 0 : CLONE_NEWUSER) | CLONE_NEWUTS) < 0) return step("unshare");
    if (!root && (!put("/proc/self/setgroups", "deny") ||
                  !put("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1") ||
                  !put("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1")))
      return step("id_map");
    if (::sethostname("ctx-check", 9) < 0) return step("sethostname");
    return {};
  });
  if (r) return r;
  // The child's report is "<step>: <errno name>".
  Error e = r.error();
  e.reason = e.msg.substr(0, e.msg.find(':'));
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

Result<void> in_forked_child(const std::function<Result<void>()>& body) {
  CTX_TRY_ASSIGN(auto pipe, make_pipe());
  pid_t pid = ::fork();
  if (pid < 0) return CTX_FAIL_ERRNO("fork");
  if (pid == 0) {
    pipe.first.reset();
    Result<void> r = body();
    if (r) _exit(0);
    // "<errno> <message>"; the parent rebuilds the Error.
    std::string m = std::to_string(r.error().code) + " " + r.error().msg;
    (void)!::write(pipe.second.get(), m.data(), m.size());
    _exit(1);
  }
  pipe.second.reset();
  auto text = read_to_eof(pipe.first.get(), 4096);
  CTX_TRY_ASSIGN(int status, wait_pid(pid));
  if (WIFSIGNALED(status))
    return fail(Error{EIO, "the probe was killed by signal " + std::to_string(WTERMSIG(status))});
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  std::string r = text ? *text : std::string();
  auto sp = r.find(' ');
  if (sp == std::string::npos) return fail(Error{EIO, "the probe failed without a report"});
  return fail(Error{std::atoi(r.c_str()), r.substr(sp + 1)});
}

Result<void> enter_private_mount_namespace() {
  if (::geteuid() == 0) {
    if (::unshare(CLONE_NEWNS) < 0) return CTX_FAIL_ERRNO("unshare");
  } else {
    std::uint32_t uid = ::geteuid();
    std::uint32_t gid = ::getegid();
    if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0) return CTX_FAIL_ERRNO("unshare");
    CTX_TRY(write_id_maps(0, {{uid, uid, 1}}, {{gid, gid, 1}}, true));
  }
  return make_mounts_private();
}

Result<UniqueFd> open_pidfd(pid_t pid) {
  long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd < 0) return CTX_FAIL_ERRNO("pidfd_open");
  return UniqueFd(static_cast<int>(fd));
}

Result<void> close_fd_range(unsigned first, unsigned last) {
  if (::syscall(SYS_close_range, first, last, 0) < 0) return CTX_FAIL_ERRNO("close_range");
  return {};
}

Result<void> load_allow_all_filter() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return CTX_FAIL_ERRNO("prctl(PR_SET_NO_NEW_PRIVS)");
  struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
  struct sock_fprog prog = {1, allow};
  if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0) return CTX_FAIL_ERRNO("seccomp");
  return {};
}

Result<std::string> kernel_release() {
  struct utsname u = {};
  if (::uname(&u) < 0) return CTX_FAIL_ERRNO("uname");
  return std::string(u.release);
}

}  // namespace ctx::sys
