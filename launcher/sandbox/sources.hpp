// The sources of a sandbox's mounts as the sandbox opens them: its root
// and the binds of its mount table, never through a symbolic link, with
// the checks made before they are mounted. `ctx check` opens them the
// same way (launcher/sandbox/preflight.hpp).
#pragma once

#include <string>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/plan/plan.hpp"
#include "sys/mountinfo.hpp"

namespace ctx::launcher {

/// `path` opened O_PATH without following a symbolic link in any of its
/// components; ELOOP says so for `what` ("root", "source") and names the
/// real path to use instead.
Result<UniqueFd> open_no_symlinks(const std::string& what, const std::string& path);

/// The root's host directory as the sandbox opens it (never through a
/// symbolic link; an owned child's beneath its parent's), before it is
/// mounted. A privileged launch (host_mounts: the mount table it is seen
/// in, else nullptr) takes it only from a file system of plain files
/// (mountspec/source_fs.hpp).
Result<UniqueFd> open_root_source(const mountspec::RootStep& root, const std::vector<sys::MountEntry>* host_mounts);

/// An opened bind source and whether it is a directory (its mount point
/// must be one too).
struct BindSource {
  UniqueFd fd;
  bool dir = false;
};

/// A bind's source as the sandbox opens it, with the checks made before
/// it is mounted: never through a symbolic link, reachable and readable
/// (writable for rw) by the owner, and for a privileged launch
/// (host_mounts: the mount table it is seen in, else nullptr) only from
/// file systems of plain files, submounts of an rbind included
/// (mountspec/source_fs.hpp).
Result<BindSource> open_bind_source(const mountspec::BindStep& b, const std::vector<sys::MountEntry>* host_mounts);

/// "<name>.d/mount:<line>: <source> -> <target>", what a bind's errors
/// are said with.
std::string mount_line_context(const LaunchPlan& plan, const mountspec::BindStep& m);

}  // namespace ctx::launcher
