#include "ctx/kernel_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <functional>
#include <optional>

#include "cgroup/discover.hpp"
#include "sys/file.hpp"
#include "sys/landlock.hpp"
#include "sys/mount.hpp"
#include "sys/mountinfo.hpp"
#include "sys/probe.hpp"
#include "sys/process.hpp"
#include "sys/pty.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

namespace ctx::helper {

namespace {

using State = FacilityResult::State;

// Indexes into kernel_facilities(), in the table's order.
enum Fac : std::size_t {
  kUserns,
  kOpenTree,
  kMountSetattr,
  kOpenat2,
  kClone3,
  kPidfd,
  kCloseRange,
  kCgroupKill,
  kNproc,
  kPtyPeer,
  kSeccomp,
  kLandlock,
  kFuse,
  kCount
};

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string update_to(const KernelFacility& f) { return "update the kernel to Linux " + f.since + " or later"; }

// The usual remedy: ENOSYS means the kernel lacks the call; anything else
// means something refuses it here.
std::string remedy_for(const KernelFacility& f, const Error& e) {
  if (e.code == ENOSYS || e.code == E2BIG) return update_to(f);
  return "the kernel refused it here (a container's seccomp profile or a security module?): allow it, or " +
         update_to(f);
}

FacilityResult result(std::size_t i, const Result<void>& r, std::string ok_detail = {}) {
  FacilityResult out{kernel_facilities()[i]};
  if (r) {
    out.detail = std::move(ok_detail);
    return out;
  }
  out.state = State::missing;
  out.detail = r.error().msg;
  out.remedy = remedy_for(out.facility, r.error());
  return out;
}

FacilityResult not_probed(std::size_t i, std::string why) {
  FacilityResult out{kernel_facilities()[i]};
  out.state = State::not_probed;
  out.detail = std::move(why);
  return out;
}

FacilityResult probe_userns(const ContainerView& where) {
  const bool root = ::geteuid() == 0;
  UsernsSysctls s{trim(sys::read_or_empty("/proc/sys/user", "max_user_namespaces")),
                  trim(sys::read_or_empty("/proc/sys/kernel", "unprivileged_userns_clone")),
                  trim(sys::read_or_empty("/proc/sys/kernel", "apparmor_restrict_unprivileged_userns"))};
  auto r = sys::probe_user_namespace();
  FacilityResult out = result(kUserns, r, "user.max_user_namespaces " + s.max_user_namespaces);
  if (r) return out;
  out.remedy = userns_remedy(r.error().reason, r.error().code, s, where, root);
  if (!root) out.remedy += "; without them only root (a systemd unit) can launch agents";
  out.fatal = !root;
  return out;
}

// The new mount API on a detached copy of "/" in a private mount
// namespace of a forked child. Recursive: in a user namespace the copied
// mounts are locked, and a non-recursive copy of one with mounts below
// it is EINVAL.
Result<void> mount_api(bool setattr) {
  return sys::in_forked_child([setattr]() -> Result<void> {
    CTX_TRY(sys::enter_private_mount_namespace());
    CTX_TRY_ASSIGN(UniqueFd tree, sys::clone_tree(AT_FDCWD, "/", true));
    if (setattr) return sys::set_mount_attrs(tree.get(), {true, false, false, false}, true);
    CTX_TRY_ASSIGN(UniqueFd target, sys::open(sys::at_cwd, "/tmp", sys::Open::path_only | sys::Open::directory));
    return sys::attach_tree(tree.get(), target.get());
  });
}

Result<void> openat2_in_root() {
  return sys::in_forked_child([]() -> Result<void> {
    CTX_TRY_ASSIGN(UniqueFd root, sys::open(sys::at_cwd, "/", sys::Open::directory));
    CTX_TRY_ASSIGN(UniqueFd etc, sys::open(root.get(), "etc",
                                           sys::Open::path_only | sys::Open::in_root | sys::Open::no_symlinks |
                                               sys::Open::directory));
    return {};
  });
}

// A child started with clone3(CLONE_INTO_CGROUP) into `cgroup_fd`.
Result<void> clone_into(int cgroup_fd) {
  return sys::in_forked_child([cgroup_fd]() -> Result<void> {
    CTX_TRY_ASSIGN(sys::Child c, sys::clone_child({0, cgroup_fd}));
    if (c.pid == 0) _exit(0);
    CTX_TRY(sys::wait_pid(c.pid));
    return {};
  });
}

Result<void> pidfds() {
  return sys::in_forked_child([]() -> Result<void> {
    CTX_TRY_ASSIGN(pid_t pid, sys::fork_process());
    if (pid == 0) {
      ::pause();
      _exit(0);
    }
    CTX_TRY_ASSIGN(UniqueFd fd, sys::open_pidfd(pid));
    CTX_TRY(sys::signal_pidfd(fd.get(), SIGKILL));
    std::vector<struct pollfd> fds{{fd.get(), POLLIN, 0}};
    CTX_TRY_ASSIGN(int n, sys::poll_fds(fds, 5000));
    CTX_TRY(sys::wait_pid(pid));
    if (n != 1) return fail(Error{ETIMEDOUT, "poll on a pidfd: ETIMEDOUT: not readable after its process ended"});
    return {};
  });
}

Result<void> close_range_works() {
  return sys::in_forked_child([]() -> Result<void> {
    CTX_TRY_ASSIGN(auto pipe, sys::make_pipe());
    int a = pipe.first.release(), b = pipe.second.release();
    CTX_TRY(sys::close_fd_range(static_cast<unsigned>(std::min(a, b)), static_cast<unsigned>(std::max(a, b))));
    return {};
  });
}

Result<void> pty_peer() {
  return sys::in_forked_child([]() -> Result<void> {
    CTX_TRY_ASSIGN(UniqueFd master, sys::open_pty_master("/dev/ptmx"));
    CTX_TRY_ASSIGN(UniqueFd peer, sys::open_pty_peer(master.get()));
    return {};
  });
}

// "6.18.44-x" >= "5.14".
bool release_at_least(const std::string& release, const std::string& since) {
  unsigned a = 0, b = 0, x = 0, y = 0;
  if (std::sscanf(release.c_str(), "%u.%u", &a, &b) != 2 || std::sscanf(since.c_str(), "%u.%u", &x, &y) != 2)
    return false;
  return a != x ? a > x : b >= y;
}

FacilityResult probe_nproc() {
  FacilityResult out{kernel_facilities()[kNproc]};
  auto rel = sys::kernel_release();
  if (!rel) return result(kNproc, fail(rel.error()));
  // Observable only by starting processes up to a limit: judged from the
  // release, and said so.
  out.detail = "judged from the kernel release " + *rel;
  if (!release_at_least(*rel, out.facility.since)) {
    out.state = State::missing;
    out.remedy = "a sandbox's process bound counts the owner's processes outside too: " + update_to(out.facility);
  }
  return out;
}

FacilityResult probe_landlock() {
  auto abi = sys::landlock_abi();
  if (!abi) {
    FacilityResult out = result(kLandlock, fail(abi.error()));
    out.remedy = "Landlock is off: boot with lsm=landlock,... on the kernel command line";
    return out;
  }
  FacilityResult out{kernel_facilities()[kLandlock]};
  out.detail = "ABI " + std::to_string(*abi);
  if (*abi < sys::kLandlockScopeAbi) {
    out.state = State::missing;
    out.remedy =
        "abstract unix sockets and signals cannot be scoped to the sandbox (the launch goes on with a notice): a "
        "granted network reaches the host's abstract sockets; " +
        update_to(out.facility);
  }
  return out;
}

FacilityResult probe_fuse() {
  auto r = sys::probe_open_rw("/dev/fuse");
  FacilityResult out = result(kFuse, r, "the agent view is served live over FUSE");
  if (r) return out;
  const std::string fallback =
      "launches build the agent view once at launch instead (static: it does not follow policy or tree changes; "
      "--require-view refuses); for the live view, ";
  if (r.error().code == ENOENT) {
    out.remedy = fallback + "apt-get install fuse3, or modprobe fuse";
  } else if (r.error().code == EACCES) {
    std::string mode;
    if (auto fd = sys::open(sys::at_cwd, "/dev/fuse", sys::Open::path_only))
      if (auto st = sys::stat_fd(fd->get())) {
        char m[8];
        std::snprintf(m, sizeof m, "%04o", static_cast<unsigned>(st->mode & 07777));
        mode = std::string(" is mode ") + m + ";";
      }
    out.remedy = fallback + "/dev/fuse must be read-write for you: it" + mode +
                 " mode 0666 is Debian's default: chmod 0666 /dev/fuse, and to keep it across boots a udev rule "
                 "(KERNEL==\"fuse\", MODE=\"0666\" in /etc/udev/rules.d/60-fuse.rules)";
  } else {
    out.remedy = fallback + "/dev/fuse must be read-write for you";
  }
  return out;
}

// The cgroup probes: clone3 into a temporary cgroup below the caller's
// own (removed after), and cgroup.kill in a non-root cgroup.
void probe_cgroups(std::vector<FacilityResult>& out) {
  auto table = sys::mount_table_of(sys::kCgroup2);
  auto mount = table ? cgroup::find_cgroup2(*table) : std::nullopt;
  if (!mount) {
    out[kClone3] = not_probed(kClone3, "no writable cgroup2 (none is mounted)");
    out[kCgroupKill] = not_probed(kCgroupKill, "no cgroup2 file system is mounted");
    return;
  }
  std::string own_path = cgroup::v2_path(sys::read_or_empty("/proc/self", "cgroup")).value_or("/");
  auto own_dir = cgroup::dir_of(*mount, own_path);
  auto own = own_dir ? sys::open(sys::at_cwd, *own_dir, sys::Open::directory)
                     : Result<UniqueFd>(fail(ENOENT, "no cgroup directory"));
  const std::string temp = "ctx-check-" + std::to_string(::getpid());
  std::optional<UniqueFd> probe_cg;
  if (own && sys::make_dir_at(own->get(), temp, 0755))
    if (auto fd = sys::open(own->get(), temp, sys::Open::directory | sys::Open::no_follow)) probe_cg = std::move(*fd);
  out[kClone3] =
      probe_cg ? result(kClone3, clone_into(probe_cg->get()))
               : not_probed(kClone3, "no writable cgroup2 (" + mount->mount_point + ", own cgroup " + own_path + ")");
  // The root cgroup has no cgroup.kill: look in a cgroup below it.
  std::optional<int> look;
  if (own && own_dir != mount->mount_point) look = own->get();
  if (!look && probe_cg) look = probe_cg->get();
  if (!look) {
    out[kCgroupKill] = not_probed(kCgroupKill, "no cgroup below the cgroup2 root to look in (no writable cgroup2)");
  } else if (auto st = sys::stat_at(*look, "cgroup.kill"); st && *st) {
    out[kCgroupKill] = FacilityResult{kernel_facilities()[kCgroupKill]};
  } else {
    out[kCgroupKill] = result(kCgroupKill, fail(Error{ENOENT, "cgroup.kill: ENOENT: not in the cgroup2 mount"}));
    out[kCgroupKill].remedy = update_to(kernel_facilities()[kCgroupKill]);
  }
  probe_cg.reset();
  if (own) (void)sys::remove_at(own->get(), temp, true);
}

}  // namespace

const std::vector<KernelFacility>& kernel_facilities() {
  static const std::vector<KernelFacility> all{
      {"user namespaces for unprivileged users", "3.8"},
      {"open_tree, move_mount", "5.2"},
      {"mount_setattr", "5.12"},
      {"openat2 with RESOLVE_IN_ROOT, RESOLVE_NO_SYMLINKS, RESOLVE_BENEATH", "5.6"},
      {"clone3 with CLONE_PIDFD, CLONE_INTO_CGROUP", "5.7"},
      {"pidfd_open, pidfd_send_signal, pidfd polling", "5.3"},
      {"close_range", "5.9"},
      {"cgroup.kill", "5.14"},
      {"RLIMIT_NPROC counted per user namespace (ucounts)", "5.14"},
      {"TIOCGPTPEER", "4.13"},
      {"seccomp filters", "3.5"},
      {"Landlock ABI 6 (scoped)", "6.12"},
      {"/dev/fuse read-write", "2.6.14"},
  };
  return all;
}

const char* to_string(FacilityResult::State s) {
  switch (s) {
    case State::ok: return "ok";
    case State::missing: return "missing";
    case State::not_probed: return "not probed";
  }
  return "?";
}

Finding facility_finding(const FacilityResult& r) {
  const std::string head = r.facility.name + " (Linux " + r.facility.since;
  Finding f;
  switch (r.state) {
    case State::ok:
      f.level = Finding::Level::note;
      f.text = "env ok      " + head + (r.detail.empty() ? "" : "; " + r.detail) + ")";
      break;
    case State::missing:
      f.level = r.fatal ? Finding::Level::error : Finding::Level::warning;
      f.text = "env missing " + head + "): " + r.detail + ": " + r.remedy;
      break;
    case State::not_probed:
      f.level = Finding::Level::note;
      f.text = "env skip    " + head + "): not probed: " + r.detail;
      break;
  }
  f.facility = FacilityFields{r.facility.name, to_string(r.state), r.facility.since, r.detail, r.remedy};
  return f;
}

std::vector<FacilityResult> probe_kernel_facilities(const ContainerView& where) {
  std::vector<FacilityResult> out(kCount);
  out[kUserns] = probe_userns(where);
  // Without a user namespace an unprivileged caller cannot use the mount
  // API at all: nothing to learn about the kernel there.
  if (::geteuid() != 0 && out[kUserns].state != State::ok) {
    out[kOpenTree] = not_probed(kOpenTree, "it needs a user namespace (see above)");
    out[kMountSetattr] = not_probed(kMountSetattr, "it needs a user namespace (see above)");
  } else {
    out[kOpenTree] = result(kOpenTree, mount_api(false));
    out[kMountSetattr] = result(kMountSetattr, mount_api(true));
  }
  out[kOpenat2] = result(kOpenat2, openat2_in_root());
  out[kPidfd] = result(kPidfd, pidfds());
  out[kCloseRange] = result(kCloseRange, close_range_works());
  probe_cgroups(out);
  out[kNproc] = probe_nproc();
  out[kPtyPeer] = result(kPtyPeer, pty_peer());
  out[kSeccomp] = result(kSeccomp, sys::in_forked_child([] { return sys::load_allow_all_filter(); }));
  out[kLandlock] = probe_landlock();
  out[kFuse] = probe_fuse();
  return out;
}

}  // namespace ctx::helper
