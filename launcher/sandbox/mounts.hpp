// The sandbox's mounts: the steps of its plan (launcher/plan/plan.hpp)
// applied in order, in its own mount namespace, before pivot_root.
#pragma once

#include <functional>
#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/plan/plan.hpp"
#include "launcher/sandbox/reporter.hpp"

namespace ctx::launcher {

/// Makes every mount of plan.mounts, in order, below the new root, and
/// returns the root's attached tree. Hands the supervisor, over `rep`, the
/// sockets of /run/ctx, the agent view's /dev/fuse descriptor (`fuse`,
/// opened before the owner's ids were taken; invalid for a static view
/// or none) and the tools' tree. Each error names the step it belongs to
/// (the mount table's line, the root, the view).
Result<UniqueFd> apply_mounts(const LaunchPlan& plan, Reporter& rep, UniqueFd fuse);

/// Whether a bind brings what is mounted below its source.
enum class Rbind {
  no,
  yes,
  /// Not, unless the kernel requires it: mounts a user namespace locks to
  /// their parent cannot be uncovered, so those come along.
  where_locked,
};

/// The one bind of the sandbox: `path` beneath `dirfd` ("" for dirfd
/// itself) cloned, given `attrs` while still detached (so there is no
/// moment in which the sandbox could see it otherwise), and attached on
/// the mount point `point` returns, asked for only once the clone is made
/// (so a source that cannot be bound adds no mount point). A non-recursive
/// bind of a source with locked mounts below it fails with EINVAL saying
/// so, naming it `source`; an attach onto a point renamed over meanwhile
/// fails with ENOENT.
Result<void> bind_tree(const std::string& source, int dirfd, const std::string& path, const mountspec::Attrs& attrs,
                       Rbind r, const std::function<Result<UniqueFd>()>& point);

}  // namespace ctx::launcher
