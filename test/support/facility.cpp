#include "test/support/facility.hpp"

#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "cgroup/discover.hpp"
#include "sys/fault.hpp"
#include "sys/mountinfo.hpp"
#include "test/support/launch.hpp"

namespace ctx::test {

namespace {

// Whether `attempt` succeeds in a forked child running as the test user
// (switched to when the runner is root): the runner itself never changes
// its ids or namespaces.
bool as_user_succeeds(const TestUser& u, bool (*attempt)()) {
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    if (::geteuid() == 0 && u.uid != 0) {
      if (::setgroups(0, nullptr) < 0 || ::setresgid(u.gid, u.gid, u.gid) < 0 || ::setresuid(u.uid, u.uid, u.uid) < 0)
        _exit(2);
    }
    _exit(attempt() ? 0 : 1);
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

bool can_unshare_user(const TestUser& u) {
  return as_user_succeeds(u, [] { return ::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0; });
}

bool can_open_fuse(const TestUser& u) {
  return as_user_succeeds(u, [] { return ::open("/dev/fuse", O_RDWR | O_CLOEXEC) >= 0; });
}

std::string& facility_slot() {
  static std::string f;
  return f;
}

}  // namespace

std::string agents_dir() {
  const char* d = std::getenv("CTX_AGENTS_DIR");
  return d != nullptr && *d != '\0' ? d : "/opt/ctx-test-agents";
}

const std::string& current_facility() { return facility_slot(); }
void set_current_facility(const std::string& f) { facility_slot() = f; }

std::optional<std::string> facility_missing(const std::string& facility) {
  if (facility == "unit" || facility == "fs") return std::nullopt;
  if (facility == "root") {
    if (::geteuid() != 0)
      return "the test runs as uid " + std::to_string(::geteuid()) + ", not root (run it with sudo)";
    if (::access("/dev/fuse", F_OK) != 0)
      return "there is no /dev/fuse, so launches have no agent view (docs/view.md): modprobe fuse";
    return std::nullopt;
  }
  if (facility == "userns") {
    auto u = test_user();
    if (!u)
      return "the runner is root and the unprivileged test user $CTX_TEST_USER (default ctx-test) does not exist "
             "(scripts/setup creates it)";
    if (!can_unshare_user(*u))
      return "unprivileged user namespaces are unavailable to " + u->name +
             " (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, or on Ubuntu "
             "kernel.apparmor_restrict_unprivileged_userns=0 / the AppArmor profile in examples/)";
    if (!can_open_fuse(*u))
      return "/dev/fuse cannot be opened by " + u->name +
             ", so its launches have no agent view (docs/view.md): chmod 0666 /dev/fuse (Debian's default; "
             "scripts/setup restores it)";
    return std::nullopt;
  }
  if (facility == "cgroup") {
    if (::geteuid() != 0) return "the cgroup tests place agents as root (run them with sudo)";
    auto mounts = sys::read_mountinfo();
    if (!mounts) return "reading the mount table: " + mounts.error().msg;
    if (!cgroup::find_cgroup2(*mounts)) return "no cgroup2 file system is mounted";
    return std::nullopt;
  }
  if (facility == "limits") {
    if (auto no = facility_missing("cgroup")) return no;
    auto mounts = sys::read_mountinfo();
    if (!mounts) return "reading the mount table: " + mounts.error().msg;
    auto m = cgroup::find_cgroup2(*mounts);
    if (!m) return "no cgroup2 file system is mounted";
    std::ifstream in(m->mount_point + "/cgroup.controllers");
    std::string have;
    std::getline(in, have);
    for (const char* c : {"memory", "pids", "cpu"})
      if ((" " + have + " ").find(std::string(" ") + c + " ") == std::string::npos)
        return "the cgroup2 mount at " + m->mount_point + " offers no " + c +
               " controller (cgroup.controllers: " + (have.empty() ? std::string("none") : have) +
               "; cgroup v1 holds them on this machine): controller limits are tested where cgroup2 has them, "
               "e.g. a systemd machine with the unified hierarchy";
    return std::nullopt;
  }
  if (facility == "fuse") {
    if (::geteuid() != 0) return "the /dev/fuse tests cover the device as root for the test user (run them with sudo)";
    if (::access("/dev/fuse", F_OK) != 0) return "/dev/fuse does not exist (modprobe fuse, or apt-get install fuse3)";
    return facility_missing("userns");
  }
  if (facility == "fault") {
    if (!sys::kFaultInjection)
      return "this build has no fault injection (a test-only build: meson setup -Dfault_injection=true; "
             "scripts/test makes its clang build so)";
    if (auto no = facility_missing("root")) return no;
    return facility_missing("userns");
  }
  if (facility == "agents") {
    if (auto no = facility_missing("root")) return no;
    if (auto no = facility_missing("userns")) return no;
    for (const char* cli : {"claude", "codex"})
      if (::access((agents_dir() + "/node_modules/.bin/" + cli).c_str(), X_OK) != 0)
        return "the coding-agent CLIs are not installed in " + agents_dir() + " (no node_modules/.bin/" + cli +
               "): scripts/install-agents installs them with npm ($CTX_AGENTS_DIR names another directory)";
    if (::access("/usr/bin/python3", X_OK) != 0)
      return "there is no /usr/bin/python3 for the fake API server (apt-get install python3)";
    return std::nullopt;
  }
  return "unknown facility tag [" + facility +
         "] (this runner knows unit, fs, root, userns, cgroup, limits, fuse, fault, agents)";
}

}  // namespace ctx::test
