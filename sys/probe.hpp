// Probes of what the kernel and the machine allow this user, for the
// doctor. Each runs its risky part in a forked child.
#pragma once

#include <string>

#include "base/result.hpp"

namespace ctx::sys {

/// Creates a user and mount namespace in a forked child, maps the caller's
/// ids and mounts a tmpfs there: Ok, or the failing step with its errno
/// (EPERM at unshare: disabled; ENOSPC: max_user_namespaces; EACCES/EPERM
/// at the mount: Ubuntu's AppArmor restriction). Error::reason names the
/// step: "unshare", "id_map" or "mount".
Result<void> probe_user_namespace();

/// The Landlock ABI version (landlock_create_ruleset with the version
/// flag), or the errno (EOPNOTSUPP: not enabled at boot).
Result<int> landlock_abi();

/// open(2) of a device for reading and writing, closed at once.
Result<void> probe_open_rw(const std::string& path);

}  // namespace ctx::sys
