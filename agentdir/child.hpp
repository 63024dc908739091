// Owned child agents (docs/abi.md "Children", "Attenuation (children)"
// and "A child's session and its handoff"): a parent's request checked
// against the parent and turned into the child's control files (pure), and the
// files written to disk in one atomic step (create.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "agentdir/load.hpp"
#include "base/result.hpp"
#include "mountspec/attenuate.hpp"
#include "sys/file.hpp"

namespace ctx::agentdir {

/// What a parent asks for (the JSON of `ctx agent create`,
/// docs/children.md, already decoded by the program that received it).
struct ChildRequest {
  std::string name;
  /// The child's label; nullopt: the parent's label (the same security
  /// subject, on purpose: docs/abi.md "Children").
  std::optional<std::string> label;
  std::vector<std::string> models;  ///< "model": use
  std::vector<std::string> tools;   ///< "tools": execute
  /// "shared": {"project-a": ["read"]} in request order.
  std::vector<std::pair<std::string, std::vector<std::string>>> shared;
  /// "agents": {"sub": ["create", "start"]}: what the child may do with
  /// its own children (grandchildren of the parent).
  std::vector<std::pair<std::string, std::vector<std::string>>> agents;
  bool network = false;                       ///< "network": true asks network:default connect
  std::vector<mountspec::ChildMount> mounts;  ///< "mount", sources as the parent sees them
  /// "groups"; nullopt: the parent's groups.
  std::optional<std::vector<std::uint32_t>> groups;
  /// "cwd"; nullopt: the parent's cwd when the child's mounts show it,
  /// else "/".
  std::optional<std::string> cwd;
  std::string handoff;  ///< "handoff": the text of handoff.md
  /// "inputs": paths as the parent sees them that the child is to work from
  /// (docs/abi.md "A child's session and its handoff": input references). Each
  /// must lie in one of the requested mounts' sources; input.jsonl names each
  /// as the child sees it.
  std::vector<std::string> inputs;
  std::string output;  ///< "output": the output contract, the text of output.md
};

/// Bounds of a request's handoff fields (bytes and entries).
inline constexpr std::size_t kMaxHandoffText = 64 * 1024;
inline constexpr std::size_t kMaxInputs = 256;

/// Where the request comes from: the parent's session and run, which the
/// child's `parent` file records ("agent:coder session:default run:r1").
struct ChildOrigin {
  std::string session;
  std::string run;
};

/// The child's control files and the spec they load as.
struct ChildPlan {
  ControlFiles files;  ///< file name -> exact content, each ending in '\n'
  AgentSpec spec;      ///< build_spec of `files` (so they are known to load)
  /// input.jsonl of the child's coordination directory: one
  /// {"path":<as the child sees it>,"parent_path":<as the parent does>}
  /// per request input, in order ("" for none).
  std::string inputs_jsonl;
};

/// Checks a request and derives the child's control files. Every denial
/// is EACCES with Error::reason set and a sentence a person can act on:
///   invalid_name           the name is not a valid agent name (base/names)
///   agent_policy           no `allow <parent_type> agent:<name> create`
///   exceeds_parent_policy  a tool, model, shared, agent or network grant
///                          the parent does not hold itself
///   mount_not_visible      a mount source the parent does not see
///   mount_widens_access    a mount wider than the parent's (rw over ro, ...)
///   groups_not_subset      a group the parent does not have
/// A malformed request (bad label, unknown permission, cwd outside the
/// child's mounts) is EINVAL with reason invalid_request.
/// The child gets: owner, uid, gid and iso of the parent; groups; label;
/// parent "agent:<p> session:<s> run:<r>"; life owned; root
/// <ctx>/home/<owner>/agent/<name>/root; cwd; the parent's path when it
/// has one; the attenuated mount table; model; the policy built from the
/// request with the child's type as subject.
Result<ChildPlan> plan_child(const AgentSpec& parent, const ChildRequest& req, const ChildOrigin& origin,
                             const PrimaryGidLookup& primary_gid);

/// Checks, before a parent's supervisor starts `child`, that it is still
/// within the parent: parent line names the parent; owner, uid, gid and
/// iso equal the parent's; life owned; groups a subset of the parent's;
/// its policy a subset of the parent's (check_subset); every mount derived
/// from a parent mount (mountspec::check_derived): its host source at or
/// under the source of a parent mount through which the parent sees that
/// path, never rw where that one is ro, rbind only where it is rbind, bind
/// never where it is rbind, nosuid/nodev/noexec never dropped (a refusal
/// names the candidate with the deepest source); its root
/// <ctx>/home/<owner>/agent/<name>/root.
/// EACCES with reason not_owned (parent line, owner, uid, gid, iso, life,
/// root), exceeds_parent_policy, groups_not_subset, mount_not_visible or
/// mount_widens_access, naming the file and what to do. A child rule for
/// another subject stays check_subset's EINVAL wrong_subject.
Result<void> check_child(const AgentSpec& parent, const AgentSpec& child);

/// The deepest parent chain followed; a longer one ends in "" (below).
inline constexpr int kMaxAncestry = 16;

/// The label types of spec's ancestors, parent first, each read with
/// `load` by name from the `parent` files. An ancestor without a label,
/// one that cannot be read, and a chain longer than kMaxAncestry give "",
/// which no policy admits: what nobody can vouch for grants nothing.
/// Empty for an agent without a parent.
std::vector<std::string> ancestor_types(const AgentSpec& spec,
                                        const std::function<Result<AgentSpec>(const std::string&)>& load);

/// Host path of a parent session's coordination directory for a child:
/// <ctx>/home/<owner>/agent/<parent>/session/<session>/context/child/<child>
std::string child_context_dir(const AgentSpec& parent, std::string_view session, std::string_view child);

/// Writes a planned child to disk, or nothing:
///   1. <ctx>/agent/<name>.d, made complete under a temporary name in the
///      same directory and renamed into place without replacing anything
///      (EACCES, reason exists, if the name is taken, also by a bare
///      <ctx>/agent/<name> entry or a <name>.sock);
///   2. the executable entry <ctx>/agent/<name>: a copy of the parent's
///      (the same runtime program, which tells agents apart by CTX_AGENT);
///   3. the child's root directory (empty) and the parent session's
///      context/child/<name>/ with agent, session, status ("created"),
///      handoff.md, result.md and refs.jsonl (empty), artifact/.
/// `owner` (a root caller: the owner's file-system ids) is what the
/// files the child and its runtime write are made with, so they lie only
/// where the owner may write and belong to the owner: the parent
/// session's context/child/<name>/ (its files and artifact/, and the
/// directories made on the way to it) and the child's home and root
/// directories. `<name>.d`, its files and the entry stay the caller's
/// (root), as the launcher's trust check asks (root or the owner, and
/// with iso uid the agent's uid is not the owner), and so that no agent,
/// with iso shared not even the runtime's uid, can rewrite its child's
/// control files. On any failure what was created is removed again.
Result<void> write_child(const AgentSpec& parent, const ChildPlan& plan, std::string_view session,
                         std::string_view handoff, std::string_view output, const sys::MakeAs& owner);

/// Deletes a stopped owned child (`ctx agent delete`, or a create with
/// "replace"): its `<name>.d` and entry under agent/, its socket, its home
/// home/<owner>/agent/<name> (its sessions and root) and the parent
/// session's context/child/<name>/. The caller has checked that `child`
/// is the parent's own (check_child) and runs in no supervisor of the
/// caller's. The .d's instance lock is taken first and held throughout:
/// a child that runs under another supervisor is EBUSY (reason
/// "running") and nothing is removed. The .d is renamed away before
/// anything is removed, so no launch can find a half-removed child; the
/// trees are removed without following a symbolic link or crossing a
/// mount (sys::remove_tree_at).
Result<void> remove_child(const AgentSpec& parent, const std::string& name, std::string_view session);

}  // namespace ctx::agentdir
