// The seccomp deny-list, loaded in a forked child (never in the runner).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

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

// Which callers see a call fail otherwise without the filter: the control
// that shows an EPERM is the filter's.
constexpr int kAnyCaller = -1;
constexpr int kUnchecked = -2;  // sysctls or lockdown may refuse even root (kexec, modules, io_uring)
constexpr int kCapDacReadSearch = 2;
constexpr int kCapSysPacct = 20;
constexpr int kCapSysAdmin = 21;
constexpr int kCapSysBoot = 22;

// One call made in a child: what it returns under the filter (0: it
// succeeds), and who gets something else without it: any caller, a caller
// holding that capability in the initial user namespace, or unchecked.
struct Call {
  const char* name;
  long (*fn)();
  int filtered;
  int control;
};

std::string slurp(const char* path) {
  std::string out;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return out;
}

// True when the runner holds `cap` where the kernel checks it: in the
// initial user namespace (root in a container usually lacks CAP_SYS_BOOT
// and the like; root in a user namespace has nothing outside it).
bool has_initial_cap(int cap) {
  std::string map = slurp("/proc/self/uid_map");
  std::string words;
  for (char c : map) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!words.empty() && words.back() != ' ') words += ' ';
    } else {
      words += c;
    }
  }
  if (words != "0 0 4294967295 ") return false;
  std::string status = slurp("/proc/self/status");
  auto at = status.find("CapEff:");
  if (at == std::string::npos) return false;
  std::uint64_t eff = std::strtoull(status.c_str() + at + 7, nullptr, 16);
  return ((eff >> cap) & 1U) != 0;
}

bool control_applies(int control) {
  if (control == kAnyCaller) return true;
  if (control == kUnchecked) return false;
  return has_initial_cap(control);
}

// The pty both children use: TIOCGWINSZ needs a terminal.
int g_pty = -1;

// Makes one call in a fresh child (no_new_privs, and the filter when
// asked) and returns its errno (0: success) read through a pipe, or -1 when
// the child could not set up or died. A child per call: a user namespace
// one call makes must not change what the next one sees.
int errno_in_child(const Call& call, bool filter) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(250);
    if (filter && !ctx::sys::apply_seccomp_filter()) ::_exit(251);
    int e = errno_of(call.fn());
    ::_exit(::write(p[1], &e, sizeof e) == static_cast<ssize_t>(sizeof e) ? 0 : 252);
  }
  ::close(p[1]);
  int e = -1;
  ssize_t n = pid < 0 ? -1 : ::read(p[0], &e, sizeof e);
  ::close(p[0]);
  int st = 0;
  if (pid > 0) ::waitpid(pid, &st, 0);
  if (n != static_cast<ssize_t>(sizeof e) || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return -1;
  return e;
}

std::vector<int> errnos_in_child(const std::vector<Call>& calls, bool filter) {
  std::vector<int> out;
  for (const auto& c : calls) out.push_back(errno_in_child(c, filter));
  return out;
}

// The C library's clone wrappers need a stack and a function; the raw call
// with a null stack behaves as fork, and that child leaves at once.
long raw_clone(unsigned long flags) {
  long rc = ::syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
  if (rc == 0) ::_exit(0);
  if (rc > 0) {
    int st = 0;
    ::waitpid(static_cast<pid_t>(rc), &st, 0);
  }
  return rc;
}

constexpr unsigned long kUpper = 1UL << 32;  // ignored by the kernel in an ioctl request
constexpr unsigned long kPersonalityQuery = 0xffffffffUL;

