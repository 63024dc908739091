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

/// The name of the full helper in a CTX tree's bin/, beside the small
/// program at bin/ctx that makes tool and model calls and runs it for
/// everything else (ctx/call_main.cpp). Neither name is ever a tool's.
inline constexpr const char* kFullHelperName = "ctx-helper";

/// `ctx VERB NAME [ARG]` (tool, model) with no argument the full parser
/// would read as an option, as "--" or as a bracketed list ("[1,2]", which
/// it splits): (NAME, [ARG]), as the parser would give them, else nullopt.
/// Such a call needs no parser; every other command line takes it and
/// keeps its messages.
std::optional<std::pair<std::string, std::vector<std::string>>> plain_call(int argc, char** argv, const char* verb);

/// A direct call (`/ctx/tool/fs.read '{...}'`) that reached this helper,
/// which the static agent view shows at an allowed tool's name
/// (docs/view.md): (tier directory, tool name) when `run_as` (the path the
/// program was executed by) is a path whose last name is a tool name other
/// than `ctx` and kFullHelperName, else nullopt.
std::optional<std::pair<std::string, std::string>> direct_call(const char* run_as);

}  // namespace ctx::helper
