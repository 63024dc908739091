#include "sys/namespace.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <new>

#include "base/unique_fd.hpp"
#include "sys/error.hpp"
#include "sys/raw.hpp"

namespace ctx::sys {

Result<void> unshare_ns(int flags) {
  if (::unshare(flags) < 0) return CTX_FAIL_ERRNO("unshare");
  return {};
}

Result<void> join_ns(int fd, int nstype) {
  if (::setns(fd, nstype) < 0) return CTX_FAIL_ERRNO("setns");
  return {};
}

Result<UniqueFd> open_own_ns(const std::string& ns) {
  const std::string path = "/proc/self/ns/" + ns;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return CTX_FAIL_ERRNO("open " + path);
  return UniqueFd(fd);
}

namespace {

// The helper's state, in memory it shares with its starter: what it did,
// and which of the two took the namespace's making.
enum : int { kWaiting = 0, kMaking = 1, kMade = 2, kCancelled = 3 };
struct Ahead {
  int state = kWaiting;
  int err = 0;  ///< unshare's errno, once kMade
};
constexpr std::size_t kAheadStack = 16 * 1024;
constexpr std::size_t kAheadGuard = 16 * 1024;
// The state at the region's top, the stack below it: an overflow runs
// into the guard, never through the state.
constexpr std::size_t kStateAt = kAheadGuard + kAheadStack - 64;
static_assert(sizeof(Ahead) <= 64);
// How long the init waits for a helper that has begun: past it (a helper
// stopped, traced or killed mid-way by someone with the owner's uid), the
// init makes its own namespace. A namespace takes well under 1 ms to make
// on a quiet machine.
constexpr long kWaitSliceNs = 2'000'000;
constexpr int kWaitSlices = 50;

// The helper: no library call, no errno, nothing but its own stack and the
// shared state. It waits, once it has made the namespace, until it is
// killed (the namespace lives as long as a process is in it).
[[gnu::noinline]] CTX_RAW_UNINSTRUMENTED int ahead_main(void* p) {
  auto* a = static_cast<Ahead*>(p);
  int expected = kWaiting;
  if (!__atomic_compare_exchange_n(&a->state, &expected, kMaking, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return 0;
  long r = raw::call(SYS_unshare, CLONE_NEWNET);
  a->err = r < 0 ? static_cast<int>(-r) : 0;
  __atomic_store_n(&a->state, kMade, __ATOMIC_RELEASE);
  (void)raw::call(SYS_futex, raw::arg(&a->state), FUTEX_WAKE_PRIVATE, 1);
  while (true) (void)raw::call(SYS_ppoll, 0, 0, 0, 0, 8);
}

}  // namespace

NetNamespaceAhead NetNamespaceAhead::start() {
  NetNamespaceAhead n;
  if constexpr (!raw::kRawSyscalls) return n;
  void* region = ::mmap(nullptr, kAheadStack + kAheadGuard, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (region == MAP_FAILED) return n;
  char* base = static_cast<char*>(region);
  if (::mprotect(base + kAheadGuard, kAheadStack, PROT_READ | PROT_WRITE) < 0) {
    ::munmap(region, kAheadStack + kAheadGuard);
    return n;
  }
  auto* a = new (base + kStateAt) Ahead;
  int pidfd = -1;
  pid_t pid = ::clone(ahead_main, base + kStateAt, CLONE_VM | CLONE_PIDFD | SIGCHLD, a, &pidfd);
  if (pid < 0) {
    ::munmap(region, kAheadStack + kAheadGuard);
    return n;
  }
  n.region_ = region;
  n.pid_ = pid;
  n.pidfd_ = UniqueFd(pidfd);
  return n;
}

NetNamespaceAhead::NetNamespaceAhead(NetNamespaceAhead&& o) noexcept
    : region_(o.region_), pid_(o.pid_), pidfd_(std::move(o.pidfd_)), made_ahead_(o.made_ahead_) {
  o.region_ = nullptr;
  o.pid_ = -1;
}

NetNamespaceAhead::~NetNamespaceAhead() { end(); }

void NetNamespaceAhead::end() {
  if (pid_ > 0) {
    (void)::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
    int status = 0;
    while (::waitpid(pid_, &status, __WALL) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  pidfd_.reset();
  // Only once the helper is gone: its stack and its state are in it.
  if (region_ != nullptr) ::munmap(region_, kAheadStack + kAheadGuard);
  region_ = nullptr;
}

Result<void> NetNamespaceAhead::enter() {
  if (region_ == nullptr) return unshare_ns(CLONE_NEWNET);
  auto* a = reinterpret_cast<Ahead*>(static_cast<char*>(region_) + kStateAt);
  int expected = kWaiting;
  if (__atomic_compare_exchange_n(&a->state, &expected, kCancelled, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    end();
    return unshare_ns(CLONE_NEWNET);
  }
  const struct timespec slice { 0, kWaitSliceNs };
  for (int i = 0; __atomic_load_n(&a->state, __ATOMIC_ACQUIRE) == kMaking; ++i) {
    siginfo_t gone{};
    const bool ended = ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(pidfd_.get()), &gone,
                                WEXITED | WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
                       gone.si_pid != 0;
    if (ended || i == kWaitSlices) {
      end();
      return unshare_ns(CLONE_NEWNET);
    }
    (void)::syscall(SYS_futex, &a->state, FUTEX_WAIT_PRIVATE, kMaking, &slice, nullptr, 0);
  }
  const int err = a->err;
  Result<void> r;
  if (err != 0) {
    r = fail(sys_error("unshare(CLONE_NEWNET)", err));
  } else if (::setns(pidfd_.get(), CLONE_NEWNET) < 0) {
    r = CTX_FAIL_ERRNO("setns(CLONE_NEWNET)");
  } else {
    made_ahead_ = true;
  }
  end();
  return r;
}

Result<void> loopback_up() {
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return CTX_FAIL_ERRNO("socket");
  UniqueFd s(fd);
  struct ifreq ifr {};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) return CTX_FAIL_ERRNO("ioctl SIOCGIFFLAGS lo");
  ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(fd, SIOCSIFFLAGS, &ifr) < 0) return CTX_FAIL_ERRNO("ioctl SIOCSIFFLAGS lo");
  return {};
}

Result<void> set_hostname(const std::string& name) {
  if (::sethostname(name.c_str(), name.size()) < 0) return CTX_FAIL_ERRNO("sethostname");
  return {};
}

Result<unsigned long> ns_inode(pid_t pid, const std::string& ns) {
  std::string path = (pid == 0 ? std::string("/proc/self") : "/proc/" + std::to_string(pid)) + "/ns/" + ns;
  struct stat st {};
  if (::stat(path.c_str(), &st) < 0) return CTX_FAIL_ERRNO("stat " + path);
  return static_cast<unsigned long>(st.st_ino);
}

}  // namespace ctx::sys
