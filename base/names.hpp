// Validity of the short names the ABI uses: agents, tools, models, shared
// spaces, sessions, label types. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ctx {

/// Agent names: 1..64 bytes of [A-Za-z0-9_-], first one alphanumeric
/// ("coder", "rev-123"). Dots are excluded so that "<name>.d" and
/// "<name>.sock" can never be confused with another agent.
std::optional<std::string> agent_name_issue(std::string_view n);

/// Tool names: 1..128 bytes of [A-Za-z0-9_.-], first alphanumeric, no
/// "..", not ending in ".d" or "." ("fs.read", "mcp.github.search_issues").
std::optional<std::string> tool_name_issue(std::string_view n);

/// Model names: one or more '/'-separated segments, each 1..64 bytes of
/// [A-Za-z0-9_.-] beginning alphanumeric, not ending in ".d"
/// ("debug/echo", "openai/gpt-4o"); at most 255 bytes.
std::optional<std::string> model_name_issue(std::string_view n);

/// Shared space and session names: like agent names, dots allowed inside
/// ("project-a", "design-review", "v1.2").
std::optional<std::string> space_name_issue(std::string_view n);

/// Label types and policy subject types: 1..64 bytes of [A-Za-z0-9_],
/// first a letter ("coder_t").
std::optional<std::string> type_name_issue(std::string_view n);

/// A name for one agent of one CTX root among all roots on the machine:
/// the agent's name for the default root /ctx, else "<name>-<8 hex digits
/// of the root's path>". Used where agents of two roots would otherwise
/// meet: runtime directories and cgroups.
std::string instance_name(std::string_view agent, std::string_view ctx_root);

/// Where an agent's sessions live, relative to <ctx>/home (docs/abi.md
/// "Agent homes"): "<owner>/agent/<agent>/session".
std::string sessions_rel(std::uint32_t owner, std::string_view agent);

/// One session's directory relative to <ctx>/home:
/// "<owner>/agent/<agent>/session/<session>".
std::string session_rel(std::uint32_t owner, std::string_view agent, std::string_view session);

/// A session name (--session): a space name (space_name_issue) other than
/// "index", which is the session/index/ directory of the by-cwd index.
std::optional<std::string> session_name_issue(std::string_view n);

/// The entry name of a cwd in session/index/by-cwd/ (docs/abi.md,
/// "Sessions"): the absolute path with '%' written "%25" and '/' written
/// "%2F", so "/work/a" is "%2Fwork%2Fa". nullopt when the name would be
/// longer than 255 bytes (NAME_MAX) or the path is not absolute: that cwd
/// gets no entry.
std::optional<std::string> cwd_index_name(std::string_view cwd);

}  // namespace ctx