// Each entry of the deny-list, with arguments that, without the filter,
// succeed or fail with another errno (a bad fd, a bad pointer, bad flags),
// so nothing happens to the machine when the runner is root.
const std::vector<Call>& denied_calls() {
  static const std::vector<Call> calls{
      {"keyctl", [] { return ::syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0); }, EPERM,
       kAnyCaller},
      {"add_key", [] { return ::syscall(SYS_add_key, nullptr, nullptr, nullptr, 0, 0); }, EPERM, kAnyCaller},
      {"request_key", [] { return ::syscall(SYS_request_key, nullptr, nullptr, nullptr, 0); }, EPERM, kAnyCaller},
      {"io_uring_setup", [] { return ::syscall(SYS_io_uring_setup, 1, nullptr); }, EPERM, kUnchecked},
      {"io_uring_enter", [] { return ::syscall(SYS_io_uring_enter, -1, 0, 0, 0, nullptr, 0); }, EPERM, kAnyCaller},
      {"io_uring_register", [] { return ::syscall(SYS_io_uring_register, -1, 0, nullptr, 0); }, EPERM, kAnyCaller},
      {"perf_event_open", [] { return ::syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0); }, EPERM, kAnyCaller},
      {"bpf", [] { return ::syscall(SYS_bpf, -1, nullptr, 0); }, EPERM, kCapSysAdmin},
      {"userfaultfd", [] { return ::syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY); }, EPERM, kAnyCaller},
      {"kexec_load", [] { return ::syscall(SYS_kexec_load, 0, 0, nullptr, 0xffffffffUL); }, EPERM, kUnchecked},
      {"kexec_file_load", [] { return ::syscall(SYS_kexec_file_load, -1, -1, 0, nullptr, 0xffffffffUL); }, EPERM,
       kUnchecked},
      {"init_module", [] { return ::syscall(SYS_init_module, nullptr, 0, ""); }, EPERM, kUnchecked},
      {"finit_module", [] { return ::syscall(SYS_finit_module, -1, "", 0); }, EPERM, kUnchecked},
      {"delete_module", [] { return ::syscall(SYS_delete_module, "ctx_no_such_module", O_NONBLOCK); }, EPERM,
       kUnchecked},
      {"unshare(CLONE_NEWUSER)", [] { return ::syscall(SYS_unshare, CLONE_NEWUSER); }, EPERM, kCapSysAdmin},
      {"unshare(CLONE_NEWUSER|CLONE_NEWNS)", [] { return ::syscall(SYS_unshare, CLONE_NEWUSER | CLONE_NEWNS); }, EPERM,
       kCapSysAdmin},
      {"clone(CLONE_NEWUSER)", [] { return raw_clone(CLONE_NEWUSER); }, EPERM, kCapSysAdmin},
      {"setns", [] { return ::syscall(SYS_setns, -1, 0); }, EPERM, kAnyCaller},
      {"clone3", [] { return ::syscall(SYS_clone3, nullptr, 0); }, ENOSYS, kAnyCaller},
      {"ioctl(TIOCSTI)", [] { return ::syscall(SYS_ioctl, -1, TIOCSTI, "x"); }, EPERM, kAnyCaller},
      {"ioctl(TIOCSTI | 1<<32)", [] { return ::syscall(SYS_ioctl, -1, kUpper | TIOCSTI, "x"); }, EPERM, kAnyCaller},
      {"ioctl(TIOCLINUX)", [] { return ::syscall(SYS_ioctl, -1, TIOCLINUX, "x"); }, EPERM, kAnyCaller},
      {"ioctl(TIOCLINUX | 1<<32)", [] { return ::syscall(SYS_ioctl, -1, kUpper | TIOCLINUX, "x"); }, EPERM, kAnyCaller},
      {"open_by_handle_at", [] { return ::syscall(SYS_open_by_handle_at, AT_FDCWD, nullptr, 0); }, EPERM,
       kCapDacReadSearch},
      {"acct", [] { return ::syscall(SYS_acct, "/nonexistent/ctx-acct"); }, EPERM, kCapSysPacct},
      {"swapon", [] { return ::syscall(SYS_swapon, "/nonexistent/ctx-swap", 0); }, EPERM, kCapSysAdmin},
      {"swapoff", [] { return ::syscall(SYS_swapoff, "/nonexistent/ctx-swap"); }, EPERM, kCapSysAdmin},
      {"reboot", [] { return ::syscall(SYS_reboot, 0, 0, 0, nullptr); }, EPERM, kCapSysBoot},
      {"personality(READ_IMPLIES_EXEC)", [] { return ::syscall(SYS_personality, 0x0400000UL); }, EPERM, kAnyCaller},
  };
  return calls;
}

// Calls the agent's programs make, which the filter must leave alone.
const std::vector<Call>& allowed_calls() {
  static const std::vector<Call> calls{
      {"getpid", [] { return ::syscall(SYS_getpid); }, 0, kAnyCaller},
      {"openat",
       [] {
         long fd = ::syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
         if (fd >= 0) ::close(static_cast<int>(fd));
         return fd;
       },
       0, kAnyCaller},
      {"unshare(0)", [] { return ::syscall(SYS_unshare, 0); }, 0, kAnyCaller},
      {"clone without CLONE_NEWUSER", [] { return raw_clone(0); }, 0, kAnyCaller},
      {"fork",
       [] {
         pid_t c = ::fork();
         if (c == 0) ::_exit(0);
         int st = 0;
         return c < 0 ? -1L : static_cast<long>(::waitpid(c, &st, 0));
       },
       0, kAnyCaller},
      {"personality(query)", [] { return ::syscall(SYS_personality, kPersonalityQuery); }, 0, kAnyCaller},
      {"personality(PER_LINUX)", [] { return ::syscall(SYS_personality, 0UL); }, 0, kAnyCaller},
      {"ioctl(TIOCGWINSZ)",
       [] {
         winsize ws{};
         return ::syscall(SYS_ioctl, g_pty, TIOCGWINSZ, &ws);
       },
       0, kAnyCaller},
  };
  return calls;
}

