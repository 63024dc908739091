// Processes: clone3 with namespaces, pidfd and cgroup placement; waiting,
// signals, exec and the last steps before exec.
#pragma once

#include <initializer_list>

#include <poll.h>

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::sys {

/// What clone3 creates besides the child.
struct CloneSpec {
  std::uint64_t ns_flags = 0;  ///< CLONE_NEW* flags
  int cgroup_fd = -1;          ///< >= 0: CLONE_INTO_CGROUP this directory
};

/// The parent's view of a new child.
struct Child {
  pid_t pid = 0;  ///< 0 in the child
  UniqueFd pidfd;
};

/// clone3(2) with CLONE_PIDFD and SIGCHLD as exit signal. Returns pid 0 in
/// the child (which must never return up the stack: it _exit()s).
Result<Child> clone_child(const CloneSpec& spec);

/// clone3(2) with CLONE_PARENT: the new process is the caller's parent's
/// child, not the caller's (with the caller's own exit signal), in the
/// pid namespace the caller made for its children. Returns its pid (as
/// the caller sees it), 0 in the new process.
Result<pid_t> clone_sibling();

/// Starts path as an owned helper process: clone3 with a pidfd; in the
/// child, `death_signal` is armed with PR_SET_PDEATHSIG (and the child
/// exits 125 at once if the caller already died), signals are reset,
/// fds above 2 are closed except `keep` (moved to 3, 4, ...), and path is
/// executed with argv and env. A failed exec exits 127.
/// `stdio` (>= 0 each) become fds 0, 1 and 2.
Result<Child> spawn_owned(const std::string& path, const std::vector<std::string>& argv,
                          const std::vector<std::string>& env, int death_signal, const std::vector<int>& keep = {},
                          std::array<int, 3> stdio = {-1, -1, -1});

/// A child process that runs code of the caller's (no exec), with a pidfd:
/// `death_signal` is armed with PR_SET_PDEATHSIG, and the child exits 125
/// at once if the caller already died. pid 0 in the child, which must
/// _exit and never return up the stack.
Result<Child> fork_owned(int death_signal, int cgroup_fd = -1);

/// prctl(PR_SET_NAME): the calling thread's name as ps shows it.
void set_process_name(const char* name);

/// fork(2) for helpers that need no namespaces.
Result<pid_t> fork_process();

/// A child that runs `body(arg)` on a stack of its own and shares the
/// caller's memory until it executes a program or exits (clone with
/// CLONE_VM | CLONE_VFORK): no page table is copied and no page is copied
/// on write, which a fork followed by an exec pays twice (the copy, then
/// its teardown at the exec). The caller waits meanwhile, so the child may
/// allocate; it must end in an exec or _exit (never exit(), whose handlers
/// are the caller's), and its changes to memory stay in the caller's. It
/// has its own descriptors, signal handlers and limits; what belongs to the
/// memory itself (dumpable, transparent huge pages, oom_score_adj's mm)
/// would change the caller's too, and must not be set. Returns the
/// child's pid once it has executed or exited. A plain fork where the
/// memory cannot be shared safely (sanitizer builds: kSpawnSharesMemory
/// false), which returns at once and keeps the child's changes its own.
Result<pid_t> spawn_sharing_memory(void (*body)(void*), void* arg);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSpawnSharesMemory = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
inline constexpr bool kSpawnSharesMemory = false;
#else
inline constexpr bool kSpawnSharesMemory = true;
#endif
#else
inline constexpr bool kSpawnSharesMemory = true;
#endif

/// Waits for a pid and returns the raw wait status.
Result<int> wait_pid(pid_t pid);

/// waitpid(pid, WNOHANG|WUNTRACED|WCONTINUED) for a stop or a continue
/// only: true (stopped), false (continued), nullopt (neither; an exit is
/// left for reap_any, since waitpid with WUNTRACED would reap it).
Result<std::optional<bool>> stopped_or_continued(pid_t pid);

/// Stops the caller as ^Z would (SIGTSTP to itself; the default action,
/// which the kernel skips for an orphaned process group). Returns once
/// the caller was continued.
void stop_self();

/// dup2(2): fd becomes target too (close-on-exec cleared on target).
Result<void> dup_to(int fd, int target);

/// waitpid(-1, WNOHANG): (pid, status) of one exited child, nullopt if none.
Result<std::optional<std::pair<pid_t, int>>> reap_any();

/// Asks the scheduler for time slices of `ns` for the caller and the
/// children it starts after (sched_setattr's sched_runtime for a
/// SCHED_OTHER or SCHED_BATCH task, Linux 6.12; clamped by the kernel to
/// 0.1-100 ms), keeping its policy and nice value: a task that runs
/// briefly and then waits is picked sooner when it starts or wakes on a
/// busy CPU, for no more CPU time in all. An idle or real-time task is
/// left as it is. 0 gives back the default slice. Where the kernel does
/// not know it, nothing changes.
void set_time_slice(std::uint64_t ns);

/// Reaps every child until none is left (ECHILD), waiting for the next
/// exit on `sigfd` (a signalfd with SIGCHLD) at most `timeout_ms` in all:
/// false when some are left then.
bool reap_all(int sigfd, int timeout_ms);

/// pidfd_send_signal(2).
Result<void> signal_pidfd(int pidfd, int sig);

/// kill(2).
Result<void> signal_pid(pid_t pid, int sig);

/// Blocks `signals` for the process and returns a signalfd reading them.
Result<UniqueFd> block_into_signalfd(const std::vector<int>& signals);

/// Adds `signals` to the calling thread's blocked set.
Result<void> block_signals(std::initializer_list<int> signals);

/// Reads one signal number from a signalfd (blocking).
Result<int> read_signalfd(int fd);

/// Restores the default disposition and an empty mask for every signal
/// (before exec, so the runtime does not inherit our blocking, nor a
/// signal the caller ignored). Async-signal-safe: it reads which signals
/// are ignored or caught from /proc/self/status and resets those (every
/// signal when that cannot be read).
void reset_signals();

/// SIGPIPE ignored: a peer that goes away is an EPIPE from write(2), not
/// the end of the process (the supervisor writes to sockets and pipes of
/// clients it does not control).
void ignore_sigpipe();

/// SIGTTOU ignored: a process of a background job may then change its
/// terminal's mode (tcsetattr) instead of being stopped for it.
void ignore_sigttou();

/// PR_SET_PDEATHSIG: the kernel sends sig to the caller when its parent
/// thread exits.
Result<void> set_parent_death_signal(int sig);

/// PR_SET_DUMPABLE 1: after a switch away from root the kernel marks the
/// process non-dumpable, which makes its /proc files root's; the id maps
/// of a user namespace it creates itself are written there.
Result<void> set_dumpable();

/// PR_SET_NO_NEW_PRIVS.
Result<void> set_no_new_privs();

/// setsid(2): a new session without a controlling terminal, which closes
/// the TIOCSTI channel to the caller's terminal.
Result<void> new_session();

/// Moves fds so that `keep[i]` becomes fd 3+i (CLOEXEC cleared) and closes
/// every other fd above 2 (close_range).
Result<void> keep_only_fds(const std::vector<int>& keep);

/// Closes every fd except those listed (close_range over the gaps).
Result<void> close_fds_except(std::vector<int> keep);

/// PR_SET_DUMPABLE 0: nobody without CAP_SYS_PTRACE over us may ptrace us
/// or read our /proc files (the sandbox's init, next to the runtime).
Result<void> set_not_dumpable();

/// execve(2); returns only on failure.
Error exec(const std::string& path, const std::vector<std::string>& argv, const std::vector<std::string>& env);

/// The path this program was executed by (the kernel's AT_EXECFN: the
/// name given to execve, whatever argv[0] says); "" when unknown.
std::string exec_path();

/// Whether the program exec_fd runs may hold its own file's descriptor.
enum class ExecFd {
  /// Made inheritable first: a script's interpreter reads it as /dev/fd/N.
  inherit,
  /// Left close-on-exec (an ELF program): the program never holds its own
  /// file's descriptor (one opened outside a sandbox's root must not reach
  /// inside).
  close,
};

/// execveat(fd, "", AT_EMPTY_PATH): runs the program open at fd (an O_PATH
/// descriptor will do). Returns only on failure.
Error exec_fd(int fd, const std::vector<std::string>& argv, const std::vector<std::string>& env,
              ExecFd keep = ExecFd::inherit);

/// `bytes` bytes from getrandom(2), as lower-case hex.
Result<std::string> random_hex(std::size_t bytes);

/// getcwd(3).
Result<std::string> current_dir();

/// An absolute form of path: itself if absolute, else joined to the cwd.
std::string absolute_path(const std::string& path);

/// realpath(3): the path with every symbolic link, "." and ".." resolved.
Result<std::string> real_path(const std::string& path);

/// chdir(2).
Result<void> change_dir(const std::string& path);

/// Sets FD_CLOEXEC on fd.
Result<void> set_cloexec(int fd);

/// close(2) of a descriptor not owned by a UniqueFd (errors are moot).
void close_fd(int fd);

/// Reads exactly one byte; false on EOF.
Result<bool> read_byte(int fd, char& out);

/// One read(2) of up to `size` bytes (a whole message of a SOCK_SEQPACKET
/// socket, whose rest a shorter read would drop); 0 on EOF.
Result<std::size_t> read_message(int fd, char* buf, std::size_t size);

/// Whether fd is an open file descriptor (fcntl F_GETFD).
bool is_open_fd(int fd);

/// pipe2(O_CLOEXEC).
Result<std::pair<UniqueFd, UniqueFd>> make_pipe();

/// Writes all bytes (EINTR-safe).
Result<void> write_all(int fd, const void* data, std::size_t len);

/// Reads until EOF or `max` bytes.
Result<std::string> read_to_eof(int fd, std::size_t max);

/// setrlimit(RLIMIT_NPROC) to n, soft and hard (the hard limit too, so
/// the runtime cannot raise it again).
Result<void> set_process_limit(std::uint64_t n);

/// A resource that setrlimit(2) bounds.
enum class Resource {
  address_space,  ///< RLIMIT_AS
  open_files,     ///< RLIMIT_NOFILE
  processes,      ///< RLIMIT_NPROC
  core_size,      ///< RLIMIT_CORE
};

/// Whether this build runs under AddressSanitizer (scripts/test's clang
/// build), whose shadow memory takes terabytes of address space: an
/// RLIMIT_AS would end the process at its first allocation.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#else
inline constexpr bool kAddressSanitizer = false;
#endif

/// setrlimit(2) of r, soft and hard, to n, or to the current hard limit
/// when that is lower: a limit is only lowered, and without
/// CAP_SYS_RESOURCE the process cannot raise it again.
Result<void> lower_limit(Resource r, std::uint64_t n);

/// poll(2) with EINTR retried; returns the number of ready fds.
Result<int> poll_fds(std::vector<struct pollfd>& fds, int timeout_ms);

/// Monotonic clock in microseconds.
std::uint64_t now_us();

}  // namespace ctx::sys
