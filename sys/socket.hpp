// Unix sockets of the supervisor: the agent socket (stream, listening)
// and the sd_notify socket (datagram); poll; advisory locks.
#pragma once

#include <poll.h>

#include <string>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::sys {

/// A listening SOCK_STREAM unix socket bound at dirfd/name (any stale
/// socket file there is removed first; anything else there is an error).
Result<UniqueFd> listen_unix_at(int dirfd, const std::string& name, const std::string& display_path);

/// A SOCK_DGRAM unix socket bound at path, for NOTIFY_SOCKET messages.
Result<UniqueFd> bind_datagram(const std::string& path);

/// Receives one datagram (non-blocking); empty if none is waiting.
Result<std::string> recv_datagram(int fd);

/// Sends one datagram to a unix socket path ("@name" for abstract).
Result<void> send_datagram(const std::string& path, const std::string& msg);

/// unlinkat(2), ENOENT ignored.
Result<void> remove_at(int dirfd, const std::string& name, bool dir = false);

/// poll(2) with EINTR retried; returns the number of ready fds.
Result<int> poll_fds(std::vector<struct pollfd>& fds, int timeout_ms);

/// flock(LOCK_EX|LOCK_NB): false if another process holds the lock.
Result<bool> try_lock(int fd);

}  // namespace ctx::sys
