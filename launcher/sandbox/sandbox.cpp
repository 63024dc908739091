#include "launcher/sandbox/sandbox.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <csignal>

#include "base/path.hpp"
#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/endpoint_start.hpp"
#include "launcher/sandbox/preflight.hpp"
#include "launcher/sandbox/static_view.hpp"
#include "mountspec/source_fs.hpp"
#include "sys/fault.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"
#include "sys/landlock.hpp"
#include "sys/mount.hpp"
#include "sys/mountinfo.hpp"
#include "sys/namespace.hpp"
#include "sys/process.hpp"
#include "sys/pty.hpp"
#include "sys/resolve.hpp"
#include "sys/seccomp.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

// The sandbox's side of the channel: step timings (kept here and sent in
// one record, so that the supervisor is not woken once per step while the
// sandbox works), descriptors, and the one error that ends the setup, each
// a typed record (channel.hpp) naming the step it belongs to.
class Reporter {
 public:
  explicit Reporter(int fd) : fd_(fd), last_(sys::now_us()) {}
  /// The current step is done; `next` begins.
  void enter(Step next) {
    std::uint64_t now = sys::now_us();
    if (count_ < kMaxSteps) steps_[count_++] = {current_, static_cast<std::uint32_t>(now - last_)};
    last_ = now;
    current_ = next;
    if constexpr (sys::kFaultInjection) inject();
  }
  Step current() const { return current_; }
  int fd() const { return fd_; }
  /// After the channel moved to another descriptor (exec_runtime).
  void set_fd(int fd) { fd_ = fd; }
  /// Sends the timings gathered so far.
  void flush() {
    if (count_ == 0) return;
    Record r{Record::Kind::timings, current_, 0, 0, encode_timings(steps_.data(), count_)};
    send(r, {});
    count_ = 0;
  }
  void send(const Record& r, const std::vector<int>& fds) const {
    if (fd_ >= 0) (void)sys::send_message(fd_, encode(r), fds);
  }

 private:
  static constexpr std::size_t kMaxSteps = 32;
  int fd_;
  Step current_ = Step::id_maps;
  std::uint64_t last_;
  std::array<StepTiming, kMaxSteps> steps_{};
  std::size_t count_ = 0;

  // Tests only (sys/fault.hpp): the step just entered fails, or its
  // process is killed, when $CTX_FAULT names it.
  void inject() {
    std::string point = current_ == Step::exec ? "runtime.exec" : "sandbox." + std::string(to_string(current_));
    if (auto f = sys::fault_at(point); !f) {
      flush();
      send({Record::Kind::error, current_, f.error().code, 0, f.error().msg}, {});
      _exit(kExitLaunchFailed);
    }
  }
};

[[noreturn]] void die(Reporter& rep, const Error& e, int code = kExitLaunchFailed) {
  rep.flush();
  rep.send({Record::Kind::error, rep.current(), e.code, 0, e.msg}, {});
  _exit(code);
}

// The runtime's pty in an interactive launch: its peer, and which of 0-2
// were the caller's terminal (those get the peer).
struct Terminal {
  UniqueFd peer;
  std::vector<int> fds;
};

std::string rel_of(const std::string& inner) { return inner == "/" ? std::string() : inner.substr(1); }

// Opens (creating when missing) the mount point `inner` below rootfd
// without following any symlink: every component is resolved with
// RESOLVE_IN_ROOT|RESOLVE_NO_SYMLINKS, and a missing one is made with
// mkdirat on the already-resolved parent.
Result<UniqueFd> mount_point(int rootfd, const std::string& inner, bool directory) {
  std::string rel = rel_of(inner);
  auto existing = sys::open_in_root(rootfd, rel, directory);
  if (existing || existing.error().code != ENOENT) return existing;
  std::string done;
  std::size_t start = 0;
  while (true) {
    std::size_t slash = rel.find('/', start);
    bool last = slash == std::string::npos;
    std::string comp = rel.substr(start, last ? std::string::npos : slash - start);
    CTX_TRY_ASSIGN(UniqueFd parent, sys::open_in_root(rootfd, done, true));
    if (last && !directory) {
      CTX_TRY(sys::make_file_at(parent.get(), comp, 0644));
    } else {
      CTX_TRY(sys::make_dir_at(parent.get(), comp, 0755));
    }
    done = done.empty() ? comp : done + "/" + comp;
    if (last) break;
    start = slash + 1;
  }
  return sys::open_in_root(rootfd, rel, directory);
}

