// `ctx init` and `ctx new` (issue 13): a first CTX tree and a first agent
// that launches at once, for the calling user.
#pragma once

#include <cstdint>
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
///
/// With `owner` (root only, or the caller itself) the agent is a user
/// agent of that user (docs/abi.md "User agents"): home/<uid>/agent/
/// <name>.d with the runtime as its `entry`, owner, gid and groups the
/// user's; home/<uid> and home/<uid>/agent made the user's when missing
/// (refused, EPERM, when they are someone else's: the owner's own launch
/// binds the agent's socket there), and the agent's .d and home written
/// with the user's file-system ids, so both the owner and root (`--user
/// <uid>`) launch it (docs/install.md). Each `mounts` entry adds its table
/// line and its mount rules (read, and write for rw); each of `tools` and
/// `models` an execute or use rule. Every option is checked before
/// anything is written: a refused one changes nothing.
struct NewOptions {
  std::optional<Template> tmpl;
  std::string project;     ///< host directory for /work; empty: the agent home's work/
  std::string agents_dir;  ///< $CTX_AGENTS_DIR
  std::string path;        ///< $PATH
  std::string owner;                ///< --owner: a user name or uid; empty: the caller
  std::vector<std::string> mounts;  ///< --mount SRC:DST[:ro|rw], each
  std::vector<std::string> tools;   ///< --tool NAME, each
  std::vector<std::string> models;  ///< --model NAME, each
};
int run_new(const std::string& ctx_root, const std::string& name, const NewOptions& opt = {});

/// The uid of the user agent's owner that `--owner spec` names (a user
/// name or uid), as run_new resolves it; nullopt when it names none.
std::optional<std::uint32_t> owner_uid(const std::string& spec);

}  // namespace ctx::helper
