// The agent view served over FUSE (libfuse3 low-level API,
// single-threaded). One server per launch, in a process the supervisor
// forks and names ctx-view (launcher/supervisor/view_process.hpp; there is
// no ctx-view program), running with the owner's ids
// outside the sandbox, on a /dev/fuse descriptor the sandbox opened and
// mounted in its own mount namespace (so the mount is never in the host's
// table). Every request is decided by access/rules.hpp against the current
// tree and the agent's current policy; files are opened beneath the CTX
// root without following a symbolic link; the mount is read-only. No OPEN
// reaches the server: the kernel keeps a file's pages until its
// attributes (size, mtime) or its node change.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "sys/identity.hpp"
#include "sys/process.hpp"

namespace ctx::view {

/// What a server needs to know.
struct ServeOptions {
  int fuse_fd = -1;         ///< the /dev/fuse descriptor of the mount
  std::string ctx_root;     ///< host path of the CTX root
  std::string agent;        ///< whose view
  std::uint32_t owner = 0;  ///< its owner (home/<owner>), as the launch decided
  bool user_tier = false;   ///< a user agent of home/<owner>/agent (access::Viewer::user_tier)
  /// An owned child's ancestors' label types (access::Viewer::ancestors).
  std::vector<std::string> ancestors;
  std::string session = "default";
  /// The runtime's host ids (the execute bit of a tool is theirs).
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;
  /// The id maps of the user namespace the mount was made in (empty: the
  /// host's own): owners are reported as that namespace sees them.
  std::vector<sys::IdMapLine> uid_map;
  std::vector<sys::IdMapLine> gid_map;
};

/// How long the kernel may cache a name or its attributes (seconds): a
/// revoked grant is gone from the sandbox within this plus kPolicyRecheck.
inline constexpr double kCacheSeconds = 0.5;
/// (How often the agent's label and policy are read again:
/// access/fs_tree.hpp, kPolicyRecheckMs.)

/// One resource limit the server's process sets on itself.
struct ServerLimit {
  sys::Resource resource;
  std::uint64_t value;
};

/// The server's own limits, soft and hard, set before it serves: without
/// cgroup v2 controllers nothing else bounds it (docs/view.md, "Bounds").
/// It needs a few MB and fewer than a dozen descriptors (0-2, the FUSE device,
/// the CTX root, and those of one request); the address space leaves room
/// for the nodes of about two million names the kernel holds at once, and
/// beyond it the server ends and the agent is stopped as for a dead view.
/// It never starts a process nor dumps its memory. (Under AddressSanitizer,
/// sys::kAddressSanitizer, the address space is not limited.)
inline constexpr ServerLimit kServerLimits[] = {
    {sys::Resource::address_space, std::uint64_t{1} << 30},
    {sys::Resource::open_files, 64},
    {sys::Resource::processes, 0},
    {sys::Resource::core_size, 0},
};

/// Serves until the mount is gone (the sandbox's mount namespace ended)
/// or the descriptor fails. An allowed tool is served as the `ctx` helper
/// (bin/ctx) with the tool's mode bits: running it asks the supervisor,
/// which decides and records the call (docs/abi.md, "Direct calls").
Result<void> serve(const ServeOptions& opts);

/// An id as the namespace of `map` sees the host id `id`; 65534 (the
/// overflow id) when it is not mapped; `id` itself for an empty map.
std::uint32_t id_inside(const std::vector<sys::IdMapLine>& map, std::uint32_t id);

}  // namespace ctx::view
