// The Landlock scope of abstract unix sockets and signals, applied in
// forked children (never in the runner).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "sys/landlock.hpp"
#include "sys/probe.hpp"

namespace {

// What a child saw, each an errno (0: it worked).
struct Seen {
  int scoped = -1;         ///< landlock_scope_ipc: 1 applied, 0 not supported, -errno failed
  int connect_out = -1;    ///< connecting to the runner's abstract socket
  int kill_parent = -1;    ///< kill(runner, 0)
  int connect_inner = -1;  ///< connecting to an abstract socket the child bound itself
  int kill_inner = -1;     ///< SIGKILL to a process the child started
};

int errno_of(int rc) { return rc >= 0 ? 0 : errno; }

socklen_t abstract_address(const std::string& name, sockaddr_un& a) {
  a = sockaddr_un{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
}

int listen_abstract(const std::string& name) {
  sockaddr_un a;
  socklen_t len = abstract_address(name, a);
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(s, 8) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

int connect_abstract(const std::string& name) {
  sockaddr_un a;
  socklen_t len = abstract_address(name, a);
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return errno;
  int e = errno_of(::connect(s, reinterpret_cast<sockaddr*>(&a), len));
  ::close(s);
  return e;
}

// The child's half: no_new_privs, the scope when asked, then each probe.
Seen probe(const std::string& outside, bool scope, pid_t runner) {
  Seen seen;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return seen;
  if (scope) {
    auto r = ctx::sys::landlock_scope_ipc();
    seen.scoped = r ? (*r ? 1 : 0) : -r.error().code;
  } else {
    seen.scoped = 0;
  }
  seen.connect_out = connect_abstract(outside);
  seen.kill_parent = errno_of(::kill(runner, 0));
  const std::string inside = outside + "-inside";
  int s = listen_abstract(inside);
  seen.connect_inner = s < 0 ? errno : connect_abstract(inside);
  if (s >= 0) ::close(s);
  pid_t inner = ::fork();
  if (inner == 0) {
    ::pause();
    ::_exit(0);
  }
  seen.kill_inner = inner < 0 ? errno : errno_of(::kill(inner, SIGKILL));
  int st = 0;
  if (inner > 0 && (::waitpid(inner, &st, 0) != inner || !WIFSIGNALED(st))) seen.kill_inner = ECHILD;
  return seen;
}

// Runs probe() in a forked child and reads what it saw through a pipe.
Seen in_child(const std::string& outside, bool scope) {
  Seen seen;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return seen;
  const pid_t runner = ::getpid();
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    Seen s = probe(outside, scope, runner);
    ::_exit(::write(p[1], &s, sizeof s) == static_cast<ssize_t>(sizeof s) ? 0 : 1);
  }
  ::close(p[1]);
  if (pid > 0 && ::read(p[0], &seen, sizeof seen) != static_cast<ssize_t>(sizeof seen)) seen = Seen{};
  ::close(p[0]);
  int st = 0;
  if (pid > 0) ::waitpid(pid, &st, 0);
  return seen;
}

}  // namespace

TEST_CASE("the Landlock scope keeps abstract sockets and signals inside the domain", "[unit]") {
  const int abi = ctx::sys::landlock_abi().value_or(0);
  INFO("Landlock ABI " << abi);
  const std::string name = "ctx-test-landlock-" + std::to_string(::getpid());
  int listener = listen_abstract(name);
  REQUIRE(listener >= 0);

  // Without the scope the runner's socket and the runner itself are reachable.
  Seen plain = in_child(name, false);
  CHECK(plain.connect_out == 0);
  CHECK(plain.kill_parent == 0);
  CHECK(plain.connect_inner == 0);
  CHECK(plain.kill_inner == 0);

  Seen scoped = in_child(name, true);
  ::close(listener);
  if (abi >= ctx::sys::kLandlockScopeAbi) {
    CHECK(scoped.scoped == 1);
    CHECK(scoped.connect_out == EPERM);
    CHECK(scoped.kill_parent == EPERM);
    // What the domain made itself stays reachable.
    CHECK(scoped.connect_inner == 0);
    CHECK(scoped.kill_inner == 0);
  } else {
    // An older kernel: nothing applied, nothing changed, no error.
    CHECK(scoped.scoped == 0);
    CHECK(scoped.connect_out == 0);
    CHECK(scoped.kill_parent == 0);
  }
}
