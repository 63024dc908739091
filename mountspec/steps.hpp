// The mount plan: one ordered list of typed steps, from the new root to
// the last socket of /run/ctx. Pure data, made by the launcher's plan
// (launcher/plan/plan.hpp) and applied, step by step and in this order, by one
// function (launcher/sandbox/sandbox.cpp); `ctx-agent-run --dry-run` prints this
// list and nothing else.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "mountspec/attrs.hpp"

namespace ctx::mountspec {

enum class StepKind {
  root,      ///< `source` cloned onto itself: the new "/"
  bind,      ///< `source` (host) at `target`, `recursive` for rbind
  mask,      ///< an empty read-only tmpfs over `target` (`why`)
  view,      ///< the agent view (access/rules.hpp) at `target`: its subtree `source`, relative to the CTX root
  fs,        ///< a fresh file system `fstype` at `target` with `options`
  dev_node,  ///< the host's device node `source` bound at `target` (a file)
  symlink,   ///< `target` made a symbolic link to `link`
  socket,    ///< a supervisor socket bound at `target` (`datagram` or listening)
  seal,      ///< `target`'s mount made read-only once what is below it is done
};

/// The step's name in --dry-run ("bind", "view", ...).
std::string_view to_string(StepKind k);

struct MountStep {
  StepKind kind = StepKind::bind;
  std::string target;  ///< inside the new root ("/" for root)
  std::string source;  ///< root, bind, dev_node: a host path; view: CTX-root-relative
  Attrs attrs;
  bool recursive = false;   ///< bind: rbind
  bool need_write = false;  ///< bind rw: the owner must be able to write the source
  /// root: a fresh tmpfs mounted over `source` (an anchor directory whose
  /// content is never seen), not `source` itself.
  bool fresh = false;
  /// An owned child's bind or root: the host directory the source must be
  /// resolved beneath, never through a symlink ("" for an ordinary one).
  std::string beneath;
  bool beneath_no_xdev = false;  ///< and never into another mount
  int line = 0;                  ///< bind: the line in <name>.d/mount
  std::string why;               ///< mask; view: set for a tool tier a bind brings
  std::string fstype;            ///< fs: "proc", "tmpfs", "devpts"
  std::string options;           ///< fs: mount data ("mode=0755,size=64k")
  std::string link;              ///< symlink: what it points to
  bool datagram = false;         ///< socket: NOTIFY_SOCKET (datagram) or the control socket (stream)
};

using MountPlan = std::vector<MountStep>;

/// Appends what every sandbox gets after its table: a fresh /proc; a
/// minimal /dev (a tmpfs, the harmless device nodes bound from the host,
/// a devpts instance of its own, ptmx, a sized /dev/shm, the fd links,
/// sealed read-only); /run/ctx (a tmpfs with the NOTIFY_SOCKET and the
/// supervisor's control socket, sealed read-only).
void append_fixed_steps(MountPlan& plan, const std::string& shm_size, const std::string& run_dir,
                        const std::string& notify_path, const std::string& control_path);

/// The first part of append_fixed_steps: a fresh /proc and the minimal
/// /dev, without /run/ctx (a model's sandbox has no supervisor socket).
void append_proc_and_dev(MountPlan& plan, const std::string& shm_size);

/// Every mount point the plan makes, in order: what /proc/self/mountinfo
/// inside the sandbox lists, except what an rbind brings along from the
/// host (the new root itself, when an rbind's source holds it, is
/// counted).
std::vector<std::string> mount_points(const MountPlan& plan);

}  // namespace ctx::mountspec
