// What the sandbox half tells its supervisor: typed records, one per
// message of a SOCK_SEQPACKET socketpair (sys/socket.hpp), never text the
// supervisor has to match. The sandbox's end is close-on-exec, so EOF
// means the runtime's execve succeeded (or everything in the sandbox is
// gone).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ctx::launcher {

/// The steps of the sandbox's setup, in order (docs/launcher.md).
enum class Step : std::uint8_t {
  start,           ///< before the supervisor released the sandbox
  id_maps,         ///< waiting for the id maps
  private_mounts,  ///< making the copied mounts private
  owner_ids,       ///< taking the owner's file-system ids
  root,            ///< the new root
  binds,           ///< the mount table
  masks,           ///< hidden shared spaces and sessions
  proc,            ///< a fresh /proc
  dev,             ///< the minimal /dev
  run_ctx,         ///< /run/ctx and the supervisor's sockets in it
  network,         ///< loopback
  pivot_root,      ///< switching root
  cwd,             ///< entering cwd
  identity,        ///< ids, user namespace, capabilities, no_new_privs
  terminal,        ///< the sandbox's own pty
  exec,            ///< filters and execve of the runtime
};

/// The step's name as printed in timings and logs ("binds").
std::string_view to_string(Step s);

/// One record.
struct Record {
  enum class Kind : std::uint8_t {
    timings,       ///< `detail` holds the steps' timings so far (encode_timings)
    sockets,       ///< carries the NOTIFY_SOCKET and control sockets (2 fds)
    pty,           ///< carries the master of the runtime's pty (1 fd)
    view,          ///< carries the /dev/fuse descriptor of the agent view's mount (1 fd)
    tools,         ///< carries a detached read-only clone of the CTX root: the tools `ctx tool` runs (1 fd)
    static_binds,  ///< `detail` holds binds a static agent view made at launch (encode_static_binds)
    namespaces,    ///< `detail` holds the sandbox's namespaces, as it read them itself (encode_namespaces)
    error,         ///< `step` failed with `code` (errno); `detail` says what, for people
  };
  Kind kind = Kind::timings;
  Step step = Step::start;
  int code = 0;
  std::uint32_t usec = 0;
  std::string detail;
};

/// One step's duration.
struct StepTiming {
  Step step = Step::start;
  std::uint32_t usec = 0;
};

/// Several timings as the detail of one `timings` record, and back
/// (malformed bytes are skipped).
std::string encode_timings(const StepTiming* t, std::size_t n);
std::vector<StepTiming> decode_timings(std::string_view detail);

/// One bind a static agent view made at launch: its kind's name
/// (mountspec::StaticBindKind) and its place in the sandbox.
struct BindReport {
  std::string kind;
  std::string target;
  bool operator==(const BindReport&) const = default;
};

/// Binds as the details of `static_binds` records, each at most
/// kMaxRecordSize with its header, and back (a malformed tail is skipped).
std::vector<std::string> encode_static_binds(const std::vector<BindReport>& b);
std::vector<BindReport> decode_static_binds(std::string_view detail);

/// One of the sandbox's namespaces: its name in /proc/PID/ns and its inode.
struct NamespaceReport {
  std::string name;
  unsigned long inode = 0;
  bool operator==(const NamespaceReport&) const = default;
};

/// Namespaces as the detail of one `namespaces` record ("name=inode\n"
/// each), and back (a malformed line is skipped).
std::string encode_namespaces(const std::vector<NamespaceReport>& ns);
std::vector<NamespaceReport> decode_namespaces(std::string_view detail);

/// The bytes of one message.
std::string encode(const Record& r);

/// The record of one message; nullopt for bytes no sandbox sends.
std::optional<Record> decode(std::string_view bytes);

/// Largest message a sandbox sends.
inline constexpr std::size_t kMaxRecordSize = 8192;

}  // namespace ctx::launcher
