// `ctx ps` and `ctx status`: what runs in a CTX root.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"

namespace ctx::helper {

/// One running instance of an agent as `ctx ps` shows it.
struct PsRow {
  std::string name;    ///< as shown: "<name>", or "<name>@<U>" for a user agent
  std::string parent;  ///< the parent agent's name, "" for a top-level agent
  /// The instance's status word, or `running`: `start` once the runtime
  /// was exec'd (it sent no READY=1 or CTX_STATE yet, as most never do).
  std::string status;
  int pid = 0;          ///< the instance's supervisor (its `pid` file)
  double uptime_s = 0;  ///< since the supervisor started
  std::string cgroup;   ///< the sandbox's cgroup v2 path, "-" without one
  std::string session;  ///< the instance's session
};

/// The instances (<name>.d/instance/<session>/) whose `pid` names a live
/// supervisor and whose status is not dead: system agents, then the user
/// agents of every home/<U>/agent; an agent's instances by session name.
/// ENOENT (with what to do) when ctx_root is no CTX root (no agent/).
Result<std::vector<PsRow>> running_agents(const std::string& ctx_root);

/// The rows as a tree: children under their parent, indented; orphans
/// (parent not running) at the top level. Pure.
std::string format_ps(const std::vector<PsRow>& rows);

/// `ctx status`: the root's status file, or an error sentence.
std::optional<std::string> root_status(const std::string& ctx_root, std::string& error);

}  // namespace ctx::helper
