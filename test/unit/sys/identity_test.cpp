// sys/identity.hpp: FsIdScope, in a forked child (the runner never
// changes its own ids).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/identity.hpp"

// Before: the kernel clears PR_SET_PDEATHSIG on every change of the
// file-system ids, so a child supervisor that wrote one record with its
// owner's ids no longer learned of its parent's death (its cancellation
// came only with the parent's cgroup.kill, seconds later, unrecorded).
TEST_CASE("FsIdScope keeps the parent-death signal across its change of ids", "[root]") {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::prctl(PR_SET_PDEATHSIG, SIGUSR2) < 0) _exit(10);
    {
      auto scope = ctx::sys::FsIdScope::enter(ctx::sys::Creds{65534, 65534, {}});
      if (!scope) _exit(11);
      int inside = -1;
      if (::prctl(PR_GET_PDEATHSIG, &inside) < 0) _exit(12);
      if (inside != 0) _exit(13);  // the kernel's clearing, which the scope mends
    }
    int after = 0;
    if (::prctl(PR_GET_PDEATHSIG, &after) < 0) _exit(14);
    _exit(after == SIGUSR2 ? 0 : 15);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
