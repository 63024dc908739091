// Unix sockets of the supervisor: the agent socket (stream, listening)
// and the sd_notify socket (datagram); poll; advisory locks.
#pragma once

#include <poll.h>

#include <cstddef>
#include <optional>
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

/// A connected SOCK_STREAM unix socket to path (a supervisor's control
/// socket).
Result<UniqueFd> connect_stream(const std::string& path);

/// accept4(2) on a listening socket, non-blocking and close-on-exec; the
/// new connection is non-blocking too. nullopt when none is waiting.
Result<std::optional<UniqueFd>> accept_nonblock(int listen_fd);

/// Reads what a non-blocking fd has (at most max bytes): the bytes,
/// "" at EOF, nullopt when nothing is waiting (EAGAIN).
Result<std::optional<std::string>> read_available(int fd, std::size_t max);

/// Makes fd non-blocking (fcntl O_NONBLOCK).
Result<void> set_nonblocking(int fd);

/// unlinkat(2), ENOENT ignored.
Result<void> remove_at(int dirfd, const std::string& name, bool dir = false);

/// poll(2) with EINTR retried; returns the number of ready fds.
Result<int> poll_fds(std::vector<struct pollfd>& fds, int timeout_ms);

/// flock(LOCK_EX|LOCK_NB): false if another process holds the lock.
Result<bool> try_lock(int fd);

}  // namespace ctx::sys