// An owned child's source, resolved beneath the directory it derives
// from without symlinks (and without crossing into another mount when the
// parent's bind is non-recursive).
// A root or a table's source is never reached through a symbolic link: an
// agent can write in its home (where its root lies by default) and in its
// rw binds, and a link planted there would choose its next launch's root
// or mounts (the owner's home, the durable CTX tree).
Result<UniqueFd> open_no_symlinks(const std::string& what, const std::string& path) {
  auto fd = sys::open_path_no_symlinks(path);
  if (!fd && fd.error().code == ELOOP)
    return fail(Error{ELOOP, what + " " + path +
                                 ": ELOOP: reaches through a symbolic link, which a launch never follows (a link in "
                                 "a directory the agent can write would choose its next launch's mounts); name the "
                                 "real path (realpath " +
                                 path + ")"});
  return fd;
}

Result<UniqueFd> open_source(const MountStep& b) {
  // The parent mount's own source is the parent's as configured.
  if (b.beneath.empty() || b.source == b.beneath) return open_no_symlinks("source", b.source);
  if (!path_is_at_or_under(b.source, b.beneath))
    return fail(Error{EACCES, "source " + b.source + ": EACCES: not below " + b.beneath});
  CTX_TRY_ASSIGN(UniqueFd top, open_no_symlinks("source", b.beneath));
  auto src = sys::open_path_beneath(top.get(), std::string(path_suffix(b.source, b.beneath)), b.beneath_no_xdev);
  if (!src && src.error().code == ELOOP)
    return fail(Error{EACCES, "source " + b.source + ": EACCES: reaches through a symbolic link below " + b.beneath +
                                  ", which an owned child's mount never follows"});
  if (!src && src.error().code == EXDEV)
    return fail(Error{EACCES, "source " + b.source + ": EACCES: lies on another mount than " + b.beneath +
                                  ", which the parent binds without its submounts; the parent does not see it"});
  return src;
}

}  // namespace

Result<UniqueFd> open_bind_source(const MountStep& b, const std::vector<sys::MountEntry>* host_mounts) {
  // The source is opened with the owner's credentials (the caller's, or
  // the fs ids set for a privileged launch), so it must be reachable by
  // the owner; reading (and for rw, writing) it must be allowed too.
  CTX_TRY_ASSIGN(UniqueFd src, open_source(b));
  if (host_mounts != nullptr) {
    CTX_TRY_ASSIGN(std::string real, sys::fd_path(src.get()));
    if (auto issue = mountspec::source_fs_issue(mountspec::SourceRole::bind, real, b.recursive, *host_mounts))
      return fail(Error{EACCES, *issue});
  }
  CTX_TRY_ASSIGN(sys::FileStat st, sys::stat_fd(src.get()));
  bool dir = S_ISDIR(st.mode);
  int need = R_OK | (dir ? X_OK : 0) | (b.need_write ? W_OK : 0);
  if (auto r = sys::access_fd(src.get(), need); !r)
    return fail(Error{EACCES, "source " + b.source + ": EACCES: the owner may not " +
                                  (b.need_write ? "read and write" : "read") + " it"});
  return src;
}

std::string mount_line_context(const LaunchPlan& plan, const MountStep& m) {
  return m.line > 0 ? plan.name + ".d/mount:" + std::to_string(m.line) + ": " + m.source + " -> " + m.target
                    : m.source + " -> " + m.target;
}

