#include "sys/recorder.hpp"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "sys/error.hpp"
#include "sys/raw.hpp"

namespace ctx::sys {

namespace {

// Shared memory needs system calls made without the C library (errno is
// the supervisor's); elsewhere the recorder is forked.
constexpr bool kSharesMemory = raw::kRawSyscalls;

constexpr std::size_t kRegion = 64 * 1024;
constexpr int kMaxKeep = 16;
constexpr int kMaxArgs = 8;
constexpr std::size_t kStrings = 2048;
constexpr int kMaxFds = 2;  // per message: what the watchdog's messages carry

// Everything the recorder reads, at the start of its region; its stack
// grows down from the region's end.
struct Args {
  int sock = -1;
  int log = -1;
  int keep[kMaxKeep] = {};  ///< sorted, sock and log among them
  int nkeep = 0;
  int inherit[kMaxKeep] = {};  ///< made inheritable before the exec
  int ninherit = 0;
  char* argv[kMaxArgs + 1] = {};
  char* envp[1] = {};
  char exe[16] = "/proc/self/exe";
  char null[16] = "/dev/null";
  long size = 0;  ///< of the file when the recorder starts: where its first record goes
  char strings[kStrings] = {};
};

// The recorder. No library call, no allocation, no errno, nothing
// instrumented: the memory is the starter's while it runs.
[[gnu::noinline]] CTX_RAW_UNINSTRUMENTED int recorder_main(void* p) {
  const Args* a = static_cast<const Args*>(p);
  // 0 and 1 stay open (the starter's), so that no descriptor it is sent
  // takes their numbers; they become /dev/null before the exec.
  int next = 2;
  for (int i = 0; i < a->nkeep; ++i) {
    if (a->keep[i] < next) continue;
    if (a->keep[i] > next) (void)raw::call(SYS_close_range, next, a->keep[i] - 1, 0);
    next = a->keep[i] + 1;
  }
  (void)raw::call(SYS_close_range, next, static_cast<long>(~0U), 0);
  // A file past RLIMIT_FSIZE is a short write, not a SIGXFSZ that ends
  // the recorder (the mask is this process's own).
  std::uint64_t xfsz = std::uint64_t{1} << (SIGXFSZ - 1);
  (void)raw::call(SYS_rt_sigprocmask, SIG_BLOCK, reinterpret_cast<long>(&xfsz), 0, sizeof xfsz);
  long size = a->size;
  char buf[8192];
  union {
    cmsghdr h;
    char bytes[CMSG_SPACE(sizeof(int) * kMaxFds)];
  } ctl;
  while (true) {
    iovec iov;
    iov.iov_base = buf;
    iov.iov_len = sizeof buf;
    msghdr m;
    m.msg_name = nullptr;
    m.msg_namelen = 0;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl.bytes;
    m.msg_controllen = sizeof ctl.bytes;
    m.msg_flags = 0;
    long n = raw::call(SYS_recvmsg, a->sock, reinterpret_cast<long>(&m), 0);
    if (n == -EINTR) continue;
    if (n < 0) break;
    int fds[kMaxFds];
    int nfds = 0;
    if (m.msg_controllen >= sizeof(cmsghdr) && ctl.h.cmsg_level == SOL_SOCKET && ctl.h.cmsg_type == SCM_RIGHTS) {
      std::size_t count = (ctl.h.cmsg_len - CMSG_LEN(0)) / sizeof(int);
      const unsigned char* d = CMSG_DATA(&ctl.h);
      for (std::size_t i = 0; i < count && nfds < kMaxFds; ++i) {
        int fd = 0;
        for (std::size_t k = 0; k < sizeof(int); ++k) reinterpret_cast<unsigned char*>(&fd)[k] = d[i * sizeof(int) + k];
        fds[nfds++] = fd;
      }
    }
    if (n == 0 && nfds == 0) break;  // EOF: the starter is gone
    if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0) {
      for (int i = 0; i < nfds; ++i) (void)raw::call(SYS_close, fds[i]);
      continue;
    }
    if (n == 1 && buf[0] == 'c' && nfds == 0) (void)raw::call(SYS_exit_group, 0);
    std::uint32_t head[2] = {static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(nfds)};
    const long whole = static_cast<long>(sizeof head) + n + static_cast<long>(sizeof(int)) * nfds;
    iovec out[3];
    out[0].iov_base = head;
    out[0].iov_len = sizeof head;
    out[1].iov_base = buf;
    out[1].iov_len = static_cast<std::size_t>(n);
    out[2].iov_base = fds;
    out[2].iov_len = sizeof(int) * static_cast<std::size_t>(nfds);
    // Whole records only: a short write (no memory for the file) is cut
    // back, and that message is lost, not every one after it.
    if (raw::call(SYS_writev, a->log, reinterpret_cast<long>(out), 3) == whole) {
      size += whole;
    } else {
      (void)raw::call(SYS_ftruncate, a->log, size);
      (void)raw::call(SYS_lseek, a->log, size, SEEK_SET);
    }
  }
  const long null = raw::call(SYS_openat, AT_FDCWD, reinterpret_cast<long>(a->null), O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    (void)raw::call(SYS_dup3, null, 0, 0);
    (void)raw::call(SYS_dup3, null, 1, 0);
    (void)raw::call(SYS_close, null);
  }
  for (int i = 0; i < a->ninherit; ++i) (void)raw::call(SYS_fcntl, a->inherit[i], F_SETFD, 0);
  (void)raw::call(SYS_execve, reinterpret_cast<long>(a->exe), reinterpret_cast<long>(a->argv),
                  reinterpret_cast<long>(a->envp));
  (void)raw::call(SYS_exit_group, 127);
  return 127;
}

}  // namespace