// A call through another architecture's table: i386's getpid (20) through
// int 0x80 (the kernel returns -errno in eax).
long i386_getpid() {
  long rc = 20;
  asm volatile("int $0x80" : "+a"(rc) : : "memory", "cc", "r8", "r9", "r10", "r11");
  if (rc < 0 && rc > -4096) {
    errno = static_cast<int>(-rc);
    return -1;
  }
  return rc;
}

// x32's getpid: the x86_64 number with the x32 bit.
long x32_getpid() { return ::syscall(39 | 0x40000000); }

}  // namespace

TEST_CASE("each listed call gets its errno from the filter", "[unit]") {
  const auto& calls = denied_calls();
  std::vector<int> filtered = errnos_in_child(calls, true);
  std::vector<int> plain = errnos_in_child(calls, false);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    INFO(calls[i].name << ": filtered " << ctx::errno_name(filtered[i]) << ", without the filter "
                       << (plain[i] == 0 ? std::string("ok") : ctx::errno_name(plain[i])));
    CHECK(filtered[i] == calls[i].filtered);
    // The same call reaches the kernel without the filter (so the EPERM
    // above is the filter's), wherever the kernel would not refuse it anyway.
    if (control_applies(calls[i].control)) CHECK(plain[i] != calls[i].filtered);
  }
}

TEST_CASE("ordinary calls pass the filter", "[unit]") {
  g_pty = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  REQUIRE(g_pty >= 0);
  const auto& calls = allowed_calls();
  std::vector<int> filtered = errnos_in_child(calls, true);
  ::close(g_pty);
  g_pty = -1;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    INFO(calls[i].name << ": " << (filtered[i] == 0 ? std::string("ok") : ctx::errno_name(filtered[i])));
    CHECK(filtered[i] == 0);
  }
}

TEST_CASE("unshare(CLONE_NEWUSER) works without the filter in the same setup", "[unit]") {
  // The control for the EPERM above: a child with no_new_privs alone makes
  // the user namespace. Where the machine refuses unprivileged user
  // namespaces (sysctl, AppArmor) only the filtered case can be checked.
  static const std::vector<Call> calls{
      {"unshare(CLONE_NEWUSER)", [] { return ::syscall(SYS_unshare, CLONE_NEWUSER); }, EPERM, kCapSysAdmin}};
  std::vector<int> plain = errnos_in_child(calls, false);
  std::vector<int> filtered = errnos_in_child(calls, true);
  CHECK(filtered[0] == EPERM);
  if (plain[0] != 0) WARN("this machine refuses user namespaces here: " << ctx::errno_name(plain[0]));
  if (has_initial_cap(kCapSysAdmin)) CHECK(plain[0] == 0);
}

TEST_CASE("calls through the i386 and x32 tables are refused whole", "[unit]") {
  static const std::vector<Call> calls{{"int 0x80 getpid", i386_getpid, EPERM, kAnyCaller},
                                       {"x32 getpid", x32_getpid, EPERM, kAnyCaller}};
  std::vector<int> filtered = errnos_in_child(calls, true);
  CHECK(filtered[0] == EPERM);
  CHECK(filtered[1] == EPERM);
  // Without the filter int 0x80 reaches the kernel (getpid, or ENOSYS where
  // the i386 emulation is off); the x32 number gives getpid or ENOSYS.
  std::vector<int> plain = errnos_in_child(calls, false);
  CHECK(plain[0] != EPERM);
  CHECK(plain[0] != -1);  // the child did not die of a fault
  CHECK(plain[1] != EPERM);
}

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
                          0x7fffffffUL, 0x80000000UL, 0x80000001UL, 0x55555555UL, 0xaaaaaaaaUL, 0xffff0000UL,
                          0x0000ffffUL, 0x100000000UL, 0x1000400000UL, 0x1ffffffffUL, 0xffffffff00000000UL}) {
    INFO(std::hex << v);
    static unsigned long value;
    value = v;
    CHECK(in_filtered_child([] { return errno_of(::syscall(SYS_personality, value)); }) == EPERM);
  }
}

TEST_CASE("personality: the masked comparisons refuse every other value", "[unit]") {
  // One filtered child tries each single bit, each value with one bit
  // clear, and pseudo-random values, and counts what got through.
  CHECK(in_filtered_child([] {
          int through = 0;
          auto refused = [](unsigned long v) { return ::syscall(SYS_personality, v) < 0 && errno == EPERM; };
          for (unsigned bit = 0; bit < 64; ++bit) {
            through += !refused(1UL << bit);
            through += !refused(~(1UL << bit));
            through += !refused(0xffffffffUL & ~(1UL << (bit % 32)));
          }
          std::uint64_t x = 0x9e3779b97f4a7c15ULL;
          for (int i = 0; i < 4096; ++i) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            const unsigned long v = i % 2 == 0 ? (x & 0xffffffffUL) : x;
            if (v != 0 && v != 0xffffffffUL) through += !refused(v);
          }
          return through > 200 ? 200 : through;
        }) == 0);
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
