// Unix sockets of the supervisor: the agent socket (stream, listening)
// and the sd_notify socket (datagram); poll; advisory locks.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::sys {

/// A listening SOCK_STREAM unix socket bound at dirfd/name (any stale
/// socket file there is removed first; anything else there is an error).
Result<UniqueFd> listen_unix_at(int dirfd, const std::string& name, const std::string& display_path);

/// A non-blocking SOCK_DGRAM unix socket bound at dirfd/name with
/// SO_PASSCRED, so each datagram carries its sender's pid (the sandbox's
/// NOTIFY_SOCKET).
Result<UniqueFd> bind_datagram_at(int dirfd, const std::string& name, const std::string& display_path);

/// A SOCK_SEQPACKET socketpair, close-on-exec: one record per message,
/// descriptors passed with SCM_RIGHTS, EOF once every peer copy is closed.
Result<std::pair<UniqueFd, UniqueFd>> make_seqpacket_pair();

/// Sends one message with the descriptors fds (SCM_RIGHTS).
Result<void> send_message(int sock, std::string_view bytes, const std::vector<int>& fds);

/// One received message and the descriptors that came with it (owned,
/// close-on-exec).
struct Message {
  std::string bytes;
  std::vector<UniqueFd> fds;
};

/// Receives one message (blocking): nullopt at EOF. A message longer than
/// max_bytes or with more than max_fds descriptors is EMSGSIZE, and the
/// descriptors that came with it are closed.
Result<std::optional<Message>> recv_message(int sock, std::size_t max_bytes, std::size_t max_fds);

/// One message's bytes if one is waiting (MSG_DONTWAIT; no descriptors):
/// nullopt when none is, or at EOF.
Result<std::optional<std::string>> recv_message_nowait(int sock, std::size_t max_bytes);

/// The pid of a connected unix socket's peer as it was at connect(2)
/// (SO_PEERCRED), in the caller's pid namespace; 0 when the peer's pid is
/// not visible from it.
Result<pid_t> peer_pid(int conn);

/// One datagram with its sender's pid (SCM_CREDENTIALS; needs
/// SO_PASSCRED on the socket; 0 when none came).
struct Datagram {
  std::string bytes;
  pid_t pid = 0;
  bool truncated = false;  ///< longer than 4096 bytes: the rest was lost
};

/// Receives one datagram without blocking; nullopt when none is waiting.
Result<std::optional<Datagram>> recv_datagram_from(int fd);

/// A SOCK_DGRAM unix socket bound at path, for NOTIFY_SOCKET messages.
Result<UniqueFd> bind_datagram(const std::string& path);

/// Receives one datagram (non-blocking); empty if none is waiting.
Result<std::string> recv_datagram(int fd);

/// Sends one datagram to a unix socket path ("@name" for abstract).
Result<void> send_datagram(const std::string& path, const std::string& msg);

/// A connected SOCK_STREAM unix socket to path (a supervisor's control
/// socket).
Result<UniqueFd> connect_stream(const std::string& path);

/// A TCP socket listening on 127.0.0.1:port (0: a port the kernel picks),
/// close-on-exec, and the port it listens on.
Result<std::pair<UniqueFd, std::uint16_t>> listen_tcp_loopback(std::uint16_t port);

/// accept4(2) on a listening socket, non-blocking and close-on-exec; the
/// new connection is non-blocking too. nullopt when none is waiting.
Result<std::optional<UniqueFd>> accept_nonblock(int listen_fd);

/// Reads what a non-blocking fd has (at most max bytes): the bytes,
/// "" at EOF, nullopt when nothing is waiting (EAGAIN).
Result<std::optional<std::string>> read_available(int fd, std::size_t max);

/// write(2) once: how many bytes went (0 when a non-blocking fd would
/// block); EINTR retried.
Result<std::size_t> write_some(int fd, std::string_view data);

/// Makes fd non-blocking (fcntl O_NONBLOCK).
Result<void> set_nonblocking(int fd);

/// unlinkat(2), ENOENT ignored.
Result<void> remove_at(int dirfd, const std::string& name, bool dir = false);

/// flock(LOCK_EX|LOCK_NB): false if another process holds the lock.
Result<bool> try_lock(int fd);

}  // namespace ctx::sys
