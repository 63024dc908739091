// The child half of a launch: applies a LaunchPlan inside the new
// namespaces (its mounts: mounts.hpp, from the sources of sources.hpp),
// becomes the sandbox's init and starts the runtime. The parent half is
// start.hpp.
#pragma once

#include <string>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/plan/plan.hpp"

namespace ctx::launcher {

/// The descriptors the child needs from the supervisor.
struct SandboxIo {
  /// The lifeline, a socketpair: one byte once the supervisor wrote the
  /// id maps (supervisor_maps_ids; else nothing), kRecordsWritten once its
  /// start records are written (the runtime waits for it), EOF when it
  /// dies; in an interactive launch the init writes 'S' when the runtime
  /// stopped and takes 'c' to continue it.
  int lifeline = -1;
  /// The sandbox's end of the SOCK_SEQPACKET channel (channel.hpp):
  /// step timings, the sockets of /run/ctx, the pty master, or the error
  /// that ended the setup; EOF once the runtime's execve succeeded.
  int channel = -1;
  int listen_fd = -1;  ///< the agent socket, passed as fd 3 (LISTEN_FDS)
  /// The HTTP model endpoint's program (O_PATH), when the plan has an
  /// endpoint and the program was found (launcher/sandbox/endpoint_start.hpp).
  int endpoint_exe = -1;
  /// A sandbox that maps itself reports all its namespaces, not only its
  /// pid namespace (SandboxStart::all_namespaces).
  bool all_namespaces = false;
  /// Its user namespace was joined with its id maps written
  /// (SandboxStart::join): map_itself writes none.
  bool joined = false;
  std::string id_maps_context;  ///< what its failed id maps are said with
  bool userns_remedy = false;   ///< they name the remedies (with_userns_remedy)
};

/// The supervisor's byte on the lifeline once the launch's start records
/// (status, pid) are written: the runtime's process is started after it.
inline constexpr char kRecordsWritten = 'r';

/// Exit codes of the sandbox's init that are not the runtime's own.
inline constexpr int kExitLaunchFailed = 125;
inline constexpr int kExitNotExecutable = 126;
inline constexpr int kExitNotFound = 127;

/// The exit code a wait status stands for: the code, or 128+signal.
int exit_code_of(int wait_status);

/// Runs in the cloned child. Never returns: on failure it sends the error
/// record to io.channel and _exit(125)s; on success it is the sandbox's init
/// (pid 1) until the runtime exits, then exits with the runtime's status
/// (128+signal for a signal).
[[noreturn]] void run_sandbox(const LaunchPlan& plan, const SandboxIo& io);

}  // namespace ctx::launcher
