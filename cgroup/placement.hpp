// The agent's cgroup v2 subtree (DESIGN.md section 3):
//
//   <base>/agent-<name>/            the agent's subtree, limits, no processes
//   <base>/agent-<name>/runtime/    the sandbox (clone3 CLONE_INTO_CGROUP)
//
// <base> is the cgroup the launcher was delegated: --cgroup-base, else its
// own cgroup when writable (systemd Delegate=yes), else for root outside
// systemd <cgroup2>/cortexfs/user-<owner>.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "cgroup/discover.hpp"
#include "cgroup/limits.hpp"

namespace ctx::cgroup {

/// What decides the base.
struct BaseInputs {
  std::optional<Cgroup2Mount> mount;  ///< nullopt: no cgroup2 mounted
  std::string own_path;               ///< from /proc/self/cgroup
  bool own_writable = false;          ///< may create cgroups and move processes there
  bool privileged = false;
  std::uint32_t owner = 0;
  std::string explicit_base;  ///< --cgroup-base, "" if not given
  bool systemd = false;       ///< systemd is PID 1 (/run/systemd/system exists)
};

/// The chosen base directory, or why there is none. Pure.
struct BaseChoice {
  std::string dir;      ///< "" when none
  bool create = false;  ///< the directory may be missing and is to be made
  std::string why_not;
};
BaseChoice choose_base(const BaseInputs& in);

/// The agent's cgroup name: "agent-<name>" for the default CTX root
/// /ctx, "agent-<name>-<8 hex digits of the root's path>" for another, so
/// that agents of the same name in two CTX roots never share (and reap)
/// one cgroup.
std::string agent_cgroup_name(const std::string& agent, const std::string& ctx_root);

/// Options of a placement.
struct PlacementOptions {
  std::string agent;
  std::string ctx_root;
  std::uint32_t owner = 0;
  bool privileged = false;
  std::string explicit_base;
  std::optional<Limits> limits;
  /// The subtree's directory name under the base; "" means
  /// agent_cgroup_name(). An owned child uses its plain name below its
  /// parent's <agent>/child/ (DESIGN.md section 3).
  std::string leaf;
};

/// A live placement; remove() (or the destructor) kills what is left in
/// the subtree and removes it.
class Placement {
 public:
  Placement() = default;
  Placement(Placement&&) = default;
  Placement& operator=(Placement&&) = default;
  ~Placement();

  /// Finds the base, kills and removes what a dead instance left in
  /// agent-<name>, creates the subtree and applies limits. nullopt (with
  /// `why_not`) when no writable cgroup v2 exists; an Error when one exists
  /// but the placement or a requested limit fails.
  static Result<std::optional<Placement>> create(const PlacementOptions& o, std::string& why_not,
                                                 bool& reaped_leftovers);

  /// What another process (the supervisor's watchdog) needs to kill and
  /// remove the subtree: the descriptors of the base and of agent-<name>
  /// (in that order), and the name and path (one line each).
  std::pair<std::string, std::vector<int>> handover() const;
  /// The placement a handover describes; only remove(), kill_subtree()
  /// and wait_children_gone() work on it.
  static Result<Placement> adopt(std::string_view bytes, std::vector<UniqueFd> fds);

  /// The directory fd for CLONE_INTO_CGROUP.
  int runtime_fd() const { return runtime_.get(); }
  /// <agent>/view: the agent view's server, under the agent's limits but
  /// apart from runtime/ (which is killed at the end of a grace period).
  int view_fd() const { return view_.get(); }
  /// Host path of agent-<name>.
  const std::string& agent_dir() const { return agent_path_; }

  /// SIGKILLs everything left in the subtree (cgroup.kill), waits until it
  /// is empty and removes it.
  Result<void> remove();

  /// SIGKILLs everything in runtime/ (cgroup.kill) without waiting.
  Result<void> kill_runtime();

  /// SIGKILLs everything in the whole subtree, owned children's runtimes
  /// included (cgroup.kill of agent-<name>), without waiting.
  Result<void> kill_subtree();

  /// Waits up to timeout_ms until <agent>/child/ holds no cgroup (owned
  /// children remove their own subtrees); true if it is empty or absent.
  bool wait_children_gone(int timeout_ms);

  /// Every descriptor the placement holds (for a process that forks and
  /// closes the rest).
  std::vector<int> fds() const { return {base_.get(), agent_.get(), runtime_.get(), view_.get()}; }

 private:
  UniqueFd base_;
  UniqueFd agent_;
  UniqueFd runtime_;
  UniqueFd view_;
  std::string agent_name_;
  std::string agent_path_;
};

}  // namespace ctx::cgroup
