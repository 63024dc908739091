// The two tiers an agent can be defined in (docs/abi.md "The root"):
// the system tier `<ctx>/agent/<name>.d` and a user's tier
// `<ctx>/home/<U>/agent/<name>.d` (docs/abi.md "User agents"). Which one
// a launch reads is decided here, purely, from what exists.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/result.hpp"

namespace ctx::agentdir {

/// The tier: none is the system tier, a uid U the user tier of home/<U>.
using Tier = std::optional<std::uint32_t>;

/// The directory that holds `<name>.d`, relative to the CTX root:
/// "agent" or "home/<U>/agent".
std::string agents_rel(Tier tier);

/// The name that keeps an agent's per-instance names (its cgroup) apart
/// from the other tier's agent of the same name: "<name>" for the system
/// tier, "<name>.u<U>" for a user agent. '.' is never in an agent name,
/// so no system agent can take it.
std::string tier_instance(std::string_view name, Tier tier);

/// "<name>" or "<name>@<U>" for what `ctx ps` shows.
std::string tier_display(std::string_view name, Tier tier);

/// Which tier `ctx-agent-run [--user U] NAME` reads. --user U names the
/// user tier of U. Without it: the system tier, or the caller's own user
/// tier when only that one has NAME; both is ambiguous (EEXIST, naming
/// both paths). Pure: the caller says what exists.
Result<Tier> resolve_tier(std::string_view ctx_root, std::string_view name, Tier user_flag, std::uint32_t caller_uid,
                          bool system_exists, bool user_exists);

/// resolve_tier with what exists looked up (an entry of any type counts).
Result<Tier> find_tier(const std::string& ctx_root, const std::string& name, Tier user_flag, std::uint32_t caller_uid);

}  // namespace ctx::agentdir
