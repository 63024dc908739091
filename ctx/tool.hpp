// `ctx tool NAME [JSON]`: a tool call from inside an agent's sandbox.
// Lookup strictly by CTX_PATH; execution only if the execute bit for the
// agent's ids, a mount that is not noexec, the agent's policy and the
// tool's own policy all allow it (seed 000, "Tool as File").
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ctx::helper {

/// Who calls, from the environment the launcher built.
struct ToolCaller {
  std::string ctx_root = "/ctx";
  std::string home;                   ///< CTX_HOME
  std::vector<std::string> ctx_path;  ///< CTX_PATH, in order
  std::string agent;                  ///< CTX_AGENT
  std::string session = "default";    ///< CTX_SESSION
};

/// Reads CTX_ROOT, CTX_HOME, CTX_PATH, CTX_AGENT and CTX_SESSION.
ToolCaller caller_from_env();

/// Runs the call; returns the exit status: the tool's own, 13 (EACCES) for
/// a denial, 2 (ENOENT) for an unknown tool, 22 (EINVAL) for an invalid
/// name or caller. Denials and errors print one JSON line and one sentence
/// on stderr; every call appends a tool.call event (no payload).
/// `tier`, when given, is the directory the tool was called in (a direct
/// call) instead of a CTX_PATH lookup. In a projected tier the tool itself
/// is run from its .ctx-real/ directory.
int call_tool(const ToolCaller& c, const std::string& name, const std::vector<std::string>& args,
              const std::string& tier = "");

/// A direct call (`/ctx/tool/fs.read '{...}'`) reaching this helper
/// through a projected tier: (tier directory, tool name) when argv[0] is a
/// path whose directory has the tool in .ctx-real/, else nullopt.
std::optional<std::pair<std::string, std::string>> direct_call(const char* argv0);

}  // namespace ctx::helper