bool recorder_shares_memory() { return kSharesMemory; }

void Recorder::release() {
  if (region != nullptr) ::munmap(region, size);
  region = nullptr;
}

Result<Recorder> start_recorder(const RecorderSetup& s) {
  std::vector<int> keep = s.keep;
  keep.push_back(s.sock);
  keep.push_back(s.log);
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  std::size_t strings = 0;
  for (const auto& arg : s.argv) strings += arg.size() + 1;
  if (keep.size() > static_cast<std::size_t>(kMaxKeep) || s.argv.empty() ||
      s.argv.size() > static_cast<std::size_t>(kMaxArgs) || strings > kStrings || s.sock < 0 || s.log < 0 ||
      keep.front() < 0)
    return fail(Error{EINVAL, "start_recorder: EINVAL: too many descriptors or arguments"});
  void* region = ::mmap(nullptr, kRegion, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (region == MAP_FAILED) return CTX_FAIL_ERRNO("mmap");
  Args* a = new (region) Args;
  a->sock = s.sock;
  a->log = s.log;
  struct stat st {};
  if (::fstat(s.log, &st) < 0) {
    Error e = sys_error("fstat", errno);
    ::munmap(region, kRegion);
    return fail(e);
  }
  a->size = static_cast<long>(st.st_size);
  for (int fd : keep) a->keep[a->nkeep++] = fd;
  for (int fd : keep)
    if (fd != s.sock) a->inherit[a->ninherit++] = fd;
  char* at = a->strings;
  for (std::size_t i = 0; i < s.argv.size(); ++i) {
    std::memcpy(at, s.argv[i].c_str(), s.argv[i].size() + 1);
    a->argv[i] = at;
    at += s.argv[i].size() + 1;
  }
  Recorder r;
  r.region = region;
  r.size = kRegion;
  if constexpr (kSharesMemory) {
    r.pid = ::clone(recorder_main, static_cast<char*>(region) + kRegion, CLONE_VM | SIGCHLD, a);
    if (r.pid < 0) {
      Error e = sys_error("clone", errno);
      r.release();
      return fail(e);
    }
  } else {
    r.pid = ::fork();
    if (r.pid < 0) {
      Error e = sys_error("fork", errno);
      r.release();
      return fail(e);
    }
    if (r.pid == 0) ::_exit(recorder_main(a));
  }
  return r;
}

Result<UniqueFd> make_recorder_log(const char* name) {
  int fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return CTX_FAIL_ERRNO("memfd_create");
  return UniqueFd(fd);
}

Result<void> append_recorded(int log, std::string_view bytes, const std::vector<int>& fds) {
  std::uint32_t head[2] = {static_cast<std::uint32_t>(bytes.size()), static_cast<std::uint32_t>(fds.size())};
  iovec out[3] = {{head, sizeof head},
                  {const_cast<char*>(bytes.data()), bytes.size()},
                  {const_cast<int*>(fds.data()), sizeof(int) * fds.size()}};
  const std::size_t want = sizeof head + bytes.size() + sizeof(int) * fds.size();
  ssize_t n = ::writev(log, out, 3);
  if (n < 0) return CTX_FAIL_ERRNO("writev");
  if (static_cast<std::size_t>(n) != want) return fail(Error{EIO, "writev: EIO: short write"});
  return {};
}

Result<std::vector<RecordedMessage>> read_recorded(int log) {
  struct stat st {};
  if (::fstat(log, &st) < 0) return CTX_FAIL_ERRNO("fstat");
  std::string all(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < all.size()) {
    ssize_t n = ::pread(log, all.data() + got, all.size() - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return CTX_FAIL_ERRNO("pread");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  all.resize(got);
  std::vector<RecordedMessage> out;
  std::size_t at = 0;
  while (all.size() - at >= 8) {
    std::uint32_t head[2];
    std::memcpy(head, all.data() + at, sizeof head);
    const std::size_t body = static_cast<std::size_t>(head[0]) + sizeof(int) * static_cast<std::size_t>(head[1]);
    if (head[1] > static_cast<std::uint32_t>(kMaxFds) || all.size() - at - 8 < body) break;
    RecordedMessage m;
    m.bytes = all.substr(at + 8, head[0]);
    for (std::uint32_t i = 0; i < head[1]; ++i) {
      int fd = -1;
      std::memcpy(&fd, all.data() + at + 8 + head[0] + sizeof(int) * i, sizeof fd);
      if (fd >= 0 && ::fcntl(fd, F_GETFD) >= 0) m.fds.emplace_back(fd);
    }
    out.push_back(std::move(m));
    at += 8 + body;
  }
  return out;
}

}  // namespace ctx::sys
