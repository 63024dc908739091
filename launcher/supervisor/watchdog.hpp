// The watchdog: a small process outside the agent's cgroup that outlives
// a supervisor killed by SIGKILL and then does what its teardown would
// have done: waits for the owned children (they got PR_SET_PDEATHSIG and
// cancel themselves; the supervisor hands it each child's pidfd as the
// child starts, so it waits for them with or without a cgroup), kills and
// removes the cgroup subtree, removes the instance's socket and marks it
// dead. Started as soon as the instance's locks are taken, before the
// cgroup exists (the supervisor hands it the placement's descriptors), so
// that a supervisor killed at any later step of a launch leaves nothing
// behind. It keeps the instance's locks (the shared open files of
// <name>.d and of its instance directory) while it cleans. Messages: "c"
// (done), "p" + a child's pidfd, "g" + a cgroup handover
// (cgroup::Placement::handover), and the caller's terminal while the relay
// has it raw (TerminalKeeper), put back first of all.
//
// While the supervisor lives the watchdog is a recorder (sys/recorder.hpp):
// it shares the supervisor's memory, so that starting it copies nothing,
// and keeps each message, with its descriptors, in a memfd whose first
// record is the job. When the supervisor is gone it executes the launcher
// again as `ctx-agent-run --watchdog FD`, which reads the memfd back and
// cleans up (run_watchdog).
#pragma once

#include <sys/types.h>
#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/plan/plan.hpp"
#include "sys/recorder.hpp"

namespace ctx::launcher {

/// What the watchdog cleans up after a supervisor that is gone.
struct WatchdogJob {
  const LaunchPlan& plan;
  int agents, ddir;
  int idir;            ///< <name>.d/instance/<session>, whose lock it keeps too
  bool primary;        ///< the instance owns <name>.d/status and pid
  std::string socket;  ///< the instance's socket name in `agents`
  int grace_ms;
  std::string handoff_dir;  ///< an owned child's coordination directory, or ""
};

/// A started watchdog: the socket its messages go to, and its process.
class Watchdog {
 public:
  static Result<Watchdog> start(const WatchdogJob& job);
  Watchdog(Watchdog&&) noexcept;
  Watchdog& operator=(Watchdog&&) = delete;
  Watchdog(const Watchdog&) = delete;
  ~Watchdog();
  int socket() const { return sock_.get(); }
  /// "c", then waits for it to exit: the supervisor ends normally.
  void finish();

 private:
  Watchdog(UniqueFd sock, sys::Recorder rec);
  UniqueFd sock_;
  sys::Recorder rec_;
};

/// `ctx-agent-run --watchdog FD`: the watchdog once its supervisor is gone,
/// from the memfd FD it recorded. Not for people: it refuses any FD that is
/// not such a memfd. Returns the exit status.
int run_watchdog(const char* fd);

}  // namespace ctx::launcher
