// Probes of what the kernel and the machine allow this user, for the
// doctor. Each runs its risky part in a forked child.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::sys {

/// Creates a user and mount namespace in a forked child, maps the caller's
/// ids and mounts a tmpfs there: Ok, or the failing step with its errno
/// (EPERM at unshare: disabled; ENOSPC: max_user_namespaces; EACCES/EPERM
/// at the mount: Ubuntu's AppArmor restriction). Error::reason names the
/// step: "unshare", "id_map" or "mount".
Result<void> probe_user_namespace();

/// Mounts a fresh procfs over /proc in a new pid and mount namespace of a
/// forked child (with a user namespace of its own unless the caller is
/// root), as every launch does: Ok, or the failing step with its errno
/// (EPERM at "mount proc": /proc is masked, see fs/namespace.c's
/// mnt_already_visible). Error::reason names the step: "unshare",
/// "id_map", "fork" or "mount proc".
Result<void> probe_fresh_procfs();

/// Sets a hostname in a new UTS namespace of a forked child (with a user
/// namespace of its own unless the caller is root), as every launch does:
/// Ok, or the failing step with its errno (EPERM at "sethostname": a
/// seccomp filter, such as a container engine's default profile).
/// Error::reason names the step: "unshare", "id_map" or "sethostname".
Result<void> probe_own_hostname();

/// The Landlock ABI version (landlock_create_ruleset with the version
/// flag), or the errno (EOPNOTSUPP: not enabled at boot).
Result<int> landlock_abi();

/// open(2) of a device for reading and writing, closed at once.
Result<void> probe_open_rw(const std::string& path);

/// Runs body in a forked child and returns what it returned (code and
/// message), so that nothing a probe does (namespaces, filters, mounts)
/// reaches the caller. A child killed by a signal is EIO naming it.
Result<void> in_forked_child(const std::function<Result<void>()>& body);

/// In a forked child only: a private mount namespace, entered with a user
/// namespace of its own (the caller's ids mapped to themselves) unless
/// the caller is root, with every mount made private.
Result<void> enter_private_mount_namespace();

/// pidfd_open(2) of pid.
Result<UniqueFd> open_pidfd(pid_t pid);

/// close_range(2) of the fds first..last (no flags).
Result<void> close_fd_range(unsigned first, unsigned last);

/// In a forked child only: no_new_privs and a seccomp filter that allows
/// every call (seccomp(SECCOMP_SET_MODE_FILTER)).
Result<void> load_allow_all_filter();

/// The kernel's release (uname(2)), "6.1.0-13-amd64".
Result<std::string> kernel_release();

}  // namespace ctx::sys
