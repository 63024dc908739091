#include "sys/socket.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "sys/error.hpp"

namespace ctx::sys {

namespace {

Result<sockaddr_un> make_addr(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) return fail(Error{ENAMETOOLONG, "socket path too long: " + path});
  std::memcpy(a.sun_path, path.data(), path.size());
  if (!path.empty() && path[0] == '@') a.sun_path[0] = '\0';
  return a;
}

// Binds fd at dirfd/name (a stale socket file there is removed first).
Result<void> bind_at(int fd, int dirfd, const std::string& name, const std::string& display_path) {
  struct stat st {};
  if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return fail(Error{EEXIST, display_path + ": EEXIST: exists and is not a socket; remove it"});
    if (::unlinkat(dirfd, name.c_str(), 0) < 0) return CTX_FAIL_ERRNO("unlinkat " + display_path);
  }
  // bind(2) takes a path: /proc/self/fd/<dirfd>/<name> reaches the name
  // in exactly the directory dirfd is, however it was renamed or linked
  // meanwhile. Where that does not fit sun_path, or there is no /proc,
  // bind relative to the directory by changing into it in a way that
  // cannot race either: fchdir is process-wide, acceptable in the
  // single-threaded supervisor and the sandbox's setup.
  const std::string via_proc = "/proc/self/fd/" + std::to_string(dirfd) + "/" + name;
  if (via_proc.size() < sizeof(sockaddr_un::sun_path) && name.find('/') == std::string::npos) {
    CTX_TRY_ASSIGN(sockaddr_un a, make_addr(via_proc));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return {};
    if (errno != ENOENT && errno != ENOTDIR) return fail(sys_error("bind " + display_path, errno));
  }
  int cwd = ::open(".", O_PATH | O_CLOEXEC);
  if (cwd < 0) return CTX_FAIL_ERRNO("open .");
  UniqueFd cwd_guard(cwd);
  if (::fchdir(dirfd) < 0) return CTX_FAIL_ERRNO("fchdir");
  CTX_TRY_ASSIGN(sockaddr_un a, make_addr(name));
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  int err = errno;
  if (::fchdir(cwd) < 0) return CTX_FAIL_ERRNO("fchdir back");
  if (rc < 0) return fail(sys_error("bind " + display_path, err));
  return {};
}

}  // namespace

Result<UniqueFd> listen_unix_at(int dirfd, const std::string& name, const std::string& display_path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return CTX_FAIL_ERRNO("socket");
  UniqueFd s(fd);
  CTX_TRY(bind_at(fd, dirfd, name, display_path));
  if (::listen(fd, 64) < 0) return CTX_FAIL_ERRNO("listen " + display_path);
  return s;
}

Result<UniqueFd> bind_datagram_at(int dirfd, const std::string& name, const std::string& display_path) {
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return CTX_FAIL_ERRNO("socket");
  UniqueFd s(fd);
  CTX_TRY(bind_at(fd, dirfd, name, display_path));
  // Every datagram carries its sender's credentials (SCM_CREDENTIALS).
  int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one) < 0) return CTX_FAIL_ERRNO("setsockopt SO_PASSCRED");
  return s;
}

Result<std::pair<UniqueFd, UniqueFd>> make_seqpacket_pair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) return CTX_FAIL_ERRNO("socketpair");
  return std::pair<UniqueFd, UniqueFd>(UniqueFd(sv[0]), UniqueFd(sv[1]));
}

Result<void> send_message(int sock, std::string_view bytes, const std::vector<int>& fds) {
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    m.msg_control = control.data();
    m.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  while (true) {
    ssize_t n = ::sendmsg(sock, &m, MSG_NOSIGNAL);
    if (n >= 0) return {};
    if (errno != EINTR) return CTX_FAIL_ERRNO("sendmsg");
  }
}

Result<std::optional<Message>> recv_message(int sock, std::size_t max_bytes, std::size_t max_fds) {
  Message out;
  out.bytes.resize(max_bytes);
  iovec iov{out.bytes.data(), max_bytes};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * std::max<std::size_t>(max_fds, 1)));
  m.msg_control = control.data();
  m.msg_controllen = control.size();
  ssize_t n;
  do {
    n = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return CTX_FAIL_ERRNO("recvmsg");
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      out.fds.emplace_back(fd);  // owned, so closed even when refused below
    }
  }
  if ((m.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) != 0)
    return fail(Error{EMSGSIZE, "recvmsg: EMSGSIZE: message truncated"});
  if (out.fds.size() > max_fds) return fail(Error{EMSGSIZE, "recvmsg: EMSGSIZE: too many descriptors"});
  if (n == 0 && out.fds.empty()) return std::optional<Message>();
  out.bytes.resize(static_cast<std::size_t>(n));
  return std::optional<Message>(std::move(out));
}