namespace {

// host_mounts: the mount table the sources are seen in, for a privileged
// launch (nullptr otherwise), which binds only file systems of plain files.
Result<void> bind_one(int rootfd, const MountStep& b, const std::vector<sys::MountEntry>* host_mounts) {
  // The source is opened with the owner's credentials (the caller's, or
  // the fs ids set for a privileged launch), so it must be reachable by
  // the owner; reading (and for rw, writing) it must be allowed too.
  CTX_TRY_ASSIGN(UniqueFd src, open_bind_source(b, host_mounts));
  CTX_TRY_ASSIGN(sys::FileStat st, sys::stat_fd(src.get()));
  bool dir = S_ISDIR(st.mode);
  auto cloned = sys::clone_tree(src.get(), "", b.recursive);
  // In a user namespace the mounts below the source are locked: a
  // non-recursive bind would uncover what they cover, so the kernel
  // refuses it (EINVAL from open_tree).
  if (!cloned && cloned.error().code == EINVAL && !b.recursive)
    return fail(Error{EINVAL, "source " + b.source +
                                  ": EINVAL: has mounts below it that a non-recursive bind would "
                                  "uncover, which the kernel refuses in a user namespace; use rbind"});
  if (!cloned) return fail(cloned.error());
  UniqueFd tree = std::move(*cloned);
  // Attributes are set while the tree is still detached: there is no
  // moment in which the sandbox could see it writable.
  CTX_TRY(sys::set_mount_attrs(tree.get(), b.attrs, b.recursive));
  CTX_TRY_ASSIGN(UniqueFd target, mount_point(rootfd, b.target, dir));
  CTX_TRY(sys::attach_tree(tree.get(), target.get()));
  return {};
}

Result<void> mask_one(int rootfd, const MountStep& m) {
  CTX_TRY_ASSIGN(UniqueFd target, sys::open_in_root(rootfd, rel_of(m.target), true));
  CTX_TRY(sys::mount_fresh("tmpfs", target.get(), MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=4k"));
  return {};
}

// mount(2) flags of a fresh file system from the plan's attributes.
unsigned long fs_flags(const mountspec::Attrs& a) {
  unsigned long f = 0;
  if (a.rdonly) f |= MS_RDONLY;
  if (a.nosuid) f |= MS_NOSUID;
  if (a.nodev) f |= MS_NODEV;
  if (a.noexec) f |= MS_NOEXEC;
  return f;
}

}  // namespace

Result<UniqueFd> open_root_source(const MountStep& r, const std::vector<sys::MountEntry>* host_mounts) {
  UniqueFd root_dir;
  if (r.beneath.empty()) {
    auto d = open_no_symlinks("root", r.source);
    if (!d && d.error().code == ENOENT)
      return fail(
          Error{ENOENT, "root " + r.source +
                            ": ENOENT: no such directory; create it, with the merged-/usr links (ln -s usr/bin " +
                            r.source + "/bin, and likewise sbin, lib, lib64)"});
    if (!d) return fail(d.error());
    root_dir = std::move(*d);
    CTX_TRY_ASSIGN(sys::FileStat st, sys::stat_fd(root_dir.get()));
    if (!S_ISDIR(st.mode)) return fail(Error{ENOTDIR, "root " + r.source + ": ENOTDIR: not a directory"});
  } else {
    CTX_TRY_ASSIGN(UniqueFd top, open_no_symlinks("root", r.beneath));
    auto d = sys::open_path_beneath(top.get(), std::string(path_suffix(r.source, r.beneath)), false);
    if (!d) return fail(d.error().with_context("root " + r.source));
    root_dir = std::move(*d);
  }
  if (host_mounts != nullptr) {
    CTX_TRY_ASSIGN(std::string real, sys::fd_path(root_dir.get()));
    if (auto issue = mountspec::source_fs_issue(mountspec::SourceRole::root, real, false, *host_mounts))
      return fail(Error{EACCES, *issue});
  }
  return root_dir;
}

namespace {

// The new root: `source` cloned onto itself (pivot_root needs a mount of
// its own), an owned child's never through a symlink below the CTX root.
// Returns the attached tree, the anchor of every later path. host_mounts
// as for bind_one.
Result<UniqueFd> make_root(const MountStep& r, const std::vector<sys::MountEntry>* host_mounts) {
  if (r.fresh) {
    // A tmpfs over the anchor in this mount namespace: what the anchor
    // holds, or is given later on the host, is never seen.
    CTX_TRY_ASSIGN(UniqueFd anchor, open_no_symlinks("root", r.source));
    CTX_TRY_ASSIGN(UniqueFd dir, sys::open_dir_beneath(anchor.get(), "."));
    CTX_TRY_CTX(sys::mount_fresh("tmpfs", dir.get(), fs_flags(r.attrs), "mode=0755,size=1m"), "root " + r.source);
    return open_no_symlinks("root", r.source);
  }
  CTX_TRY_ASSIGN(UniqueFd root_dir, open_root_source(r, host_mounts));
  CTX_TRY_ASSIGN(UniqueFd root, sys::clone_tree(root_dir.get(), "", false));
  CTX_TRY_CTX(sys::set_mount_attrs(root.get(), r.attrs, false), "root " + r.source);
  CTX_TRY_CTX(sys::attach_tree(root.get(), root_dir.get()), "root " + r.source);
  return root;
}

// A host device node, bound onto an empty file of the same name.
Result<void> bind_dev_node(int rootfd, const MountStep& n) {
  CTX_TRY_ASSIGN(UniqueFd point, mount_point(rootfd, n.target, false));
  CTX_TRY_ASSIGN(UniqueFd tree, sys::clone_tree(AT_FDCWD, n.source, false));
  CTX_TRY(sys::set_mount_attrs(tree.get(), n.attrs, false));
  return sys::attach_tree(tree.get(), point.get());
}

// A supervisor socket: bound here, in the sandbox's own mount namespace,
// so it never has a name anywhere else, not for an instant; anyone in the
// sandbox may use it (iso uid runs as another uid than the owner it was
// bound as), and the supervisor checks that each peer is in the sandbox.
Result<UniqueFd> bind_socket(int rootfd, const MountStep& s) {
  const std::string dir(path_dirname(s.target));
  const std::string leaf(path_basename(s.target));
  CTX_TRY_ASSIGN(UniqueFd d, sys::open_in_root(rootfd, rel_of(dir), true));
  Result<UniqueFd> sock =
      s.datagram ? sys::bind_datagram_at(d.get(), leaf, s.target) : sys::listen_unix_at(d.get(), leaf, s.target);
  if (!sock) return fail(sock.error());
  CTX_TRY(sys::chmod_at(d.get(), leaf, 0666));
  return std::move(*sock);
}

// The agent view. Served over FUSE: its one mount is made at the first
// step, the /dev/fuse descriptor goes to the supervisor, which starts the
// server on it, and no copy stays here; lookups through the mount wait for
// that server. Static (plan.static_view): each step is built at once
// (launcher/sandbox/static_view.hpp).
class ViewMount {
 public:
  ViewMount(UniqueFd fuse, const LaunchPlan& plan) : fuse_(std::move(fuse)), plan_(plan) {}
  // One step: the view's subtree m.source (the whole view for "") at
  // m.target.
  Result<void> attach(int rootfd, const MountStep& m, const Reporter& rep) {
    if (plan_.static_view) {
      if (!static_) {
        CTX_TRY_ASSIGN(StaticView s, StaticView::open(plan_));
        static_.emplace(std::move(s));
      }
      if (!static_->shows(m.source)) return absent(rootfd, m);
      CTX_TRY(mount_point(rootfd, m.target, true));
      return static_->build(rootfd, m.target, m.source, m.attrs);
    }
    if (!mnt_.valid()) {
      if (!fuse_.valid()) return fail(Error{EPROTO, "no /dev/fuse descriptor for the agent view"});
      CTX_TRY_ASSIGN(sys::Creds me, sys::current_creds());
      CTX_TRY_ASSIGN(mnt_, sys::mount_fuse(fuse_.get(), me.uid, me.gid));
      rep.send({Record::Kind::view, rep.current(), 0, 0, {}}, {fuse_.get()});
      fuse_.reset();
    }
    auto tree = sys::clone_tree(mnt_.get(), m.source, false);
    if (!tree && tree.error().code == ENOENT && !m.source.empty()) return absent(rootfd, m);
    if (!tree) return fail(tree.error());
    CTX_TRY(sys::set_mount_attrs(tree->get(), m.attrs, false));
    CTX_TRY_ASSIGN(UniqueFd target, mount_point(rootfd, m.target, true));
    return sys::attach_tree(tree->get(), target.get());
  }

 private:
  // A step whose subtree the view does not have. A table line's is
  // refused. A tool tier under a bind (`why` says so) is skipped when
  // nothing is there either (a shared space without tool/), and refused
  // when something is: the durable tier must never show.
  Result<void> absent(int rootfd, const MountStep& m) const {
    if (m.why.empty())
      return fail(Error{EACCES, "EACCES: " + plan_.name + "'s agent view has no " + m.source +
                                    ": it shows an agent only its own home, its tiers' allowed entries and the "
                                    "spaces it may read (docs/view.md)"});
    auto there = sys::open_in_root(rootfd, rel_of(m.target), false);
    if (!there && there.error().code == ENOENT) return {};
    return fail(Error{EACCES, "EACCES: the agent view has no " + m.source + " to show at " + m.target});
  }

  UniqueFd fuse_;
  const LaunchPlan& plan_;
  UniqueFd mnt_;
  std::optional<StaticView> static_;
};

// The tools `ctx tool` runs: the supervisor decides each call and hands
// the runtime a descriptor of the tool opened beneath this tree (never a
// path it could reach otherwise). A recursive clone of the CTX root made
// read-only, nosuid and nodev while detached, so that a descriptor of a
// tool reopened through /proc can neither write nor chmod the durable
// file, even for an agent that runs as the tool's owner. It is attached
// nowhere: no path in the sandbox reaches it.
Result<void> send_tool_tree(const LaunchPlan& plan, const Reporter& rep) {
  CTX_TRY_ASSIGN(UniqueFd dir, sys::open_path(plan.ctx_root, O_PATH | O_DIRECTORY));
  CTX_TRY_ASSIGN(UniqueFd tree, sys::clone_tree(dir.get(), "", true));
  CTX_TRY(sys::set_mount_attrs(tree.get(), {.rdonly = true, .nosuid = true, .nodev = true}, true));
  rep.send({Record::Kind::tools, rep.current(), 0, 0, {}}, {tree.get()});
  return {};
}

// Which setup step of the channel's timings a mount step belongs to.
Step timing_step(const MountStep& m) {
  if (path_is_at_or_under(m.target, "/dev")) return Step::dev;
  if (path_is_at_or_under(m.target, kNotifyDir)) return Step::run_ctx;
  switch (m.kind) {
    case StepKind::root: return Step::root;
    case StepKind::bind:
    case StepKind::view: return Step::binds;
    case StepKind::mask: return Step::masks;
    case StepKind::fs:
    case StepKind::dev_node:
    case StepKind::symlink:
    case StepKind::socket:
    case StepKind::seal: return Step::proc;
  }
  return Step::proc;
}

// Why: in a user namespace the kernel mounts a new procfs only where an
// existing one is fully visible (fs/namespace.c, mnt_already_visible), and
// container engines cover parts of /proc by default. The launch stops
// here: an agent never runs without its own /proc.
Error fresh_fs_error(const MountStep& m, Error e) {
  if (m.fstype == "proc" && e.code == EPERM)
    e.msg +=
        ": the kernel mounts a new procfs in a user namespace only where /proc is fully visible, and here part of it "
        "is covered (a container engine masks it by default): the launch is refused rather than run without the "
        "sandbox's own /proc; `ctx check --env` names the engine option that unmasks it";
  return e;
}

// Why: container engines' default seccomp profiles allow sethostname only
// to a container holding CAP_SYS_ADMIN, whatever namespace it would change.
Error hostname_error(Error e) {
  if (e.code == EPERM)
    e.msg +=
        ": a seccomp filter refuses it (a container engine's default profile does): the launch is refused; `ctx "
        "check --env` names the profile to run with";
  return e;
}

// The one function that makes the sandbox's mounts: the plan's steps, in
// order. The sockets of /run/ctx go to the supervisor over the channel.
Result<UniqueFd> apply_mounts(const LaunchPlan& plan, Reporter& rep, UniqueFd fuse) {
  UniqueFd root;
  ViewMount view(std::move(fuse), plan);
  if (std::any_of(plan.mounts.begin(), plan.mounts.end(), [](const MountStep& m) { return m.kind == StepKind::view; }))
    CTX_TRY_CTX(send_tool_tree(plan, rep), "the tools of " + plan.ctx_root);
  // A privileged launch takes its root and bind sources only from file
  // systems of plain files (mountspec/source_fs.hpp): the table they are
  // seen in, read once.
  std::optional<std::vector<sys::MountEntry>> host_mounts;
  if (plan.ids.privileged) {
    CTX_TRY_ASSIGN(host_mounts, sys::read_mountinfo());
  }
  const std::vector<sys::MountEntry>* seen_in = host_mounts ? &*host_mounts : nullptr;
  std::vector<UniqueFd> sockets;
  for (const MountStep& m : plan.mounts) {
    if (Step t = timing_step(m); t != rep.current()) rep.enter(t);
    switch (m.kind) {
      case StepKind::root: {
        auto r = make_root(m, seen_in);
        if (!r) return fail(m.fresh ? r.error() : r.error().with_context(plan.name + ".d/root"));
        root = std::move(*r);
        break;
      }
      case StepKind::bind: {
        auto r = bind_one(root.get(), m, seen_in);
        if (!r) return fail(r.error().with_context(mount_line_context(plan, m)));
        break;
      }
      case StepKind::view: {
        auto r = view.attach(root.get(), m, rep);
        if (!r && m.line > 0)
          return fail(r.error().with_context(plan.name + ".d/mount:" + std::to_string(m.line) + ": the agent view at " +
                                             m.target));
        if (!r) return fail(r.error().with_context("the agent view at " + m.target));
        break;
      }
      case StepKind::mask: CTX_TRY_CTX(mask_one(root.get(), m), "masking " + m.target + " (" + m.why + ")"); break;
      case StepKind::fs: {
        CTX_TRY_ASSIGN(UniqueFd point, mount_point(root.get(), m.target, true));
        auto r = sys::mount_fresh(m.fstype, point.get(), fs_flags(m.attrs), m.options);
        if (!r) return fail(fresh_fs_error(m, r.error()).with_context(m.target));
        break;
      }
      case StepKind::dev_node: CTX_TRY_CTX(bind_dev_node(root.get(), m), m.target); break;
      case StepKind::symlink: {
        CTX_TRY_ASSIGN(UniqueFd dir, sys::open_in_root(root.get(), rel_of(std::string(path_dirname(m.target))), true));
        CTX_TRY_CTX(sys::make_symlink_at(m.link, dir.get(), std::string(path_basename(m.target))), m.target);
        break;
      }
      case StepKind::socket: {
        CTX_TRY_ASSIGN(UniqueFd sock, bind_socket(root.get(), m));
        sockets.push_back(std::move(sock));
        break;
      }
      case StepKind::seal: {
        CTX_TRY_ASSIGN(UniqueFd dir, sys::open_in_root(root.get(), rel_of(m.target), true));
        CTX_TRY_CTX(sys::set_mount_attrs(dir.get(), m.attrs, false), m.target);
        break;
      }
    }
  }
  // A model's sandbox has none (launcher/plan/model_plan.hpp); an agent's both.
  if (sockets.size() == 2) {
    rep.send({Record::Kind::sockets, Step::run_ctx, 0, 0, {}}, {sockets[0].get(), sockets[1].get()});
  } else if (!sockets.empty()) {
    return fail(Error{EPROTO, "the mount plan holds " + std::to_string(sockets.size()) + " sockets, not 2 or none"});
  }
  return root;
}

// Everything between clone and the fork of the runtime, in the order of
// the spec's startup steps 4 to 8 plus the hardening of DESIGN.md.
Result<void> prepare(const LaunchPlan& plan, Reporter& rep) {
  const IdPlan& ids = plan.ids;
  rep.enter(Step::private_mounts);
  CTX_TRY_CTX(sys::make_mounts_private(), "making mounts private");
  // /dev/fuse is opened before the owner's ids are taken (a root launch
  // may open it whatever its mode), in the namespace the mount is made in.
  UniqueFd fuse;
  if (!plan.static_view && std::any_of(plan.mounts.begin(), plan.mounts.end(),
                                       [](const MountStep& m) { return m.kind == StepKind::view; })) {
    auto f = sys::open_path("/dev/fuse", O_RDWR);
    if (!f) return fail(f.error().with_context("the agent view"));
    fuse = std::move(*f);
  }
  rep.enter(Step::owner_ids);
  if (ids.privileged)
    CTX_TRY_CTX(sys::set_fs_ids(ids.fs.uid, ids.fs.gid, ids.fs.groups), "taking the owner's file-system ids");
  CTX_TRY_ASSIGN(UniqueFd root, apply_mounts(plan, rep, std::move(fuse)));

  rep.enter(Step::network);
  if (plan.net_ns) CTX_TRY_CTX(sys::loopback_up(), "network namespace");
  if (auto r = sys::set_hostname(plan.hostname); !r) return fail(hostname_error(r.error()));
  rep.enter(Step::pivot_root);
  CTX_TRY_CTX(sys::pivot_to(root.get()), "switching root to " + plan.root);
  rep.enter(Step::cwd);
  if (auto r = sys::change_dir(plan.cwd); !r)
    return fail(Error{r.error().code, plan.name + ".d/cwd: " + r.error().msg +
                                          ": no such directory in the sandbox; create it where the mounts show it, or "
                                          "change cwd"});
  rep.enter(Step::identity);

  // The bounding set can only be emptied with CAP_SETPCAP: before root is
  // left.
  if (ids.host_ids) CTX_TRY_CTX(sys::drop_bounding_set(), "dropping capabilities");
  if (ids.host_ids)
    CTX_TRY_CTX(sys::set_ids(ids.host_ids->uid, ids.host_ids->gid, ids.host_ids->groups), "setting host ids");
  if (ids.user_ns_after_mounts) {
    CTX_TRY(sys::set_dumpable());
    CTX_TRY_CTX(sys::unshare_ns(plan.unshare_flags), "user namespace");
    CTX_TRY_CTX(sys::write_id_maps(0, ids.uid_map, ids.gid_map, ids.deny_setgroups), "user namespace");
  }
  if (ids.map_via_helpers) CTX_TRY_CTX(sys::set_ids(ids.uid, ids.gid, ids.groups), "setting ids");
  // Credential changes cleared PDEATHSIG; arm it again.
  CTX_TRY(sys::set_parent_death_signal(SIGKILL));
  CTX_TRY_CTX(sys::drop_all_capabilities(), "dropping capabilities");
  CTX_TRY(sys::set_no_new_privs());
  CTX_TRY(sys::new_session());
  return {};
}

std::string env_value(const std::vector<std::string>& env, const std::string& key) {
  for (const auto& kv : env)
    if (kv.compare(0, key.size() + 1, key + "=") == 0) return kv.substr(key.size() + 1);
  return {};
}

// The runtime process: fds, signals, LISTEN_PID, exec. PATH lookup uses the
// sandbox's PATH, never the launcher's.
[[noreturn]] void exec_runtime(const LaunchPlan& plan, const SandboxIo& io, Reporter rep, Terminal& term,
                               const std::string& model_url) {
  rep.enter(Step::exec);
  sys::reset_signals();
  // An interactive launch: the sandbox's pty in place of the caller's
  // terminal, and a process group of its own, the pty's foreground one
  // (the init sets that too: whichever runs first).
  if (term.peer.valid()) {
    if (auto r = sys::set_process_group(0, 0); !r) die(rep, r.error());
    for (int fd : term.fds)
      if (auto r = sys::dup_to(term.peer.get(), fd); !r) die(rep, r.error());
    term.peer.reset();
  }
  std::vector<int> keep;
  if (io.listen_fd >= 0) keep.push_back(io.listen_fd);
  keep.push_back(io.channel);  // lifted last; CLOEXEC again below
  if (auto r = sys::keep_only_fds(keep); !r) die(rep, r.error());
  Reporter& err = rep;
  err.set_fd(3 + static_cast<int>(keep.size()) - 1);
  (void)sys::set_cloexec(err.fd());
  // A bound on processes that holds without a pids controller.
  if (auto r = sys::set_process_limit(plan.nproc); !r) die(err, r.error());
  // Last, with no_new_privs already set (prepare): Landlock keeps abstract
  // sockets and signals inside the sandbox where the kernel can (older
  // kernels: the supervisor said so), then the seccomp deny-list
  // (docs/seccomp.md). Both hold for everything the runtime starts.
  if (auto r = sys::landlock_scope_ipc(); !r) die(err, r.error().with_context("Landlock"));
  if (auto r = sys::load_seccomp_program(sys::builtin_seccomp_program()); !r) die(err, r.error());
  err.flush();
  std::vector<std::string> env = plan.env;
  env.push_back("LISTEN_PID=" + std::to_string(::getpid()));
  // A port the kernel picked is known only now.
  if (!model_url.empty() && env_value(env, "CTX_MODEL_URL").empty()) env.push_back("CTX_MODEL_URL=" + model_url);
  std::vector<std::string> candidates;
  const std::string& cmd = plan.argv.front();
  if (cmd.find('/') != std::string::npos) {
    candidates.push_back(cmd);
  } else {
    std::string path = env_value(env, "PATH");
    std::size_t start = 0;
    while (start <= path.size()) {
      std::size_t colon = path.find(':', start);
      std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!dir.empty()) candidates.push_back(dir + "/" + cmd);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  Error last{ENOENT, "execve " + cmd + ": ENOENT"};
  for (const auto& c : candidates) {
    Error e = sys::exec(c, plan.argv, env);
    if (e.code != ENOENT || last.code == ENOENT) last = e;
  }
  int code = last.code == ENOENT || last.code == ENOTDIR ? kExitNotFound : kExitNotExecutable;
  // ENOENT for a file that is there: its #! interpreter or its loader is
  // missing, or its #! line ends in CR. Say which; and that a name is in
  // none of PATH's directories when it is not.
  std::optional<std::string> found;
  if (code == kExitNotFound)
    for (const auto& c : candidates)
      if (sys::open_path(c, O_PATH)) {
        found = c;
        break;
      }
  if (code == kExitNotFound && !found && cmd.find('/') == std::string::npos)
    last = Error{ENOENT, "execve: ENOENT: in none of the sandbox's PATH directories (" + env_value(env, "PATH") + ")"};
  last = last.with_context("runtime " + cmd);
  if (found)
    if (auto fd = sys::open_path(*found, O_RDONLY | O_NONBLOCK)) {
      std::string head(4096, '\0');
      if (auto n = sys::read_at(fd->get(), head.data(), head.size(), 0)) {
        head.resize(*n);
        RuntimeLookup look{[](const std::string& p) { return sys::open_path(p, O_PATH).has_value(); }, {},
                           env_value(env, "PATH")};
        if (auto issue = runtime_issue(cmd, host_path_of(plan, *found).value_or(*found), head, plan.root, look))
          last = *issue;
      }
    }
  die(err, last, code);
}

}  // namespace

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitLaunchFailed;
}

namespace {

// An interactive launch: a pty of the sandbox's own devpts (mounted at
// /dev/pts, newinstance), whose master goes to the supervisor. The init
// lets go of the caller's terminal: each of its 0-2 that is a terminal
// becomes /dev/null, and the runtime gets the pty there instead.
Result<Terminal> open_terminal(const Reporter& rep) {
  Terminal t;
  for (int fd = 0; fd < 3; ++fd)
    if (sys::is_terminal(fd)) t.fds.push_back(fd);
  CTX_TRY_ASSIGN(UniqueFd master, sys::open_pty_master("/dev/pts/ptmx"));
  CTX_TRY_ASSIGN(t.peer, sys::open_pty_peer(master.get()));
  // The pty is the controlling terminal of the init's session, and the
  // runtime gets a process group of its own in it: a group whose parent is
  // in the same session is not orphaned, so ^Z (SIGTSTP from the pty)
  // really stops the runtime, which the kernel skips for orphaned groups.
  CTX_TRY(sys::set_controlling_tty(t.peer.get()));
  CTX_TRY_ASSIGN(UniqueFd null, sys::open_path("/dev/null", O_RDWR));
  for (int fd : t.fds) CTX_TRY(sys::dup_to(null.get(), fd));
  rep.send({Record::Kind::pty, Step::terminal, 0, 0, {}}, {master.get()});
  return t;
}

// The init's life after the fork: forward signals, reap, end with the
// runtime. Over the lifeline it tells the supervisor when the runtime
// stops ('S', job control of an interactive launch) and takes 'c' to
// continue it and 'T' to cancel it; EOF there means the supervisor is gone.
// A cancellation (seed 003, step 4) is SIGTERM to every process of the
// sandbox, not only to the runtime: kill(-1) from pid 1 of the sandbox's
// pid namespace reaches every process in it (and in namespaces below)
// but the init, so a grandchild the runtime forked gets its chance to
// finish too. A signal forwarded from the supervisor's caller still goes
// to the runtime alone: that is the runtime's to pass on.
[[noreturn]] void be_init(pid_t runtime, int sigfd, int lifeline, bool terminal) {
  while (true) {
    std::vector<struct pollfd> fds{{sigfd, POLLIN, 0}, {lifeline, POLLIN, 0}};
    if (!sys::poll_fds(fds, -1)) _exit(kExitLaunchFailed);
    if (fds[1].revents != 0) {
      char c = 0;
      auto got = sys::read_byte(lifeline, c);
      if (!got || !*got) {
        // The supervisor died (even by SIGKILL): end the sandbox. With
        // pid 1 gone the kernel kills everything else in it.
        (void)sys::signal_pid(runtime, SIGKILL);
        _exit(128 + SIGKILL);
      }
      if (c == 'c') (void)sys::signal_pid(-runtime, SIGCONT);
      if (c == 'T') (void)sys::signal_pid(-1, SIGTERM);
    }
    if ((fds[0].revents & POLLIN) == 0) continue;
    auto sig = sys::read_signalfd(sigfd);
    if (!sig) _exit(kExitLaunchFailed);
    if (*sig != SIGCHLD) {
      (void)sys::signal_pid(runtime, *sig);
      continue;
    }
    if (terminal)
      if (auto st = sys::stopped_or_continued(runtime); st && *st) (void)sys::write_all(lifeline, **st ? "S" : "C", 1);
    // Reap every child (orphans are reparented to us); the runtime's exit
    // ends the sandbox, and with pid 1 gone the kernel kills the rest.
    while (true) {
      auto done = sys::reap_any();
      if (!done || !*done) break;
      if ((*done)->first == runtime) _exit(exit_code_of((*done)->second));
    }
  }
}

}  // namespace

void run_sandbox(const LaunchPlan& plan, const SandboxIo& io) {
  // Nothing of the supervisor's but what this half needs: above all not
  // its directory fds (host paths outside the new root).
  Reporter rep(io.channel);
  if (auto r = sys::close_fds_except({0, 1, 2, io.lifeline, io.channel, io.listen_fd, io.endpoint_exe}); !r)
    die(rep, r.error());
  // The sandbox dies with its supervisor; a supervisor that died before
  // this line is caught by the read below (EOF).
  if (auto r = sys::set_parent_death_signal(SIGKILL); !r) die(rep, r.error());
  char go = 0;
  if (auto got = sys::read_byte(io.lifeline, go); !got || !*got) _exit(kExitLaunchFailed);
  // The supervisor keeps the lifeline's other end open for its whole
  // life, so EOF here later means it is gone. That, unlike PDEATHSIG,
  // survives the credential changes below (which clear PDEATHSIG).

  // Signals the init forwards are blocked before the runtime exists so
  // none is lost; the runtime resets its mask before exec.
  const std::vector<int> watched{SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD};
  auto sigfd = sys::block_into_signalfd(watched);
  if (!sigfd) die(rep, sigfd.error());

  if (auto r = prepare(plan, rep); !r) die(rep, r.error());
  Terminal term;
  if (plan.terminal) {
    rep.enter(Step::terminal);
    auto t = open_terminal(rep);
    if (!t) die(rep, t.error());
    term = std::move(*t);
  }
  // The runtime shares our ids: this process is off limits to it (ptrace,
  // /proc/1/fd) from before the runtime exists, so the lifeline, the
  // channel and the signalfd stay ours. The runtime's execve makes it
  // dumpable again.
  if (auto r = sys::set_not_dumpable(); !r) die(rep, r.error());
  // Beside the runtime, never waited for: with the runtime's exit the init
  // exits, and the kernel ends the endpoint with the pid namespace.
  const std::string model_url = start_endpoint(plan, io.endpoint_exe);
  sys::close_fd(io.endpoint_exe);
  if (auto f = sys::fault_at("sandbox.fork"); !f) die(rep, f.error());
  auto pid = sys::fork_process();
  if (!pid) die(rep, pid.error());
  if (*pid == 0) exec_runtime(plan, io, rep, term, model_url);

  // The init: the runtime's exec closes its copy of the channel; ours is
  // closed now so that the supervisor sees EOF exactly then. The pty's
  // peer is the runtime's alone after the runtime's group is in front, so
  // the master sees its end.
  sys::close_fd(io.channel);
  sys::close_fd(io.listen_fd);
  (void)sys::fault_at("sandbox.init");
  if (term.peer.valid()) {
    (void)sys::set_process_group(*pid, *pid);
    (void)sys::set_foreground(term.peer.get(), *pid);
    term.peer.reset();
  }
  be_init(*pid, sigfd->get(), io.lifeline, plan.terminal);
}

}  // namespace ctx::launcher
