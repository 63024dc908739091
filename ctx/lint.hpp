// The doctor's pure checks: risk tiers (close matches are base/similar.hpp).
#pragma once

#include <map>
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

/// The file system a mount line's source lies on, on this machine.
struct SourceFs {
  std::string fstype;         ///< "ext4", "devtmpfs"
  bool root_refuses = false;  ///< off the allow-list, or an rbind holding one (mountspec/source_fs.hpp)
  std::string holds;          ///< for an rbind refused for a submount: "/proc on proc"
};
/// By mount line number; a line whose source cannot be resolved is absent.
using SourceTypes = std::map<int, SourceFs>;

/// Every grant of the agent (its own policy rules and its mounts), highest
/// risk first, in file order within a tier. High: shell.exec, the network,
/// creating agents, rw mounts of the ctx root, a home directory or /etc,
/// any mount of a container engine socket, any mount a root launch
/// refuses for its file system (`types`: devices, processes, kernel
/// state). Medium: fs.write, writing a shared space, other rw mounts.
/// Low: the rest (reads, model use, other tools). A mount rule ranks as
/// the riskiest table line it allows (read: a line with its target;
/// write: a rw one), low when it allows none. A mount's text names its
/// source's file system where `types` has it.
std::vector<Grant> grants_by_risk(const agentdir::AgentSpec& spec, const SourceTypes& types = {});

std::string_view to_string(Risk r);

}  // namespace ctx::helper
