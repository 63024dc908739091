// The mount plan: one ordered list of typed steps, from the new root to
// the last socket of /run/ctx. Pure data, made by the launcher's plan
// (launcher/plan/plan.hpp) and applied, step by step and in this order, by one
// function (launcher/sandbox/mounts.cpp, apply_mounts); `ctx-agent-run
// --dry-run` prints this list and nothing else. A static view's step says
// how it is built; the binds it makes inside are decided at launch
// (StaticBuild).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "mountspec/attrs.hpp"

namespace ctx::mountspec {

// Every step has a `target`: the place inside the new root it makes or
// changes.

/// `source` cloned onto itself: the new "/".
struct RootStep {
  std::string target = "/";
  std::string source;  ///< a host directory
  Attrs attrs;
  /// A fresh tmpfs mounted over `source` (an anchor directory whose
  /// content is never seen), not `source` itself.
  bool fresh = false;
  /// An owned child's: the host directory the source must be resolved
  /// beneath, never through a symlink ("" for an ordinary one).
  std::string beneath;
};

/// `source` (host) at `target`.
struct BindStep {
  std::string target;
  std::string source;
  Attrs attrs;
  bool recursive = false;   ///< rbind
  bool need_write = false;  ///< rw: the owner must be able to write the source
  /// An owned child's: the host directory the source must be resolved
  /// beneath, never through a symlink ("" for an ordinary one).
  std::string beneath;
  bool beneath_no_xdev = false;  ///< and never into another mount
  int line = 0;                  ///< the line in <name>.d/mount; 0 for the launcher's own
  /// A directory of a rw bind (the line's) bound onto itself so that the
  /// agent cannot rename it away with a mask below it (plan.cpp, pin_above).
  bool pin = false;
};

/// An entry of the directory a mask covers that the mask shows all the
/// same.
struct MaskKeep {
  std::string name;
  bool rw = false;        ///< as the covered directory showed it; else read-only
  bool required = false;  ///< the launch fails without it; else skipped when it is no directory
};

/// A read-only tmpfs over `target`: empty, or showing only `keep` (an
/// allow-list: docs/abi-policy.md, "session"). Each kept entry is the
/// mount the directory showed at its name (a recursive clone, taken
/// before the tmpfs covers it and never through a symlink), bound onto a
/// directory of the tmpfs; the tmpfs is sealed read-only once they are
/// in, so that nothing can be added beside them.
struct MaskStep {
  std::string target;
  Attrs attrs;
  std::string why;
  std::vector<MaskKeep> keep;
};

/// How a view step is built without FUSE (docs/view.md, "Without FUSE"):
/// a tmpfs at the step's target holding the view's directories, each entry
/// the view shows at launch bound onto it, then the tmpfs sealed. Which
/// entries is the tree's and the policy's to say at launch; every bind is
/// one of the kinds below, with its attributes, and made by the sandbox's
/// one bind (launcher/sandbox/mounts.hpp, bind_tree).
struct StaticBuild {
  std::string tmpfs_options;  ///< the tmpfs's mount data (its mode and size)
  Attrs tmpfs;                ///< the tmpfs while it is built
  Attrs sealed;               ///< the tmpfs once built
  Attrs file;                 ///< a shown file, onto an empty file of its name
  Attrs file_no_exec;         ///< a shown file the rules do not let run
  Attrs directory;            ///< a directory shown whole (rbind where the kernel locks what is below)
  Attrs tool;                 ///< the `ctx` helper at an allowed tool's name
  Attrs tool_bytes;           ///< an allowed tool's own bytes, where there is no helper
};

/// The kinds of a static view's binds, as StaticBuild names them.
enum class StaticBindKind { file, file_no_exec, directory, tool, tool_bytes };

/// The kind's name in --dry-run and in the started report ("file", ...).
std::string_view to_string(StaticBindKind k);

/// The attributes StaticBuild gives a bind of kind `k`.
const Attrs& attrs_of(const StaticBuild& b, StaticBindKind k);

/// The agent view (access/rules.hpp) at `target`: its subtree `source`,
/// relative to the CTX root ("" for the whole view).
struct ViewStep {
  std::string target;
  std::string source;
  Attrs attrs;
  int line = 0;     ///< the line in <name>.d/mount it stands for; 0 if none
  std::string why;  ///< set for a tool tier a bind brings
  /// Built at launch without FUSE; nullopt: served over FUSE, one mount.
  std::optional<StaticBuild> built;
};

/// How a view step with `attrs` is built without FUSE.
StaticBuild static_build(const Attrs& attrs);

/// A fresh file system `fstype` at `target` with `options`.
struct FsStep {
  std::string target;
  std::string fstype;   ///< "proc", "tmpfs", "devpts"
  std::string options;  ///< mount data ("mode=0755,size=64k")
  Attrs attrs;
};

/// The host's device node `source` bound at `target` (a file).
struct DevNodeStep {
  std::string target;
  std::string source;
  Attrs attrs;
};

/// `target` made a symbolic link to `link`.
struct SymlinkStep {
  std::string target;
  std::string link;
};

/// A supervisor socket bound at `target`.
struct SocketStep {
  std::string target;
  bool datagram = false;  ///< NOTIFY_SOCKET (datagram) or the control socket (stream)
};

/// `target`'s mount made read-only (`attrs`) once what is below it is done.
struct SealStep {
  std::string target;
  Attrs attrs;
};

/// One step: exactly the fields its kind uses. The variant's index is
/// the kind (StepKind).
using MountStep =
    std::variant<RootStep, BindStep, MaskStep, ViewStep, FsStep, DevNodeStep, SymlinkStep, SocketStep, SealStep>;

/// The kinds, in the variant's order: kind_of(s) is s.index().
enum class StepKind { root, bind, mask, view, fs, dev_node, symlink, socket, seal };

/// The kind of a step.
StepKind kind_of(const MountStep& s);

/// The step's name in --dry-run ("bind", "view", ...).
std::string_view to_string(StepKind k);

/// The place inside the new root the step makes or changes ("/" for root).
const std::string& target_of(const MountStep& s);

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
