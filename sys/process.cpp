#include "sys/process.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "sys/error.hpp"
#include "sys/file.hpp"

namespace ctx::sys {

Result<Child> clone_child(const CloneSpec& spec) {
  int pidfd = -1;
  struct clone_args args {};
  args.flags = spec.ns_flags | CLONE_PIDFD;
  args.pidfd = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&pidfd));
  args.exit_signal = SIGCHLD;
  if (spec.cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<std::uint64_t>(spec.cgroup_fd);
  }
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) return CTX_FAIL_ERRNO("clone3");
  Child c;
  c.pid = static_cast<pid_t>(pid);
  if (pid > 0) c.pidfd.reset(pidfd);
  return c;
}

Result<pid_t> clone_sibling() {
  struct clone_args args {};
  args.flags = CLONE_PARENT;  // the exit signal is the caller's own
  long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid < 0) return CTX_FAIL_ERRNO("clone3 CLONE_PARENT");
  return static_cast<pid_t>(pid);
}

Result<Child> spawn_owned(const std::string& path, const std::vector<std::string>& argv,
                          const std::vector<std::string>& env, int death_signal, const std::vector<int>& keep,
                          std::array<int, 3> stdio) {
  // Everything the child needs is built before the clone: after it, only
  // async-signal-safe calls.
  std::vector<char*> av, ev;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  for (const auto& e : env) ev.push_back(const_cast<char*>(e.c_str()));
  ev.push_back(nullptr);
  pid_t parent = ::getpid();
  CTX_TRY_ASSIGN(Child c, clone_child({0, -1}));
  if (c.pid != 0) return c;
  if (::prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0) < 0 || ::getppid() != parent) _exit(125);
  for (int i = 0; i < 3; ++i)
    if (stdio[static_cast<std::size_t>(i)] >= 0 && ::dup2(stdio[static_cast<std::size_t>(i)], i) < 0) _exit(125);
  if (!keep_only_fds(keep)) _exit(125);
  reset_signals();
  ::execve(path.c_str(), av.data(), ev.data());
  _exit(127);
}

Result<Child> fork_owned(int death_signal, int cgroup_fd) {
  pid_t parent = ::getpid();
  CTX_TRY_ASSIGN(Child c, clone_child({0, cgroup_fd}));
  if (c.pid != 0) return c;
  if (::prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0) < 0 || ::getppid() != parent) _exit(125);
  return c;
}

void set_process_name(const char* name) { (void)::prctl(PR_SET_NAME, name, 0, 0, 0); }

Result<pid_t> fork_process() {
  pid_t pid = ::fork();
  if (pid < 0) return CTX_FAIL_ERRNO("fork");
  return pid;
}

namespace {

// The child's stack: what an exec's preparation and its error report
// need, above a guard page that stops an overflow before the caller's
// memory.
constexpr std::size_t kSpawnStack = 256 * 1024;
// A guard as large as the largest frame on the child's path could skip
// (a read buffer of 8 KiB), several times over.
constexpr std::size_t kGuard = 64 * 1024;

struct SpawnArgs {
  void (*body)(void*);
  void* arg;
};

// An exception must not unwind past the clone (nothing above it to catch
// it in the child): the child ends.
int spawn_main(void* p) noexcept {
  auto* a = static_cast<SpawnArgs*>(p);
  try {
    a->body(a->arg);
  } catch (...) {
  }
  _exit(127);
}

}  // namespace

