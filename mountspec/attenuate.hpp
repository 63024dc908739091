// Mount attenuation (docs/abi.md "Attenuation (children)"): a child's
// mounts derived from what its parent sees. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "mountspec/table.hpp"

namespace ctx::mountspec {

/// One mount a child asks for, with its source as the *parent* sees it
/// (a path inside the parent's sandbox), e.g. ["/work", "/work", "ro"].
/// An unset kind is inherited from the parent mount; the parent's flags
/// are kept and attrs may add more.
struct ChildMount {
  std::string source;
  std::string target;
  Attrs attrs{.rdonly = true};  ///< the mode (ro: rdonly) and the flags asked
  std::optional<Kind> kind;
};

/// Derives the child's table in host paths from the parent's table, or
/// fails with EACCES naming the offending request ("mount[2] /etc ->
/// /etc: ...") and a machine-readable Error::reason:
///   mount_not_visible   the source is not at or under any parent target
///   mount_widens_access rw where the parent has ro, rbind where the parent
///                       has bind, bind where the parent has rbind (a bind
///                       would uncover what the host's submounts below the
///                       source cover), or a nosuid/nodev/noexec dropped
/// Invalid requests (paths, duplicate targets) are EINVAL.
/// Rules: the deepest parent mount covering the source supplies the host
/// source and the kind (an unset kind inherits it; only the same kind may
/// be asked); parent mounts lying strictly below a requested source are
/// carried into the child at the matching place (never weaker than the
/// parent, ro if the request is ro) so nothing hidden by them becomes
/// visible; the result never widens the parent.
Result<Table> attenuate(const Table& parent, const std::vector<ChildMount>& request);

/// The parent mount through which the parent sees its own path `inner`:
/// the deepest target at or above it, or nullptr.
const Entry* covering(const Table& parent, std::string_view inner);

/// Why a child mount `child` (host paths) of a host path at or under
/// `p.source` would be wider than the parent mount `p`, as the sentence
/// the refusals use ("rw requested but the parent sees /ctx read-only"):
/// rw where p is ro, rbind where p is bind, bind where p is rbind, or one
/// of p's nosuid/nodev/noexec missing. nullopt when it is within p.
std::optional<std::string> widening(const Entry& p, const Entry& child);

/// Checks an entry of a child's table in host paths (as written by
/// attenuate, possibly changed since) against the parent's table: some
/// parent mount p must have a source at or above child.source, be the
/// mount through which the parent sees that path (covering), and not be
/// widened by it. EACCES with reason mount_not_visible (no such p) or
/// mount_widens_access (the sentence of widening() for the candidate with
/// the deepest source); the message is that sentence alone, for the caller
/// to place.
Result<void> check_derived(const Table& parent, const Entry& child);

}  // namespace ctx::mountspec
