// Namespaces: entering new ones (unshare), setting up the network and UTS
// namespaces the sandbox gets, and naming a process's namespaces.
#pragma once

#include <sys/types.h>

#include <string>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::sys {

/// unshare(2).
Result<void> unshare_ns(int flags);

/// setns(2): the caller joins the namespace `fd` names (of type `nstype`,
/// a CLONE_NEW* flag, checked by the kernel).
Result<void> join_ns(int fd, int nstype);

/// Opens /proc/self/ns/<ns> (O_RDONLY: a descriptor setns takes).
Result<UniqueFd> open_own_ns(const std::string& ns);

/// Brings the loopback interface of the caller's network namespace up.
Result<void> loopback_up();

/// sethostname(2) (in a new UTS namespace).
Result<void> set_hostname(const std::string& name);

/// The inode number of /proc/<pid>/ns/<ns> (the namespace's id); pid 0
/// is the caller.
Result<unsigned long> ns_inode(pid_t pid, const std::string& ns);

}  // namespace ctx::sys