Result<pid_t> spawn_sharing_memory(void (*body)(void*), void* arg) {
  if constexpr (!kSpawnSharesMemory) {
    pid_t pid = ::fork();
    if (pid < 0) return CTX_FAIL_ERRNO("fork");
    if (pid == 0) {
      body(arg);
      _exit(127);
    }
    return pid;
  }
  void* region = ::mmap(nullptr, kSpawnStack + kGuard, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (region == MAP_FAILED) return CTX_FAIL_ERRNO("mmap");
  char* base = static_cast<char*>(region);
  if (::mprotect(base + kGuard, kSpawnStack, PROT_READ | PROT_WRITE) < 0) {
    Error e = sys_error("mprotect", errno);
    ::munmap(region, kSpawnStack + kGuard);
    return fail(e);
  }
  SpawnArgs a{body, arg};
  pid_t pid = ::clone(spawn_main, base + kGuard + kSpawnStack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
  int err = errno;
  ::munmap(region, kSpawnStack + kGuard);
  if (pid < 0) return fail(sys_error("clone", err));
  return pid;
}

Result<void> block_signals(std::initializer_list<int> signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : signals) sigaddset(&set, sig);
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) < 0) return CTX_FAIL_ERRNO("sigprocmask");
  return {};
}

Result<int> wait_pid(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return CTX_FAIL_ERRNO("waitpid");
  }
  return status;
}

Result<std::optional<bool>> stopped_or_continued(pid_t pid) {
  siginfo_t info{};
  // WNOWAIT: an exit stays to be reaped by reap_any.
  if (::waitid(P_PID, static_cast<id_t>(pid), &info, WNOHANG | WSTOPPED | WCONTINUED | WEXITED | WNOWAIT) < 0)
    return CTX_FAIL_ERRNO("waitid");
  if (info.si_pid == 0 || info.si_code == CLD_EXITED || info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED)
    return std::optional<bool>();
  // Consume the stop or continue report.
  (void)::waitid(P_PID, static_cast<id_t>(pid), &info, WNOHANG | WSTOPPED | WCONTINUED);
  return std::optional<bool>(info.si_code == CLD_STOPPED || info.si_code == CLD_TRAPPED);
}

void stop_self() { (void)::raise(SIGTSTP); }

bool is_open_fd(int fd) { return ::fcntl(fd, F_GETFD) >= 0; }

Result<void> dup_to(int fd, int target) {
  if (::dup2(fd, target) < 0) return CTX_FAIL_ERRNO("dup2");
  return {};
}

namespace {

// struct sched_attr (linux/sched/types.h), its first version's fields.
struct SchedAttr {
  std::uint32_t size = sizeof(SchedAttr);
  std::uint32_t policy = 0;
  std::uint64_t flags = 0;
  std::int32_t nice = 0;
  std::uint32_t priority = 0;
  std::uint64_t runtime = 0, deadline = 0, period = 0;
};

// The caller's policy and nice value as set_time_slice first read them
// (sched_setattr sets both, and a process may not lower its nice value
// without privilege); a reset in a child (the runtime's process) reuses
// them, and reads them again only when that is refused (reniced since).
SchedAttr slice_attr;
bool slice_set = false;

bool set_slice(SchedAttr attr, std::uint64_t ns) {
  attr.size = sizeof attr;
  attr.flags = 0;
  attr.runtime = ns;
  return ::syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

}  // namespace

void set_time_slice(std::uint64_t ns) {
  if (!slice_set) {
    if (ns == 0) return;  // never shortened: the default already
    SchedAttr now;
    if (::syscall(SYS_sched_getattr, 0, &now, sizeof now, 0) != 0) return;
    // Only a fair policy has a slice; SCHED_BATCH stays SCHED_BATCH, and
    // an idle or real-time caller is left as it is.
    if (now.policy != SCHED_OTHER && now.policy != SCHED_BATCH) return;
    slice_attr = now;
    slice_set = true;
  }
  if (set_slice(slice_attr, ns) || errno != EPERM) return;
  SchedAttr now;
  if (::syscall(SYS_sched_getattr, 0, &now, sizeof now, 0) == 0) (void)set_slice(now, ns);
}

bool reap_all(int sigfd, int timeout_ms) {
  const std::uint64_t end = now_us() + static_cast<std::uint64_t>(timeout_ms) * 1000;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(-1, &status, WNOHANG);
    if (r > 0) continue;
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno == ECHILD;
    const std::uint64_t now = now_us();
    if (now >= end) return false;
    struct pollfd p {
      sigfd, POLLIN, 0
    };
    if (::poll(&p, 1, static_cast<int>((end - now + 999) / 1000)) > 0) {
      signalfd_siginfo info;
      (void)!::read(sigfd, &info, sizeof info);
    }
  }
}

