// `ctx check --env`: what this machine lets the calling user do, each
// failure with its exact remedy.
#pragma once

#include <vector>

#include "ctx/check.hpp"

namespace ctx::helper {

/// Findings for user namespaces (and Ubuntu's AppArmor restriction),
/// max_user_namespaces, cgroup v2 and its delegation, /dev/fuse, Landlock,
/// newuidmap and /etc/subuid. An unprivileged caller without user
/// namespaces is an error (nothing can launch); the rest are warnings.
std::vector<Finding> probe_environment();

}  // namespace ctx::helper
