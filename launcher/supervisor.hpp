// The per-agent supervisor: ctx-agent-run itself, staying outside the
// sandbox as the runtime's parent. It holds the one-instance lock, owns
// the agent socket and the NOTIFY_SOCKET, keeps status/pid/log and the
// session's events.jsonl, forwards signals and returns the exit status.
#pragma once

#include <optional>
#include <string>

#include "launcher/plan.hpp"

namespace ctx::launcher {

/// Options of one supervised launch.
struct SuperviseOptions {
  int json_status_fd = -1;  ///< >= 0: write the launch report here as JSON
  std::string run_dir_base;  ///< where the private runtime dir is made
  /// The NOTIFY_SOCKET of our own caller (systemd Type=notify), if any.
  std::string parent_notify_socket;
  /// --cgroup-base: the delegated cgroup to build the agent's subtree in.
  std::string cgroup_base;
  /// --require-cgroup: no writable cgroup v2 is an error, not a fallback.
  bool require_cgroup = false;
};

/// Launches and supervises the plan's sandbox. Returns the process exit
/// code: the runtime's, 128+signal, 125 when the launch failed before exec
/// (the error is printed by the caller from `error`), 126/127 when the
/// runtime could not be executed or found.
int supervise(const LaunchPlan& plan, const SuperviseOptions& opts, std::optional<Error>& error);

}  // namespace ctx::launcher