Result<std::optional<std::pair<pid_t, int>>> reap_any() {
  int status = 0;
  pid_t r = ::waitpid(-1, &status, WNOHANG);
  if (r < 0) {
    if (errno == ECHILD) return std::optional<std::pair<pid_t, int>>();
    return CTX_FAIL_ERRNO("waitpid");
  }
  if (r == 0) return std::optional<std::pair<pid_t, int>>();
  return std::optional<std::pair<pid_t, int>>(std::make_pair(r, status));
}

Result<void> signal_pidfd(int pidfd, int sig) {
  if (::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) < 0) return CTX_FAIL_ERRNO("pidfd_send_signal");
  return {};
}

Result<void> signal_pid(pid_t pid, int sig) {
  if (::kill(pid, sig) < 0) return CTX_FAIL_ERRNO("kill");
  return {};
}

Result<UniqueFd> block_into_signalfd(const std::vector<int>& signals) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : signals) sigaddset(&set, s);
  if (::sigprocmask(SIG_BLOCK, &set, nullptr) < 0) return CTX_FAIL_ERRNO("sigprocmask");
  int fd = ::signalfd(-1, &set, SFD_CLOEXEC);
  if (fd < 0) return CTX_FAIL_ERRNO("signalfd");
  return UniqueFd(fd);
}

Result<int> read_signalfd(int fd) {
  struct signalfd_siginfo si {};
  while (true) {
    ssize_t n = ::read(fd, &si, sizeof si);
    if (n == static_cast<ssize_t>(sizeof si)) return static_cast<int>(si.ssi_signo);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return CTX_FAIL_ERRNO("read signalfd");
    return fail(Error{EIO, "read signalfd: short read"});
  }
}

namespace {

// The 16 hex digits after `key` in text[0, len), as a mask; nullopt when
// the key is not there (whole) or the digits are not.
std::optional<std::uint64_t> status_mask(const char* text, std::size_t len, const char* key) {
  const std::size_t klen = std::strlen(key);
  for (std::size_t i = 0; i + klen + 16 <= len; ++i) {
    if ((i != 0 && text[i - 1] != '\n') || std::memcmp(text + i, key, klen) != 0) continue;
    std::uint64_t mask = 0;
    for (std::size_t d = i + klen; d < i + klen + 16; ++d) {
      const char c = text[d];
      const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (v < 0) return std::nullopt;
      mask = mask << 4 | static_cast<std::uint64_t>(v);
    }
    return mask;
  }
  return std::nullopt;
}

// The signals whose disposition is not the default (ignored or caught),
// bit s-1 for signal s, from the SigIgn and SigCgt lines of
// /proc/self/status; nullopt when they cannot be read. Async-signal-safe:
// no allocation.
std::optional<std::uint64_t> non_default_signals() {
  int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[8192];
  std::size_t len = 0;
  std::optional<std::uint64_t> ign, cgt;
  while (len < sizeof buf && !(ign && cgt)) {
    ssize_t n = ::read(fd, buf + len, sizeof buf - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += static_cast<std::size_t>(n);
    ign = status_mask(buf, len, "SigIgn:\t");
    cgt = status_mask(buf, len, "SigCgt:\t");
  }
  ::close(fd);
  if (!ign || !cgt) return std::nullopt;
  return *ign | *cgt;
}

}  // namespace

void reset_signals() {
  // Only the signals that need it: one read of the process's status
  // against a sigaction for each of the 64 (the default already holds for
  // nearly all of them). Where the status cannot be read, every one.
  const std::uint64_t reset = non_default_signals().value_or(~std::uint64_t{0});
  for (int s = 1; s < NSIG && s <= 64; ++s) {
    if (s == SIGKILL || s == SIGSTOP || (reset >> (s - 1) & 1) == 0) continue;
    std::signal(s, SIG_DFL);
  }
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
}

void ignore_sigpipe() { std::signal(SIGPIPE, SIG_IGN); }

void ignore_sigttou() { std::signal(SIGTTOU, SIG_IGN); }

Result<void> set_parent_death_signal(int sig) {
  if (::prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) < 0) return CTX_FAIL_ERRNO("prctl PR_SET_PDEATHSIG");
  return {};
}

