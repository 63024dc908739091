#include "mountspec/steps.hpp"

#include "base/path.hpp"

namespace ctx::mountspec {

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

namespace {

MountStep fs(std::string target, std::string fstype, Attrs attrs, std::string options) {
  MountStep s;
  s.kind = StepKind::fs;
  s.target = std::move(target);
  s.fstype = std::move(fstype);
  s.attrs = attrs;
  s.options = std::move(options);
  return s;
}

MountStep step(StepKind kind, std::string target) {
  MountStep s;
  s.kind = kind;
  s.target = std::move(target);
  return s;
}

}  // namespace

void append_fixed_steps(MountPlan& plan, const std::string& shm_size, const std::string& run_dir,
                        const std::string& notify_path, const std::string& control_path) {
  append_proc_and_dev(plan, shm_size);
  plan.push_back(fs(run_dir, "tmpfs", {.nosuid = true, .nodev = true, .noexec = true}, "mode=0755,size=4k"));
  MountStep notify = step(StepKind::socket, notify_path);
  notify.datagram = true;
  plan.push_back(std::move(notify));
  plan.push_back(step(StepKind::socket, control_path));
  MountStep run_seal = step(StepKind::seal, run_dir);
  run_seal.attrs = {.rdonly = true, .nosuid = true, .nodev = true, .noexec = true};
  plan.push_back(std::move(run_seal));
}

void append_proc_and_dev(MountPlan& plan, const std::string& shm_size) {
  plan.push_back(fs("/proc", "proc", {.nosuid = true, .nodev = true, .noexec = true}, ""));
  plan.push_back(fs("/dev", "tmpfs", {.nosuid = true, .noexec = true}, "mode=0755,size=64k"));
  // An unprivileged user namespace cannot mknod: the harmless nodes are
  // bound from the host.
  for (const char* node : {"null", "zero", "full", "random", "urandom", "tty"}) {
    MountStep n = step(StepKind::dev_node, std::string("/dev/") + node);
    n.source = n.target;
    n.attrs = {.nosuid = true, .noexec = true};
    plan.push_back(std::move(n));
  }
  plan.push_back(fs("/dev/pts", "devpts", {.nosuid = true, .noexec = true}, "newinstance,ptmxmode=0666,mode=0620"));
  for (auto [target, link] : {std::pair{"/dev/ptmx", "pts/ptmx"}, std::pair{"/dev/fd", "/proc/self/fd"},
                              std::pair{"/dev/stdin", "/proc/self/fd/0"}, std::pair{"/dev/stdout", "/proc/self/fd/1"},
                              std::pair{"/dev/stderr", "/proc/self/fd/2"}}) {
    MountStep l = step(StepKind::symlink, target);
    l.link = link;
    plan.push_back(std::move(l));
  }
  // Bounded: a tmpfs without a size may take half the host's memory.
  plan.push_back(fs("/dev/shm", "tmpfs", {.nosuid = true, .nodev = true}, "mode=1777,size=" + shm_size));
  MountStep dev_seal = step(StepKind::seal, "/dev");
  dev_seal.attrs = {.rdonly = true, .nosuid = true, .noexec = true};
  plan.push_back(std::move(dev_seal));
}

std::vector<std::string> mount_points(const MountPlan& plan) {
  std::vector<std::string> out;
  for (const auto& s : plan) {
    switch (s.kind) {
      case StepKind::bind:
        out.push_back(s.target);
        // An rbind brings what is mounted below its source; the plan knows
        // one such mount: the new root, when the source holds it.
        if (s.recursive && !plan.empty() && plan.front().kind == StepKind::root &&
            path_is_at_or_under(plan.front().source, s.source) && plan.front().source != s.source)
          out.push_back(path_join(s.target, path_suffix(plan.front().source, s.source)));
        break;
      case StepKind::root:
      case StepKind::mask:
      case StepKind::fs:
      case StepKind::dev_node:
      case StepKind::view: out.push_back(s.target); break;
      case StepKind::symlink:
      case StepKind::socket:
      case StepKind::seal: break;
    }
  }
  return out;
}

}  // namespace ctx::mountspec
