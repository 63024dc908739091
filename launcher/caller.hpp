// Who is launching: credentials and what the machine delegates to them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "base/result.hpp"
#include "launcher/plan.hpp"
#include "launcher/tool_view.hpp"

namespace ctx::launcher {

/// Collects the caller's credentials, the owner's groups and primary gid,
/// whether newuidmap/newgidmap exist, and the subordinate id ranges.
Result<Caller> probe_caller(const agentdir::AgentSpec& spec);

/// Names of the shared spaces under <ctx>/shared (empty if none).
std::vector<std::string> list_shared_spaces(const std::string& ctx_root);

/// Whether the caller can open /dev/fuse for the agent view (a root
/// launch always can where the device exists), or why not.
Result<void> fuse_usable();

/// Whether the agent's table shows any of the CTX tree (a bind at, above
/// or below the CTX root): what the agent view governs.
bool shows_ctx_tree(const agentdir::AgentSpec& spec);

/// Lists the host tool directories behind an agent's CTX_PATH
/// (tool_view.hpp), never following a symlink; a directory that cannot be
/// read is left out (the agent cannot read it either).
std::vector<ToolDirListing> list_tool_dirs(const std::vector<std::string>& host_dirs);

/// PlanOptions::tool_views for a launch: lists the tool tiers the plan's
/// binds show and adds their views; direct calls run through the root's
/// `bin/ctx` helper when it has one.
void add_tool_views(const agentdir::AgentSpec& spec, LaunchPlan& plan);

}  // namespace ctx::launcher
