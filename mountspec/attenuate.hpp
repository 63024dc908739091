// Mount attenuation (seed 000 "Agent Creation", seed 003 "Permission
// Attenuation"): a child's mounts derived from what its parent sees. Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "mountspec/table.hpp"

namespace ctx::mountspec {

/// One mount a child asks for, with its source as the *parent* sees it
/// (a path inside the parent's sandbox), e.g. ["/work", "/work", "ro"].
/// Unset kind and flags are inherited from the parent mount.
struct ChildMount {
  std::string source;
  std::string target;
  Mode mode = Mode::ro;
  std::optional<Kind> kind;
  bool nosuid = false;
  bool nodev = false;
  bool noexec = false;
};

/// Derives the child's table in host paths from the parent's table, or
/// fails with EACCES naming the offending request ("mount[2] /etc ->
/// /etc: ...") and a machine-readable Error::reason:
///   mount_not_visible   the source is not at or under any parent target
///   mount_widens_access rw where the parent has ro, rbind where the parent
///                       has bind, or a nosuid/nodev/noexec dropped
/// Invalid requests (paths, duplicate targets) are EINVAL.
/// Rules: the deepest parent mount covering the source supplies the host
/// source; parent mounts lying strictly below a requested source are
/// carried into the child at the matching place (never weaker than the
/// parent, ro if the request is ro) so nothing hidden by them becomes
/// visible; the result never widens the parent.
Result<Table> attenuate(const Table& parent, const std::vector<ChildMount>& request);

}  // namespace ctx::mountspec
