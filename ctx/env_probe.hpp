// `ctx check --env`: what this machine lets the calling user do, each
// failure with its exact remedy.
#pragma once

#include <vector>

#include "ctx/check.hpp"

namespace ctx::helper {

/// Findings for every kernel facility of docs/launcher.md's minimum-kernel
/// table (ctx/kernel_probe.hpp: user namespaces with Ubuntu's AppArmor
/// restriction and max_user_namespaces, the mount API, ..., Landlock,
/// /dev/fuse), then the container around the caller if any and the two
/// steps of every launch that engines refuse by default (a fresh /proc, a
/// hostname: ctx/container_probe.hpp), then cgroup v2 and its delegation,
/// newuidmap and /etc/subuid. An unprivileged caller without user
/// namespaces, and a refused /proc or hostname, are errors (nothing can
/// launch); the rest are warnings.
std::vector<Finding> probe_environment();

}  // namespace ctx::helper
