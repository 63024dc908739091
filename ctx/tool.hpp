// `ctx tool NAME [JSON]`: a tool call from inside an agent's sandbox. The
// agent's supervisor decides it (launcher/control/tool_gate.hpp): the planned
// CTX_PATH strictly left to right, a mount that is not noexec, the execute
// bit for the agent's ids, the agent's policy and the tool's own policy
// (docs/abi.md "Tools as files"), and records it. An
// allowed tool arrives as a descriptor and is run with execveat: nothing in
// the sandbox's environment (CTX_PATH, CTX_ROOT, CTX_AGENT) decides.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ctx::helper {

/// Runs the call; returns the exit status: the tool's own, 13 (EACCES) for
/// a denial, 2 (ENOENT) for an unknown tool, 22 (EINVAL) for an invalid
/// name. Denials and errors print one JSON line and one sentence on
/// stderr. `tier`, when given, is the directory the tool was called in (a
/// direct call of the static view's tool) instead of a CTX_PATH lookup.
int call_tool(const std::string& name, const std::vector<std::string>& args, const std::string& tier = "");

/// A direct call (`/ctx/tool/fs.read '{...}'`) that reached this helper,
/// which the static agent view shows at an allowed tool's name
/// (docs/view.md): (tier directory, tool name) when `run_as` (the path the
/// program was executed by) is a path whose last name is a tool name other
/// than `ctx`, else nullopt.
std::optional<std::pair<std::string, std::string>> direct_call(const char* run_as);

}  // namespace ctx::helper
