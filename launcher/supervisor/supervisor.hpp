// The per-agent supervisor: ctx-agent-run itself, staying outside the
// sandbox as the runtime's parent. It holds its instance's locks (one
// supervisor per session of an agent: docs/abi.md, "Instances"), owns
// the instance's agent socket and the NOTIFY_SOCKET, keeps status/pid/log
// and the session's events.jsonl, forwards signals and returns the exit
// status.
#pragma once

#include <optional>
#include <string>

#include <sys/types.h>

#include <vector>

#include "agentdir/agent_spec.hpp"
#include "launcher/control/server.hpp"
#include "launcher/plan/plan.hpp"

namespace ctx::launcher {

/// Options of one supervised launch.
struct SuperviseOptions {
  int json_status_fd = -1;  ///< >= 0: write the launch report here as JSON
  /// A private directory of the caller's that lasts until reboot (its
  /// XDG_RUNTIME_DIR, verified, or /run for root), for the once-per-boot
  /// warning's marker; "" for none (the warning is said every time).
  std::string marker_dir;
  /// The NOTIFY_SOCKET of our own caller (systemd Type=notify), if any.
  std::string parent_notify_socket;
  /// --cgroup-base: the delegated cgroup to build the agent's subtree in.
  std::string cgroup_base;
  /// --require-cgroup: no writable cgroup v2 is an error, not a fallback.
  bool require_cgroup = false;
  /// ctx-agent-run's own path, to start owned children's supervisors.
  std::string self_exe;
  /// The environment child supervisors get (ours, without NOTIFY_SOCKET).
  std::vector<std::string> child_env;
  /// Grace between SIGTERM and cgroup.kill when cancelling (seed 003).
  int cancel_grace_ms = kDefaultCancelGraceMs;
  /// An owned child: the pid of the parent's supervisor, which started us
  /// with PR_SET_PDEATHSIG; 0 otherwise.
  pid_t owned_by = 0;
  /// --cgroup-leaf: the subtree's name below the base (owned children).
  std::string cgroup_leaf;
  /// An owned child's coordination directory in its parent's session
  /// (status written there), "" otherwise.
  std::string handoff_dir;
};

/// Launches and supervises the plan's sandbox, and the owned children its
/// runtime creates through the control socket (launcher/control/server.hpp).
/// When the runtime ends, or the parent of an owned child dies, the
/// children are cancelled (seed 003): SIGTERM, the grace period, then
/// cgroup.kill. A watchdog process cleans up (cgroup, sockets, status)
/// if the supervisor itself is SIGKILLed. Returns the process exit
/// code: the runtime's, 128+signal, 125 when the launch failed before exec
/// (the error is printed by the caller from `error`), 126/127 when the
/// runtime could not be executed or found.
/// `spec` is the agent the plan was made from (its policy decides what the
/// control socket may do).
int supervise(const agentdir::AgentSpec& spec, const LaunchPlan& plan, const SuperviseOptions& opts,
              std::optional<Error>& error);

}  // namespace ctx::launcher
