// The agent's view of its tool tiers (seed 000, "Agent View" and "Tool as
// File"): inside the sandbox every CTX_PATH directory is replaced by an
// in-memory projection (a read-only tmpfs) that holds only what the agent
// may use. A tool the agent's policy or the tool's own policy does not
// allow is not there, so the direct forms (`/ctx/tool/fs.read '{...}'`)
// are gated as `ctx tool` is; the execute bit and noexec stay the
// kernel's. Nothing durable is created. Pure: the launcher lists the host
// directories, this decides.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "launcher/plan.hpp"

namespace ctx::launcher {

/// One entry of a host tool directory, as the launcher found it.
struct ToolDirEntry {
  enum class Kind { executable, file, directory, other };
  std::string name;
  Kind kind = Kind::other;  ///< executable: a regular file with an execute bit
  /// For an executable: the text of <name>.d/policy when it exists.
  std::optional<std::string> own_policy;
};

/// A host directory that backs a CTX_PATH entry, with its entries.
struct ToolDirListing {
  std::string host_dir;
  std::vector<ToolDirEntry> entries;
};

/// The host directories behind the plan's CTX_PATH entries, through the
/// deepest bind whose target holds each (entries no bind shows are left
/// out). For the launcher to list.
std::vector<std::string> ctx_path_host_dirs(const LaunchPlan& plan);

/// Fills plan.tool_views: one view for every place inside the sandbox
/// where a listed directory appears (through any bind not shadowed by a
/// deeper bind or a mask). A view shows directories (the `.d/` of every
/// tool, so its schema and policy stay readable), plain files, and the
/// executables that `allow <type> tool:<name> execute` and the tool's own
/// policy (when it has one) both allow. Symbolic links are never shown.
/// With `helper` (host path of the ctx helper), the allowed tools are
/// wrapped: a direct call runs the helper, which records the tool.call
/// event like `ctx tool` and then execs the tool.
void plan_tool_views(const agentdir::AgentSpec& spec, const std::vector<ToolDirListing>& listings, LaunchPlan& plan,
                     const std::string& helper = "");

}  // namespace ctx::launcher
