// Identity entitlement (DESIGN.md 4b): in a root launch, an agent whose
// identity files its owner wrote gets only ids the owner is entitled to.
// Setuid-free means nothing if the owner can write `uid 0`.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "base/result.hpp"

namespace ctx::agentdir {

/// A range of subordinate ids: (start, count).
using IdRange = std::pair<std::uint32_t, std::uint32_t>;

/// Parses /etc/subuid or /etc/subgid content ("name_or_id:start:count"
/// lines) and returns the ranges delegated to uid or name. Malformed
/// lines are skipped, as newuidmap does.
std::vector<IdRange> parse_subid(std::string_view content, std::uint32_t uid, std::string_view name);

/// True when id lies in one of the ranges.
bool in_ranges(std::uint32_t id, const std::vector<IdRange>& ranges);

/// What an owner may give an agent in a root launch.
struct OwnerIds {
  std::uint32_t uid = 0;
  std::optional<std::uint32_t> primary_gid;  ///< passwd; none without an entry
  std::vector<std::uint32_t> groups;         ///< getgrouplist: groups the owner is a member of
  std::vector<IdRange> subuid;               ///< the owner's /etc/subuid ranges
  std::vector<IdRange> subgid;               ///< the owner's /etc/subgid ranges
};

/// Reads the owner's entitlement from the passwd and group databases and
/// /etc/subuid, /etc/subgid. An owner without a passwd entry is entitled to
/// its uid only.
Result<OwnerIds> read_owner_ids(std::uint32_t owner);

/// The refusals of a root launch: each host id of the agent that comes from
/// an identity file not owned by root (IdentitySource) and that the owner
/// is not entitled to. Which ids are host ids depends on the iso profile:
/// uid for iso uid (iso shared requires the owner, iso userns maps the
/// owner); gid for iso uid and shared (iso userns maps the owner's primary
/// gid); every group for all three (iso userns keeps them on the host side
/// of its namespace). Each is EPERM naming the file, the id and the rule:
///   coder.d/uid: EPERM: uid 0 is not the owner's (1000) nor in its
///   /etc/subuid ranges, and coder.d/uid is not owned by root: ...
std::vector<Error> entitlement_errors(const AgentSpec& spec, const OwnerIds& owner);

}  // namespace ctx::agentdir