Result<void> set_dumpable() {
  if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0) return CTX_FAIL_ERRNO("prctl PR_SET_DUMPABLE");
  return {};
}

Result<void> set_no_new_privs() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return CTX_FAIL_ERRNO("prctl PR_SET_NO_NEW_PRIVS");
  return {};
}

Result<void> new_session() {
  if (::setsid() < 0) return CTX_FAIL_ERRNO("setsid");
  return {};
}

namespace {

}  // namespace

Result<void> keep_only_fds(const std::vector<int>& keep) {
  // First lift every kept fd above the target range [3, 3+n) so that
  // moving one into place cannot overwrite another that is still to be
  // moved (just above it: any RLIMIT_NOFILE that leaves room for the copies
  // works).
  const int above = 3 + static_cast<int>(keep.size());
  std::vector<int> lifted;
  for (int fd : keep) {
    int n = ::fcntl(fd, F_DUPFD_CLOEXEC, above);
    if (n < 0) return CTX_FAIL_ERRNO("fcntl F_DUPFD_CLOEXEC");
    lifted.push_back(n);
  }
  for (std::size_t i = 0; i < lifted.size(); ++i) {
    int want = 3 + static_cast<int>(i);
    if (::dup2(lifted[i], want) < 0) return CTX_FAIL_ERRNO("dup2");  // dup2 clears CLOEXEC
  }
  unsigned first = 3 + static_cast<unsigned>(keep.size());
  if (::close_range(first, ~0U, 0) < 0) return CTX_FAIL_ERRNO("close_range");
  return {};
}

Result<void> close_fds_except(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  unsigned next = 0;
  for (int fd : keep) {
    if (fd < 0) continue;
    if (static_cast<unsigned>(fd) > next && ::close_range(next, static_cast<unsigned>(fd) - 1, 0) < 0)
      return CTX_FAIL_ERRNO("close_range");
    next = static_cast<unsigned>(fd) + 1;
  }
  if (::close_range(next, ~0U, 0) < 0) return CTX_FAIL_ERRNO("close_range");
  return {};
}

Result<void> set_not_dumpable() {
  if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0) return CTX_FAIL_ERRNO("prctl PR_SET_DUMPABLE 0");
  return {};
}

Error exec(const std::string& path, const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  ::execve(path.c_str(), a.data(), e.data());
  int err = errno;
  return sys_error("execve " + path, err);
}

std::string exec_path() {
  auto p = reinterpret_cast<const char*>(::getauxval(AT_EXECFN));
  return p != nullptr ? std::string(p) : std::string();
}

Error exec_fd(int fd, const std::vector<std::string>& argv, const std::vector<std::string>& env, ExecFd keep) {
  if (keep == ExecFd::inherit) {
    int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0 || ::fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC) < 0) return sys_error("fcntl F_SETFD", errno);
  }
  std::vector<char*> a, e;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  for (const auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
  e.push_back(nullptr);
  ::execveat(fd, "", a.data(), e.data(), AT_EMPTY_PATH);
  int err = errno;
  return sys_error("execveat " + (argv.empty() ? std::string() : argv[0]), err);
}

