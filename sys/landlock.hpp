// Landlock scoping of the agent's runtime (kernel ABI 6, Linux 6.12):
// abstract unix sockets and signals stay within the sandbox's Landlock
// domain, so an agent whose policy grants the network (and so shares the
// host's network namespace) still cannot reach the host's abstract
// sockets, and cannot signal processes outside its own domain.
#pragma once

#include "base/result.hpp"

namespace ctx::sys {

/// The first ABI that scopes abstract unix sockets and signals.
inline constexpr int kLandlockScopeAbi = 6;

/// Restricts the calling thread (and what it starts) to a Landlock domain
/// that handles no file-system or network access, only the scopes above.
/// Needs no_new_privs. Returns false, changing nothing, when the kernel's
/// ABI (landlock_abi(), sys/probe.hpp) is older than kLandlockScopeAbi.
Result<bool> landlock_scope_ipc();

}  // namespace ctx::sys
