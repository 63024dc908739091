#include "sys/fault.hpp"

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace ctx::sys {

const std::vector<FaultPoint>& fault_points() {
  static const std::vector<FaultPoint> points{
      // The supervisor's launch (launcher/supervisor/supervisor.cpp).
      {"supervisor.open_agent", "supervisor", true, ""},
      {"supervisor.watchdog", "supervisor", true, ""},
      {"supervisor.place", "supervisor", true, ""},
      {"supervisor.listen", "supervisor", true, ""},
      {"supervisor.clone", "supervisor", true, ""},
      {"supervisor.id_maps", "supervisor", true, ""},
      {"supervisor.records", "supervisor", true, ""},
      {"supervisor.setup", "supervisor", true, ""},
      {"supervisor.supervise", "supervisor", false, ""},
      // The sandbox's setup, one point per step (launcher/sandbox/channel.hpp).
      {"sandbox.private_mounts", "sandbox", true, ""},
      {"sandbox.owner_ids", "sandbox", true, ""},
      {"sandbox.root", "sandbox", true, ""},
      {"sandbox.binds", "sandbox", true, ""},
      {"sandbox.masks", "sandbox", true, "masks"},
      {"sandbox.proc", "sandbox", true, ""},
      {"sandbox.dev", "sandbox", true, ""},
      {"sandbox.run_ctx", "sandbox", true, ""},
      {"sandbox.network", "sandbox", true, ""},
      {"sandbox.pivot_root", "sandbox", true, ""},
      {"sandbox.cwd", "sandbox", true, ""},
      {"sandbox.identity", "sandbox", true, ""},
      {"sandbox.terminal", "sandbox", true, "terminal"},
      {"sandbox.fork", "sandbox", true, ""},
      {"sandbox.init", "sandbox", false, ""},
      // The runtime's process between fork and execve.
      {"runtime.exec", "runtime", true, ""},
      // Owned children, in the parent's supervisor (launcher/control/server.cpp,
      // agentdir/create.cpp, launcher/control/child_spawn.cpp).
      {"child.create.context", "supervisor", true, "child"},
      {"child.create.files", "supervisor", true, "child"},
      {"child.create.rename", "supervisor", true, "child"},
      {"child.create.answer", "supervisor", false, "child"},
      {"child.start", "supervisor", true, "child"},
      {"child.spawned", "supervisor", false, "child"},
      {"child.stop", "supervisor", false, "child"},
      // The cancellation sequence (`ctx agent stop`, the parent's death).
      {"cancel.begin", "supervisor", false, "cancel"},
      {"cancel.children", "supervisor", false, "cancel"},
      {"cancel.term", "supervisor", false, "cancel"},
      {"cancel.kill", "supervisor", false, "cancel"},
      // The end of a run.
      {"teardown.begin", "supervisor", false, ""},
      {"teardown.children", "supervisor", false, "children"},
      {"teardown.cgroup", "supervisor", false, ""},
      {"teardown.records", "supervisor", false, ""},
  };
  return points;
}

#ifdef CTX_FAULT_INJECTION
Result<void> fault_at(std::string_view point) {
  const char* spec = std::getenv("CTX_FAULT");
  if (spec == nullptr) return {};
  std::string_view s(spec);
  auto colon = s.rfind(':');
  if (colon == std::string_view::npos || s.substr(0, colon) != point) return {};
  std::string_view action = s.substr(colon + 1);
  if (action == "kill") {
    // The sandbox's init is pid 1 of its namespace, which ignores a
    // SIGKILL sent from inside it: it ends at once instead (_exit runs no
    // cleanup either; its parent sees status 128+9).
    if (::getpid() == 1) ::_exit(128 + SIGKILL);
    ::kill(::getpid(), SIGKILL);
    ::pause();
  }
  // "late": the same failure 300 ms later, as a step of a process that a
  // busy machine left without a CPU that long would fail.
  if (action == "late") {
    struct timespec late {};
    late.tv_nsec = 300'000'000;
    while (::nanosleep(&late, &late) != 0 && errno == EINTR) {
    }
  }
  if (action == "fail" || action == "late") return fail(Error{EIO, "EIO: injected fault at " + std::string(point)});
  return {};
}
#endif

}  // namespace ctx::sys
