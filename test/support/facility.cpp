#include "test/support/facility.hpp"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace ctx::test {

namespace {

// Tries unshare(CLONE_NEWUSER) in a forked child: the runner itself never
// changes its namespaces.
bool can_unshare_user() {
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : 1);
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0) return false;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

std::optional<std::string> facility_missing(const std::string& facility) {
  if (facility == "unit" || facility == "fs") return std::nullopt;
  if (facility == "root") {
    if (::geteuid() != 0) return "the test runs as uid " + std::to_string(::geteuid()) + ", not root (run it with sudo)";
    return std::nullopt;
  }
  if (facility == "userns") {
    if (!can_unshare_user())
      return "unprivileged user namespaces are unavailable (sysctl kernel.unprivileged_userns_clone=1, "
             "user.max_user_namespaces > 0, or the AppArmor restriction "
             "kernel.apparmor_restrict_unprivileged_userns=0)";
    return std::nullopt;
  }
  return "unknown facility tag [" + facility + "] (this runner knows unit, fs, root, userns)";
}

}  // namespace ctx::test
