// `ctx explain`: why an agent may or may not do something, layer by layer.
#pragma once

#include <string>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "policy/policy.hpp"

namespace ctx::helper {

/// One layer's verdict.
struct Layer {
  std::string name;  ///< "agent policy", "lookup", "mount", "mode bits", "tool policy"
  bool allows = false;
  std::string text;
};

/// The layers that decide a request, in the order a call checks them: for
/// `tool:X execute` the CTX_PATH lookup, the mount, the mode bits for the
/// agent's host ids, the agent's policy and the tool's own policy (seen
/// from the host, with the agent's mount table); for everything else the
/// agent's policy alone. The tool's policy must admit spec.ancestor_types
/// too (an owned child's ancestors; the caller fills them).
std::vector<Layer> explain_layers(const agentdir::AgentSpec& spec, const policy::Request& req);

}  // namespace ctx::helper
