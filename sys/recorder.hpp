// A message recorder: a process that shares its starter's memory
// (CLONE_VM), so that starting it copies no page table and no later write
// of the starter faults a copied page in, and that records every message
// the starter sends it into a file, each with its descriptors kept open,
// until the starter says it is done ("c": it exits) or is gone (EOF: it
// executes a program that reads the file back). The supervisor's watchdog
// is one (launcher/supervisor/watchdog.hpp).
//
// While the starter lives, the recorder shares its memory and its thread's
// errno: it allocates nothing, calls no library function that could touch
// either, and makes its system calls with its own instructions (x86-64,
// arm64; elsewhere it is forked instead, and costs the copy). Its stack
// and everything it needs are in a region of its own, written before it
// starts.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"

namespace ctx::sys {

/// What a recorder needs; every descriptor is the starter's.
struct RecorderSetup {
  int sock = -1;          ///< a SOCK_SEQPACKET end the starter sends messages on
  int log = -1;           ///< the file each message is appended to (a memfd)
  std::vector<int> keep;  ///< descriptors kept open besides sock and log (every other is closed)
  /// The program run, from /proc/self/exe, once the starter is gone: with
  /// log and keep inheritable, an empty environment and the starter's
  /// signal mask. At most 8 arguments, 2 KiB in all.
  std::vector<std::string> argv;
};

/// A started recorder.
struct Recorder {
  pid_t pid = 0;
  void* region = nullptr;  ///< its stack and setup; unmapped by release() once it is reaped
  std::size_t size = 0;
  /// Unmaps the region: only after the recorder was waited for.
  void release();
};

/// A new memfd for a recorder's file, named `name` (close-on-exec: the
/// recorder makes it inheritable before its exec).
Result<UniqueFd> make_recorder_log(const char* name);

/// Starts a recorder (clone with CLONE_VM where the architecture allows).
Result<Recorder> start_recorder(const RecorderSetup& setup);

/// Whether recorders share their starter's memory on this build (else
/// they are forked).
bool recorder_shares_memory();

/// One message as a recorder wrote it.
struct RecordedMessage {
  std::string bytes;
  std::vector<UniqueFd> fds;
};

/// Appends one message to a recorder's file as the recorder writes it:
/// its byte count and descriptor count (32 bits each, host order), the
/// bytes, then the descriptor numbers, in one write.
Result<void> append_recorded(int log, std::string_view bytes, const std::vector<int>& fds);

/// Every whole message of a recorder's file, from its start. A
/// descriptor number that is not open in this process is dropped.
Result<std::vector<RecordedMessage>> read_recorded(int log);

}  // namespace ctx::sys
