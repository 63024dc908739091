// sys/process: what a forked child does with its descriptors, checked in
// a forked child of the test.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/process.hpp"

TEST_CASE("keep_only_fds works under a small open-file limit", "[unit]") {
  // It used to lift the kept descriptors to 1000 first, so every launch
  // failed with EINVAL under `ulimit -n 1000` (issue #14).
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int a = ::open("/dev/null", O_RDONLY);
    int b = ::open("/dev/null", O_RDONLY);
    struct rlimit rl {
      64, 64
    };
    if (a < 0 || b < 0 || ::setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(2);
    if (!ctx::sys::keep_only_fds({b, a})) _exit(3);
    // b is fd 3 now, a fd 4, nothing above.
    if (::fcntl(3, F_GETFD) < 0 || ::fcntl(4, F_GETFD) < 0 || ::fcntl(5, F_GETFD) >= 0) _exit(4);
    _exit(0);
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}

TEST_CASE("lower_limit sets soft and hard limits, and never raises them", "[unit]") {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct rlimit rl {};
    if (!ctx::sys::lower_limit(ctx::sys::Resource::open_files, 32)) _exit(2);
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != 32 || rl.rlim_max != 32) _exit(3);
    // Asked for more than the hard limit: the hard limit stays.
    if (!ctx::sys::lower_limit(ctx::sys::Resource::open_files, 4096)) _exit(4);
    if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur != 32 || rl.rlim_max != 32) _exit(5);
    if (!ctx::sys::lower_limit(ctx::sys::Resource::core_size, 0)) _exit(6);
    if (::getrlimit(RLIMIT_CORE, &rl) != 0 || rl.rlim_cur != 0 || rl.rlim_max != 0) _exit(7);
    // No allocation follows: under AddressSanitizer, whose shadow memory
    // is larger than this, one would fail.
    if (!ctx::sys::lower_limit(ctx::sys::Resource::address_space, 1ULL << 32)) _exit(8);
    if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_max != (1ULL << 32)) _exit(9);
    _exit(0);
  }
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
}
