// The sandbox's mounts: the steps of its plan (launcher/plan/plan.hpp)
// applied in order, in its own mount namespace, before pivot_root.
#pragma once

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

}  // namespace ctx::launcher