Result<std::string> random_hex(std::size_t bytes) {
  std::string raw(bytes, '\0');
  for (std::size_t got = 0; got < bytes;) {
    ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return CTX_FAIL_ERRNO("getrandom");
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

Result<std::string> current_dir() {
  char buf[4096];
  if (::getcwd(buf, sizeof buf) == nullptr) return CTX_FAIL_ERRNO("getcwd");
  return std::string(buf);
}

Result<std::string> real_path(const std::string& path) {
  char* r = ::realpath(path.c_str(), nullptr);
  if (r == nullptr) return CTX_FAIL_ERRNO("realpath " + path);
  std::string out(r);
  ::free(r);
  return out;
}

std::string absolute_path(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  auto cwd = current_dir();
  if (!cwd) return path;
  std::string rel = path;
  while (rel.size() > 2 && rel.compare(0, 2, "./") == 0) rel.erase(0, 2);
  while (!rel.empty() && rel.back() == '/') rel.pop_back();
  return rel.empty() || rel == "." ? *cwd : (*cwd == "/" ? "" : *cwd) + "/" + rel;
}

Result<void> change_dir(const std::string& path) {
  if (::chdir(path.c_str()) < 0) return CTX_FAIL_ERRNO("chdir " + path);
  return {};
}

Result<void> set_cloexec(int fd) {
  if (::fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) return CTX_FAIL_ERRNO("fcntl F_SETFD");
  return {};
}

void close_fd(int fd) {
  if (fd >= 0) ::close(fd);
}

Result<bool> read_byte(int fd, char& out) {
  while (true) {
    ssize_t n = ::read(fd, &out, 1);
    if (n == 1) return true;
    if (n == 0) return false;
    if (errno != EINTR) return CTX_FAIL_ERRNO("read");
  }
}

Result<std::size_t> read_message(int fd, char* buf, std::size_t size) {
  while (true) {
    ssize_t n = ::read(fd, buf, size);
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno != EINTR) return CTX_FAIL_ERRNO("read");
  }
}

Result<std::pair<UniqueFd, UniqueFd>> make_pipe() {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) < 0) return CTX_FAIL_ERRNO("pipe2");
  return std::pair<UniqueFd, UniqueFd>(UniqueFd(p[0]), UniqueFd(p[1]));
}

Result<void> write_all(int fd, const void* data, std::size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR) continue;
      return CTX_FAIL_ERRNO("write");
    }
    p += n;
    len -= static_cast<std::size_t>(n);
  }
  return {};
}

Result<std::string> read_to_eof(int fd, std::size_t max) {
  std::string out;
  char buf[4096];
  while (out.size() < max) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return CTX_FAIL_ERRNO("read");
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

std::uint64_t now_us() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000u + static_cast<std::uint64_t>(ts.tv_nsec) / 1000u;
}

Result<void> set_process_limit(std::uint64_t n) {
  rlimit rl{n, n};
  if (::setrlimit(RLIMIT_NPROC, &rl) < 0) return CTX_FAIL_ERRNO("setrlimit RLIMIT_NPROC");
  return {};
}

Result<void> lower_limit(Resource r, std::uint64_t n) {
  int which = 0;
  const char* name = "";
  switch (r) {
    case Resource::address_space:
      which = RLIMIT_AS;
      name = "RLIMIT_AS";
      break;
    case Resource::open_files:
      which = RLIMIT_NOFILE;
      name = "RLIMIT_NOFILE";
      break;
    case Resource::processes:
      which = RLIMIT_NPROC;
      name = "RLIMIT_NPROC";
      break;
    case Resource::core_size:
      which = RLIMIT_CORE;
      name = "RLIMIT_CORE";
      break;
  }
  rlimit now{};
  if (::getrlimit(which, &now) < 0) return CTX_FAIL_ERRNO(std::string("getrlimit ") + name);
  rlim_t to = now.rlim_max == RLIM_INFINITY ? n : std::min<rlim_t>(n, now.rlim_max);
  rlimit rl{to, to};
  if (::setrlimit(which, &rl) < 0) return CTX_FAIL_ERRNO(std::string("setrlimit ") + name);
  return {};
}

Result<int> poll_fds(std::vector<struct pollfd>& fds, int timeout_ms) {
  while (true) {
    int n = ::poll(fds.data(), fds.size(), timeout_ms);
    if (n >= 0) return n;
    if (errno != EINTR) return CTX_FAIL_ERRNO("poll");
  }
}

}  // namespace ctx::sys
