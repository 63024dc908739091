// The seccomp deny-list, loaded in a forked child (never in the runner).
#include <catch2/catch.hpp>

#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "sys/seccomp.hpp"

namespace {

// Runs fn in a child with no_new_privs and the filter; returns its exit
// code (fn's result), 250+ for a setup failure.
int in_filtered_child(int (*fn)()) {
  pid_t p = ::fork();
  if (p == 0) {
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(250);
    if (!ctx::sys::apply_seccomp_filter()) ::_exit(251);
    ::_exit(fn());
  }
  int st = 0;
  ::waitpid(p, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

int errno_of(long rc) { return rc >= 0 ? 0 : errno; }

}  // namespace

TEST_CASE("every deny-list entry names a call of this architecture, with a reason", "[unit]") {
  for (const auto& r : ctx::sys::seccomp_rules()) {
    INFO(r.syscall);
    CHECK(seccomp_syscall_resolve_name(r.syscall) >= 0);
    CHECK(std::string(r.reason).size() > 5);
    CHECK((r.error == EPERM || r.error == ENOSYS));
  }
}

TEST_CASE("personality: only PER_LINUX and the query pass the filter", "[unit]") {
  CHECK(in_filtered_child([] { return errno_of(::syscall(SYS_personality, 0xffffffffUL)); }) == 0);
  CHECK(in_filtered_child([] { return errno_of(::syscall(SYS_personality, 0UL)); }) == 0);
  for (unsigned long v : {1UL, 8UL /* PER_LINUX32 */, 0x0040000UL /* ADDR_NO_RANDOMIZE */, 0x0400000UL, 0xfffffffeUL,
                          0x7fffffffUL, 0x80000000UL, 0x100000000UL, 0x1000400000UL}) {
    INFO(std::hex << v);
    static unsigned long value;
    value = v;
    CHECK(in_filtered_child([] { return errno_of(::syscall(SYS_personality, value)); }) == EPERM);
  }
}

TEST_CASE("the filter refuses new user namespaces but not other unshares", "[unit]") {
  CHECK(in_filtered_child([] { return errno_of(::syscall(SYS_unshare, CLONE_NEWUSER)); }) == EPERM);
  CHECK(in_filtered_child([] { return errno_of(::syscall(SYS_unshare, 0)); }) == 0);
  CHECK(in_filtered_child([] { return errno_of(::syscall(SYS_clone3, nullptr, 0)); }) == ENOSYS);
  CHECK(in_filtered_child([] { return errno_of(::syscall(SYS_keyctl, 0, -3, 0)); }) == EPERM);
  // fork (clone without CLONE_NEWUSER) still works.
  CHECK(in_filtered_child([] {
          pid_t c = ::fork();
          if (c == 0) ::_exit(0);
          int st = 0;
          return ::waitpid(c, &st, 0) == c ? 0 : 1;
        }) == 0);
}

TEST_CASE("the program built into the binary is the one libseccomp builds now", "[unit]") {
  auto now = ctx::sys::build_seccomp_program();
  REQUIRE(now);
  CHECK(*now == std::string(ctx::sys::builtin_seccomp_program()));
  CHECK(now->size() % 8 == 0);  // struct sock_filter
}