Result<std::optional<std::string>> recv_message_nowait(int sock, std::size_t max_bytes) {
  std::string out(max_bytes, '\0');
  ssize_t n;
  do {
    n = ::recv(sock, out.data(), max_bytes, MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return std::optional<std::string>();
  if (n < 0) return CTX_FAIL_ERRNO("recv");
  if (n == 0) return std::optional<std::string>();
  out.resize(static_cast<std::size_t>(n));
  return std::optional<std::string>(std::move(out));
}

Result<pid_t> peer_pid(int conn) {
  ucred cr{};
  socklen_t len = sizeof cr;
  if (::getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0) return CTX_FAIL_ERRNO("getsockopt SO_PEERCRED");
  return cr.pid;
}

Result<std::optional<Datagram>> recv_datagram_from(int fd) {
  char buf[4096];
  iovec iov{buf, sizeof buf};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n = ::recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return std::optional<Datagram>();
    return CTX_FAIL_ERRNO("recvmsg");
  }
  Datagram d;
  d.bytes.assign(buf, static_cast<std::size_t>(n));
  d.truncated = (m.msg_flags & MSG_TRUNC) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      ucred cr{};
      std::memcpy(&cr, CMSG_DATA(c), sizeof cr);
      d.pid = cr.pid;
    } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      // Descriptors nobody asked for are closed at once.
      std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int x;
        std::memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof x);
        UniqueFd drop(x);
      }
    }
  }
  return std::optional<Datagram>(std::move(d));
}

Result<UniqueFd> connect_stream(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return CTX_FAIL_ERRNO("socket");
  UniqueFd s(fd);
  CTX_TRY_ASSIGN(sockaddr_un a, make_addr(path));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) return CTX_FAIL_ERRNO("connect " + path);
  return s;
}

Result<std::pair<UniqueFd, std::uint16_t>> listen_tcp_loopback(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return CTX_FAIL_ERRNO("socket");
  UniqueFd s(fd);
  int one = 1;
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0) return CTX_FAIL_ERRNO("setsockopt");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) return CTX_FAIL_ERRNO("bind " + where);
  if (::listen(fd, 64) < 0) return CTX_FAIL_ERRNO("listen " + where);
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) < 0) return CTX_FAIL_ERRNO("getsockname");
  return std::pair<UniqueFd, std::uint16_t>{std::move(s), ntohs(a.sin_port)};
}

Result<std::optional<UniqueFd>> accept_nonblock(int listen_fd) {
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
      return std::optional<UniqueFd>();
    return CTX_FAIL_ERRNO("accept4");
  }
  return std::optional<UniqueFd>(UniqueFd(fd));
}

Result<std::optional<std::string>> read_available(int fd, std::size_t max) {
  std::string buf(max, '\0');
  while (true) {
    ssize_t n = ::read(fd, buf.data(), max);
    if (n >= 0) {
      buf.resize(static_cast<std::size_t>(n));
      return std::optional<std::string>(std::move(buf));
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::optional<std::string>();
    return CTX_FAIL_ERRNO("read");
  }
}

Result<std::size_t> write_some(int fd, std::string_view data) {
  while (true) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::size_t{0};
    return CTX_FAIL_ERRNO("write");
  }
}

Result<void> set_nonblocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return CTX_FAIL_ERRNO("fcntl O_NONBLOCK");
  return {};
}

Result<UniqueFd> bind_datagram(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return CTX_FAIL_ERRNO("socket");
  UniqueFd s(fd);
  ::unlink(path.c_str());
  CTX_TRY_ASSIGN(sockaddr_un a, make_addr(path));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) return CTX_FAIL_ERRNO("bind " + path);
  return s;
}

Result<std::string> recv_datagram(int fd) {
  char buf[4096];
  ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return std::string();
    return CTX_FAIL_ERRNO("recv");
  }
  return std::string(buf, static_cast<std::size_t>(n));
}

Result<void> send_datagram(const std::string& path, const std::string& msg) {
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return CTX_FAIL_ERRNO("socket");
  UniqueFd s(fd);
  CTX_TRY_ASSIGN(sockaddr_un a, make_addr(path));
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  if (::sendto(fd, msg.data(), msg.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&a), len) < 0)
    return CTX_FAIL_ERRNO("sendto " + path);
  return {};
}

Result<void> remove_at(int dirfd, const std::string& name, bool dir) {
  if (::unlinkat(dirfd, name.c_str(), dir ? AT_REMOVEDIR : 0) < 0 && errno != ENOENT)
    return CTX_FAIL_ERRNO("unlinkat " + name);
  return {};
}

Result<bool> try_lock(int fd) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  if (errno == EWOULDBLOCK) return false;
  return CTX_FAIL_ERRNO("flock");
}

}  // namespace ctx::sys
