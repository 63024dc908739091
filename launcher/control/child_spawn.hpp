// Starting an owned child's supervisor, and ending it: the signals a
// parent's supervisor sends its children's, the grace it gives them, and
// the wait for them (seed 003, docs/children.md "Cancellation").
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "base/result.hpp"
#include "launcher/control/child_registry.hpp"
#include "sys/file.hpp"

namespace ctx::launcher {

/// The signal a parent supervisor sends to an owned child's supervisor
/// (and the PR_SET_PDEATHSIG the kernel sends when the parent supervisor
/// dies in any way): run the cancellation sequence. SIGRTMIN+2.
int parent_dead_signal();

/// The signal a parent supervisor sends for `ctx agent stop`: the same
/// sequence (SIGTERM, grace, cgroup.kill) ending in status "stopped".
/// SIGRTMIN+3.
int stop_signal();

/// The default grace between SIGTERM and cgroup.kill when owned children
/// are cancelled (--cancel-grace-ms).
inline constexpr int kDefaultCancelGraceMs = 2000;
/// How long, past the grace period, a parent waits for its children's
/// supervisors to finish their records before it SIGKILLs them.
inline constexpr int kChildRecordsMs = 3000;

/// How child supervisors are started.
struct SpawnConfig {
  std::string self_exe;      ///< ctx-agent-run, to start child supervisors
  std::string agent_cgroup;  ///< the agent's cgroup directory, "" without cgroups
  bool require_cgroup = false;
  int cancel_grace_ms = kDefaultCancelGraceMs;
  std::vector<std::string> env;  ///< the child supervisors' environment
  /// The rights the child's files are made with: the owner's file-system
  /// ids for a root caller (owner_rights), else the caller's own.
  sys::MakeAs owner;
};

/// The command line of a child's supervisor: owned by parent_pid, status
/// on fd 3, below `<agent_cgroup>/child` when there is one, running
/// `command` (or the child's entry when empty). Pure.
std::vector<std::string> child_supervisor_argv(const SpawnConfig& cfg, const std::string& ctx_root, pid_t parent_pid,
                                               const std::string& name, const std::vector<std::string>& command);

/// Starts the supervisor of a checked child: makes `<agent_cgroup>/child`
/// when missing, then ctx-agent-run with stdin
/// /dev/null, stdout and stderr appended to the child's own session's
/// output.log, its death signal parent_dead_signal() and its status pipe
/// non-blocking in the returned record.
Result<OwnedChild> spawn_child_supervisor(const SpawnConfig& cfg, const agentdir::AgentSpec& child,
                                          const std::vector<std::string>& command);

/// Reaps a child's supervisor whose pidfd is readable (or that was
/// killed): its exit status, or kExitLaunchFailed when it cannot be had.
int reap_child(const OwnedChild& c);

/// Sends sig to every running child's supervisor.
void signal_children(ChildRegistry& reg, int sig);

/// Waits (polling only the children) until none runs or timeout_ms has
/// passed; then, with kill_left, SIGKILLs and reaps those left. `ended`
/// is called with each child's name and exit status as it is reaped.
void wait_children(ChildRegistry& reg, int timeout_ms, bool kill_left,
                   const std::function<void(const std::string&, int)>& ended);

}  // namespace ctx::launcher
