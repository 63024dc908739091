// `ctx view NAME [--json]`: the agent view as a tree, from the same rules
// the view's server and the static fallback use (access/rules.hpp), so a
// user sees what an agent will see before launching it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "access/rules.hpp"

namespace ctx::helper {

/// The view below the CTX root as a JSON tree: {"name", "type" ("dir" or
/// "file"), "mode", "entries" (a directory's, when listed), "shows" (an
/// alias: the path it is served from), "whole" (a directory shown with
/// everything the host has, not listed)}.
nlohmann::json view_tree(const access::Viewer& v, const access::HostTree& t);

/// The tree as indented lines ("tool/", "  fs.read  x", ...).
std::vector<std::string> format_view(const nlohmann::json& tree);

}  // namespace ctx::helper
