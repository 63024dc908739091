// Who is launching: credentials and what the machine delegates to them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "base/result.hpp"
#include "launcher/plan/plan.hpp"

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


}  // namespace ctx::launcher
