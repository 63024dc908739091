// The doctor's pure checks: risk tiers (close matches are base/similar.hpp).
#pragma once

#include <string>
#include <vector>

#include "agentdir/agent_spec.hpp"

namespace ctx::helper {

enum class Risk { high, medium, low };

/// One grant of an agent with its risk tier.
struct Grant {
  Risk risk = Risk::low;
  std::string what;   ///< "tool:shell.exec execute", "rw mount /srv -> /work"
  std::string where;  ///< "coder.d/policy:3"
};

/// Every grant of the agent (its own policy rules and its mounts), highest
/// risk first, in file order within a tier. High: shell.exec, the network,
/// creating agents, rw mounts of the ctx root, a home directory or /etc,
/// any mount of a container engine socket, any mount of /proc or /sys (or
/// below) and an rbind of / (pseudo file systems, refused by a root
/// launch). Medium: fs.write, writing a
/// shared space, other rw mounts. Low: the rest (reads, model use, other
/// tools). A mount rule ranks as the riskiest table line it allows (read:
/// a line with its target; write: a rw one), low when it allows none.
std::vector<Grant> grants_by_risk(const agentdir::AgentSpec& spec);

std::string_view to_string(Risk r);

}  // namespace ctx::helper
