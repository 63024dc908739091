// `ctx init` and `ctx new` (issue 13): a first CTX tree and a first agent
// that launches at once, for the calling user.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ctx/templates.hpp"

namespace ctx::helper {

/// Creates what is missing of a CTX tree at ctx_root for the caller: agent/,
/// tool/, model/, shared/, bin/ctx (this helper), and the caller's home tier
/// home/<uid>/{agent,tool,model}, and for each name in `shared` the space
/// shared/<name>/{agent, data, queue/{inbox, pending, lease, claimed, done,
/// failed, result}} (docs/abi.md "The root"). Never changes what exists. Prints
/// what it made; 0, or 1 with the error.
int run_init(const std::string& ctx_root, const std::vector<std::string>& shared = {});

/// Writes agent `name` for the caller: its runtime (a script to replace),
/// its control files (owner, gid, label NAME_t, iso userns, root, cwd,
/// path, mount, policy), its home with a root holding the merged-/usr
/// links. The mounts: /usr and the /etc directories common tools read
/// (read-only), the CTX root at /ctx (read-only), its own home
/// (read-write). Refuses a name that exists; writes <name>.d whole or not
/// at all. Then prints `ctx check`'s findings. 0, or 1 with the error.
///
/// With a template (ctx/templates.hpp) the agent runs that CLI, found
/// before anything is made: its install read-only, /tmp and the project
/// (`project`, else the home's work/) read-write at /tmp and /work, cwd
/// /work, the template's env and model, no network; the template's files
/// in the home, and its model entry in the system tier when missing.
struct NewOptions {
  std::optional<Template> tmpl;
  std::string project;     ///< host directory for /work; empty: the agent home's work/
  std::string agents_dir;  ///< $CTX_AGENTS_DIR
  std::string path;        ///< $PATH
};
int run_new(const std::string& ctx_root, const std::string& name, const NewOptions& opt = {});

}  // namespace ctx::helper
