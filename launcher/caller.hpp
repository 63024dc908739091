// Who is launching: credentials and what the machine delegates to them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "launcher/tool_view.hpp"
#include "base/result.hpp"
#include "launcher/plan.hpp"

namespace ctx::launcher {

/// Parses /etc/subuid or /etc/subgid content ("name_or_id:start:count"
/// lines) and returns the ranges delegated to uid/name. Malformed lines are
/// skipped, as newuidmap does.
std::vector<std::pair<std::uint32_t, std::uint32_t>> parse_subid(std::string_view content, std::uint32_t uid,
                                                                  std::string_view name);

/// Collects the caller's credentials, the owner's groups and primary gid,
/// whether newuidmap/newgidmap exist, and the subordinate id ranges.
Result<Caller> probe_caller(const agentdir::AgentSpec& spec);

/// Names of the shared spaces under <ctx>/shared (empty if none).
std::vector<std::string> list_shared_spaces(const std::string& ctx_root);

/// Lists the host tool directories behind an agent's CTX_PATH
/// (tool_view.hpp), never following a symlink; a directory that cannot be
/// read is left out (the agent cannot read it either).
std::vector<ToolDirListing> list_tool_dirs(const std::vector<std::string>& host_dirs);

}  // namespace ctx::launcher
