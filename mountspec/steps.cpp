#include "mountspec/steps.hpp"

#include "base/path.hpp"

namespace ctx::mountspec {

static_assert(std::variant_size_v<MountStep> == static_cast<std::size_t>(StepKind::seal) + 1);
static_assert(
    std::is_same_v<std::variant_alternative_t<static_cast<std::size_t>(StepKind::view), MountStep>, ViewStep>);
static_assert(
    std::is_same_v<std::variant_alternative_t<static_cast<std::size_t>(StepKind::seal), MountStep>, SealStep>);

StepKind kind_of(const MountStep& s) { return static_cast<StepKind>(s.index()); }

std::string_view to_string(StepKind k) {
  switch (k) {
    case StepKind::root: return "root";
    case StepKind::bind: return "bind";
    case StepKind::mask: return "mask";
    case StepKind::view: return "view";
    case StepKind::fs: return "fs";
    case StepKind::dev_node: return "dev_node";
    case StepKind::symlink: return "symlink";
    case StepKind::socket: return "socket";
    case StepKind::seal: return "seal";
  }
  return "?";
}

std::string_view to_string(StaticBindKind k) {
  switch (k) {
    case StaticBindKind::file: return "file";
    case StaticBindKind::file_no_exec: return "file_no_exec";
    case StaticBindKind::directory: return "directory";
    case StaticBindKind::tool: return "tool";
    case StaticBindKind::tool_bytes: return "tool_bytes";
  }
  return "?";
}

const Attrs& attrs_of(const StaticBuild& b, StaticBindKind k) {
  switch (k) {
    case StaticBindKind::file: return b.file;
    case StaticBindKind::file_no_exec: return b.file_no_exec;
    case StaticBindKind::directory: return b.directory;
    case StaticBindKind::tool: return b.tool;
    case StaticBindKind::tool_bytes: return b.tool_bytes;
  }
  return b.file;
}

// Everything the view shows is read-only, without set-id or devices, and
// runs only where the step allows it; the tmpfs holds only names, and is
// small (a name costs an inode) and never runnable.
StaticBuild static_build(const Attrs& attrs) {
  Attrs ro = attrs;
  ro.rdonly = ro.nosuid = ro.nodev = true;
  Attrs no_exec = ro;
  no_exec.noexec = true;
  return StaticBuild{.tmpfs_options = "mode=0755,size=1m,nr_inodes=16384",
                     .tmpfs = {.nosuid = true, .nodev = true, .noexec = true},
                     .sealed = {.rdonly = true, .nosuid = true, .nodev = true, .noexec = true},
                     .file = ro,
                     .file_no_exec = no_exec,
                     .directory = ro,
                     .tool = ro,
                     .tool_bytes = no_exec};
}

const std::string& target_of(const MountStep& s) {
  return std::visit([](const auto& k) -> const std::string& { return k.target; }, s);
}

void append_fixed_steps(MountPlan& plan, const std::string& shm_size, const std::string& run_dir,
                        const std::string& notify_path, const std::string& control_path) {
  append_proc_and_dev(plan, shm_size);
  plan.push_back(FsStep{run_dir, "tmpfs", "mode=0755,size=4k", {.nosuid = true, .nodev = true, .noexec = true}});
  plan.push_back(SocketStep{notify_path, true});
  plan.push_back(SocketStep{control_path, false});
  plan.push_back(SealStep{run_dir, {.rdonly = true, .nosuid = true, .nodev = true, .noexec = true}});
}

void append_proc_and_dev(MountPlan& plan, const std::string& shm_size) {
  plan.push_back(FsStep{"/proc", "proc", "", {.nosuid = true, .nodev = true, .noexec = true}});
  plan.push_back(FsStep{"/dev", "tmpfs", "mode=0755,size=64k", {.nosuid = true, .noexec = true}});
  // An unprivileged user namespace cannot mknod: the harmless nodes are
  // bound from the host.
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"}) {
    const std::string path = std::string("/dev/") + node;
    plan.push_back(DevNodeStep{path, path, {.nosuid = true, .noexec = true}});
  }
  plan.push_back(FsStep{"/dev/pts", "devpts", "newinstance,ptmxmode=0666,mode=0620", {.nosuid = true, .noexec = true}});
  for (auto [target, link] : {std::pair{"/dev/ptmx", "pts/ptmx"}, std::pair{"/dev/fd", "/proc/self/fd"},
                              std::pair{"/dev/stdin", "/proc/self/fd/0"}, std::pair{"/dev/stdout", "/proc/self/fd/1"},
                              std::pair{"/dev/stderr", "/proc/self/fd/2"}})
    plan.push_back(SymlinkStep{target, link});
  // Bounded: a tmpfs without a size may take half the host's memory.
  plan.push_back(FsStep{"/dev/shm", "tmpfs", "mode=1777,size=" + shm_size, {.nosuid = true, .nodev = true}});
  plan.push_back(SealStep{"/dev", {.rdonly = true, .nosuid = true, .noexec = true}});
}

std::vector<std::string> mount_points(const MountPlan& plan) {
  std::vector<std::string> out;
  const RootStep* root = plan.empty() ? nullptr : std::get_if<RootStep>(&plan.front());
  for (const auto& s : plan) {
    switch (kind_of(s)) {
      case StepKind::bind: {
        const auto& b = std::get<BindStep>(s);
        out.push_back(b.target);
        // An rbind brings what is mounted below its source; the plan knows
        // one such mount: the new root, when the source holds it.
        if (b.recursive && root != nullptr && path_is_at_or_under(root->source, b.source) && root->source != b.source)
          out.push_back(path_join(b.target, path_suffix(root->source, b.source)));
        break;
      }
      case StepKind::mask: {
        // A list of the agent's sessions: its tmpfs and each entry it
        // keeps (one that is no directory at launch is left out there).
        const auto& k = std::get<MaskStep>(s);
        out.push_back(k.target);
        for (const auto& e : k.keep) out.push_back(path_join(k.target, e.name));
        break;
      }
      case StepKind::root:
      case StepKind::fs:
      case StepKind::dev_node:
      case StepKind::view: out.push_back(target_of(s)); break;
      case StepKind::symlink:
      case StepKind::socket:
      case StepKind::seal: break;
    }
  }
  return out;
}

}  // namespace ctx::mountspec
