#include "launcher/sandbox/mounts.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>
#include <optional>

#include "base/path.hpp"
#include "launcher/sandbox/sources.hpp"
#include "launcher/sandbox/static_view.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"
#include "sys/mount.hpp"
#include "sys/mountinfo.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

std::string rel_of(const std::string& inner) { return inner == "/" ? std::string() : inner.substr(1); }

constexpr sys::Open kInRoot = sys::Open::path_only | sys::Open::in_root | sys::Open::no_symlinks;

// The directory of the new root that the last steps used, kept open for
// the next step in the same directory: /dev's nodes and links and
// /run/ctx's sockets each need theirs, and a run of them costs one
// openat2, not one each. A mount onto that directory or above it drops
// it (the descriptor would name what the mount covers).
class DirCache {
 public:
  explicit DirCache(int rootfd) : rootfd_(rootfd) {}
  int root() const { return rootfd_; }

  // `inner` (absolute in the new root) as an O_PATH directory, resolved
  // in the root without following any symlink.
  Result<int> open(const std::string& inner) {
    if (fd_.valid() && inner == path_) return fd_.get();
    fd_.reset();
    CTX_TRY_ASSIGN(fd_, sys::open(rootfd_, rel_of(inner), kInRoot | sys::Open::directory));
    path_ = inner;
    return fd_.get();
  }

  // The descriptor of `inner` when it is the one kept open, else -1.
  int kept(const std::string& inner) const { return fd_.valid() && inner == path_ ? fd_.get() : -1; }

  // A mount was made at `target`.
  void mounted(const std::string& target) {
    if (fd_.valid() && path_is_at_or_under(path_, target)) fd_.reset();
  }

 private:
  int rootfd_;
  UniqueFd fd_;
  std::string path_;
};

// The missing directories above `rel` (below rootfd), made one component
// at a time, each with mkdirat on its already-resolved parent.
Result<void> make_parents(int rootfd, const std::string& rel) {
  std::string done;
  std::size_t start = 0;
  for (std::size_t slash = rel.find('/'); slash != std::string::npos; slash = rel.find('/', start)) {
    const std::string comp = rel.substr(start, slash - start);
    CTX_TRY_ASSIGN(UniqueFd parent, sys::open(rootfd, done, kInRoot | sys::Open::directory));
    CTX_TRY(sys::make_dir_at(parent.get(), comp, 0755));
    done = done.empty() ? comp : done + "/" + comp;
    start = slash + 1;
  }
  return {};
}

// Opens (creating when missing) the mount point `inner` below the root
// without following any symlink: it is resolved with
// RESOLVE_IN_ROOT|RESOLVE_NO_SYMLINKS, and a missing one is made with
// mkdirat, or created as an empty file and used as it is, on its
// already-resolved parent (made first when missing too).
Result<UniqueFd> mount_point(DirCache& dirs, const std::string& inner, bool directory) {
  const std::string rel = rel_of(inner);
  const std::string above(path_dirname(inner));
  const std::string leaf(path_basename(inner));
  const sys::Open how = kInRoot | sys::open_if(directory, sys::Open::directory);
  // In a directory kept open (the next /dev node) a file is created at
  // once, and only one that exists is looked up; a directory's name alone
  // is looked up there, and anything but a success or ENOENT again from
  // the root so that the error names the whole path.
  const int kept = rel.empty() ? -1 : dirs.kept(above);
  if (kept >= 0 && !directory)
    if (auto made = sys::create_file_at(kept, leaf, 0644); made || made.error().code != EEXIST) return made;
  auto existing = kept >= 0 && directory ? sys::open(kept, leaf, how) : sys::open(dirs.root(), rel, how);
  if (kept >= 0 && !existing && existing.error().code != ENOENT) existing = sys::open(dirs.root(), rel, how);
  if (existing || existing.error().code != ENOENT || rel.empty()) return existing;
  auto parent = dirs.open(above);
  if (!parent && parent.error().code == ENOENT) {
    CTX_TRY(make_parents(dirs.root(), rel));
    parent = dirs.open(above);
  }
  if (!parent) return fail(parent.error());
  if (directory) {
    CTX_TRY(sys::make_dir_at(*parent, leaf, 0755));
  } else {
    auto made = sys::create_file_at(*parent, leaf, 0644);
    if (made || made.error().code != EEXIST) return made;
    // Made meanwhile: a plain file will do, a link or a directory not.
    CTX_TRY(sys::make_file_at(*parent, leaf, 0644));
  }
  return sys::open(dirs.root(), rel, how);
}

// host_mounts: the mount table the sources are seen in, for a privileged
// launch (nullptr otherwise), which binds only file systems of plain files.
Result<void> bind_one(DirCache& dirs, const BindStep& b, const std::vector<sys::MountEntry>* host_mounts) {
  // The source is opened with the owner's credentials (the caller's, or
  // the fs ids set for a privileged launch), so it must be reachable by
  // the owner; reading (and for rw, writing) it must be allowed too.
  CTX_TRY_ASSIGN(BindSource src, open_bind_source(b, host_mounts));
  return bind_tree(b.source, src.fd.get(), "", b.attrs, b.recursive ? Rbind::yes : Rbind::no,
                   [&] { return mount_point(dirs, b.target, src.dir); });
}

constexpr sys::Open kDirInRoot = kInRoot | sys::Open::directory;
constexpr sys::Open kDirBeneath =
    sys::Open::path_only | sys::Open::beneath | sys::Open::no_symlinks | sys::Open::directory;

// The entries a mask keeps, each a recursive clone of what the directory
// shows at its name, read-only unless kept rw; taken before the tmpfs
// covers them. An entry that is not required and is no directory (gone,
// a symlink, a file) is left out.
Result<std::vector<std::pair<const MaskKeep*, UniqueFd>>> clone_kept(int dirfd, const MaskStep& m) {
  std::vector<std::pair<const MaskKeep*, UniqueFd>> out;
  for (const MaskKeep& k : m.keep) {
    auto entry = sys::open(dirfd, k.name, kDirBeneath);
    if (!entry && !k.required &&
        (entry.error().code == ENOENT || entry.error().code == ENOTDIR || entry.error().code == ELOOP))
      continue;
    if (!entry) return fail(entry.error().with_context(path_join(m.target, k.name)));
    CTX_TRY_ASSIGN(UniqueFd tree, sys::clone_tree(entry->get(), "", true));
    if (!k.rw) CTX_TRY(sys::set_mount_attrs(tree.get(), {.rdonly = true}, true));
    out.emplace_back(&k, std::move(tree));
  }
  return out;
}

// A mask: a read-only tmpfs over the target, empty, or with the entries it
// keeps bound onto directories of their names and then sealed read-only.
Result<void> mask_one(int rootfd, const MaskStep& m) {
  CTX_TRY_ASSIGN(UniqueFd target, sys::open(rootfd, rel_of(m.target), kDirInRoot));
  if (m.keep.empty()) {
    CTX_TRY(sys::mount_fresh("tmpfs", target.get(), MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=4k"));
    return {};
  }
  CTX_TRY_ASSIGN(auto kept, clone_kept(target.get(), m));
  CTX_TRY(sys::mount_fresh("tmpfs", target.get(), MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=4k"));
  CTX_TRY_ASSIGN(UniqueFd list, sys::open(rootfd, rel_of(m.target), kDirInRoot));
  for (auto& [k, tree] : kept) {
    CTX_TRY(sys::make_dir_at(list.get(), k->name, 0755));
    CTX_TRY_ASSIGN(UniqueFd point, sys::open(list.get(), k->name, kDirBeneath | sys::Open::no_xdev));
    CTX_TRY(sys::attach_tree(tree.get(), point.get()));
  }
  return sys::set_mount_attrs(list.get(), m.attrs, false);
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

// The new root: `source` cloned onto itself (pivot_root needs a mount of
// its own), an owned child's never through a symlink below the CTX root.
// Returns the attached tree, the anchor of every later path. host_mounts
// as for bind_one.
Result<UniqueFd> make_root(const RootStep& r, const std::vector<sys::MountEntry>* host_mounts) {
  if (r.fresh) {
    // A tmpfs over the anchor in this mount namespace: what the anchor
    // holds, or is given later on the host, is never seen.
    CTX_TRY_ASSIGN(UniqueFd anchor, open_no_symlinks("root", r.source));
    CTX_TRY_ASSIGN(UniqueFd dir,
                   sys::open(anchor.get(), ".", sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks));
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
Result<void> bind_dev_node(DirCache& dirs, const DevNodeStep& n) {
  return bind_tree(n.source, AT_FDCWD, n.source, n.attrs, Rbind::no,
                   [&] { return mount_point(dirs, n.target, false); });
}

// A supervisor socket: bound here, in the sandbox's own mount namespace,
// so it never has a name anywhere else, not for an instant; anyone in the
// sandbox may use it (iso uid runs as another uid than the owner it was
// bound as), and the supervisor checks that each peer is in the sandbox.
Result<UniqueFd> bind_socket(DirCache& dirs, const SocketStep& s) {
  const std::string leaf(path_basename(s.target));
  CTX_TRY_ASSIGN(int d, dirs.open(std::string(path_dirname(s.target))));
  Result<UniqueFd> sock = s.datagram ? sys::bind_datagram_at(d, leaf, s.target) : sys::listen_unix_at(d, leaf, s.target);
  if (!sock) return fail(sock.error());
  CTX_TRY(sys::chmod_at(d, leaf, 0666));
  return std::move(*sock);
}

// The agent view. Served over FUSE: its one mount is made at the first
// step, the /dev/fuse descriptor goes to the supervisor, which starts the
// server on it, and no copy stays here; lookups through the mount wait for
// that server. Static (the step's `built`): each step is built at once
// (launcher/sandbox/static_view.hpp).
class ViewMount {
 public:
  ViewMount(UniqueFd fuse, const LaunchPlan& plan) : fuse_(std::move(fuse)), plan_(plan) {}
  // One step: the view's subtree m.source (the whole view for "") at
  // m.target.
  Result<void> attach(DirCache& dirs, const ViewStep& m, const Reporter& rep) {
    const int rootfd = dirs.root();
    if (m.built) return build(dirs, m, *m.built);
    if (!mnt_.valid()) {
      if (!fuse_.valid()) return fail(Error{EPROTO, "no /dev/fuse descriptor for the agent view"});
      CTX_TRY_ASSIGN(sys::Creds me, sys::current_creds());
      CTX_TRY_ASSIGN(mnt_, sys::mount_fuse(fuse_.get(), me.uid, me.gid));
      rep.send({Record::Kind::view, rep.current(), 0, 0, {}}, {fuse_.get()});
      fuse_.reset();
    }
    bool made_point = false;
    auto r = bind_tree("the agent view's " + m.source, mnt_.get(), m.source, m.attrs, Rbind::no, [&] {
      made_point = true;
      return mount_point(dirs, m.target, true);
    });
    if (!r && !made_point && r.error().code == ENOENT && !m.source.empty()) return absent(rootfd, m);
    return r;
  }

  // Sends the supervisor every bind the static view made at launch (its
  // started report lists them).
  void report(const Reporter& rep) const {
    if (!static_) return;
    std::vector<BindReport> binds;
    for (const auto& b : static_->binds()) binds.push_back({std::string(mountspec::to_string(b.kind)), b.target});
    for (auto& detail : encode_static_binds(binds))
      rep.send({Record::Kind::static_binds, rep.current(), 0, 0, std::move(detail)}, {});
  }

 private:
  // Static: the step's tmpfs, filled with the view's binds as the tree and
  // the policy are now, then sealed.
  Result<void> build(DirCache& dirs, const ViewStep& m, const mountspec::StaticBuild& b) {
    const int rootfd = dirs.root();
    if (!static_) {
      CTX_TRY_ASSIGN(StaticView s, StaticView::open(plan_));
      static_.emplace(std::move(s));
    }
    if (!static_->shows(m.source)) return absent(rootfd, m);
    CTX_TRY_ASSIGN(UniqueFd point, mount_point(dirs, m.target, true));
    CTX_TRY(static_->count_mount());
    CTX_TRY(sys::mount_fresh("tmpfs", point.get(), fs_flags(b.tmpfs), b.tmpfs_options));
    // The directory again: now the new file system's root.
    CTX_TRY_ASSIGN(UniqueFd top, sys::open(rootfd, rel_of(m.target), sys::Open::path_only | sys::Open::in_root | sys::Open::no_symlinks | sys::Open::directory));
    CTX_TRY(static_->fill(top.get(), m.source, m.target, b));
    return sys::set_mount_attrs(top.get(), b.sealed, false);
  }

  // A step whose subtree the view does not have. A table line's is
  // refused. A tool tier under a bind (`why` says so) is skipped when
  // nothing is there either (a shared space without tool/), and refused
  // when something is: the durable tier must never show.
  Result<void> absent(int rootfd, const ViewStep& m) const {
    if (m.why.empty())
      return fail(Error{EACCES, "EACCES: " + plan_.name + "'s agent view has no " + m.source +
                                    ": it shows an agent only its own home, its tiers' allowed entries and the "
                                    "spaces it may read (docs/view.md)"});
    auto there =
        sys::open(rootfd, rel_of(m.target), sys::Open::path_only | sys::Open::in_root | sys::Open::no_symlinks);
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
  CTX_TRY_ASSIGN(UniqueFd dir, sys::open(sys::at_cwd, plan.ctx_root, sys::Open::path_only | sys::Open::directory));
  CTX_TRY_ASSIGN(UniqueFd tree, sys::clone_tree(dir.get(), "", true));
  CTX_TRY(sys::set_mount_attrs(tree.get(), {.rdonly = true, .nosuid = true, .nodev = true}, true));
  rep.send({Record::Kind::tools, rep.current(), 0, 0, {}}, {tree.get()});
  return {};
}

// Which setup step of the channel's timings a mount step belongs to.
Step timing_step(const MountStep& m) {
  const std::string& target = mountspec::target_of(m);
  if (path_is_at_or_under(target, "/dev")) return Step::dev;
  if (path_is_at_or_under(target, kNotifyDir)) return Step::run_ctx;
  switch (mountspec::kind_of(m)) {
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
Error fresh_fs_error(const FsStep& m, Error e) {
  if (m.fstype == "proc" && e.code == EPERM)
    e.msg +=
        ": the kernel mounts a new procfs in a user namespace only where /proc is fully visible, and here part of it "
        "is covered (a container engine masks it by default): the launch is refused rather than run without the "
        "sandbox's own /proc; `ctx check --env` names the engine option that unmasks it";
  return e;
}

}  // namespace

Result<void> bind_tree(const std::string& source, int dirfd, const std::string& path, const mountspec::Attrs& attrs,
                       Rbind r, const std::function<Result<UniqueFd>()>& point) {
  bool recursive = r == Rbind::yes;
  auto cloned = sys::clone_tree(dirfd, path, recursive);
  // In a user namespace the mounts below the source are locked: a
  // non-recursive bind would uncover what they cover, so the kernel
  // refuses it (EINVAL from open_tree).
  if (!cloned && cloned.error().code == EINVAL && r == Rbind::where_locked) {
    recursive = true;
    cloned = sys::clone_tree(dirfd, path, true);
  }
  if (!cloned && cloned.error().code == EINVAL && r == Rbind::no)
    return fail(Error{EINVAL, "source " + source +
                                  ": EINVAL: has mounts below it that a non-recursive bind would uncover, which the "
                                  "kernel refuses in a user namespace; use rbind"});
  if (!cloned) return fail(cloned.error());
  CTX_TRY(sys::set_mount_attrs(cloned->get(), attrs, recursive));
  CTX_TRY_ASSIGN(UniqueFd target, point());
  return sys::attach_tree(cloned->get(), target.get());
}

namespace {

// What the steps of one apply_mounts share.
struct MountRun {
  const LaunchPlan& plan;
  Reporter& rep;
  ViewMount view;
  const std::vector<sys::MountEntry>* seen_in;
  UniqueFd root;
  DirCache dirs;
  std::vector<UniqueFd> sockets;
};

// One step of the plan.
Result<void> apply_step(MountRun& run, const MountStep& m) {
  const LaunchPlan& plan = run.plan;
  switch (mountspec::kind_of(m)) {
    case StepKind::root: {
      const auto& rs = std::get<RootStep>(m);
      auto r = make_root(rs, run.seen_in);
      if (!r) return fail(rs.fresh ? r.error() : r.error().with_context(plan.name + ".d/root"));
      run.root = std::move(*r);
      run.dirs = DirCache(run.root.get());
      return {};
    }
    case StepKind::bind: {
      const auto& b = std::get<BindStep>(m);
      auto r = bind_one(run.dirs, b, run.seen_in);
      if (!r) return fail(r.error().with_context(mount_line_context(plan, b)));
      return {};
    }
    case StepKind::view: {
      const auto& v = std::get<ViewStep>(m);
      auto r = run.view.attach(run.dirs, v, run.rep);
      if (!r && v.line > 0)
        return fail(r.error().with_context(plan.name + ".d/mount:" + std::to_string(v.line) + ": the agent view at " +
                                           v.target));
      if (!r) return fail(r.error().with_context("the agent view at " + v.target));
      return {};
    }
    case StepKind::mask: {
      const auto& k = std::get<MaskStep>(m);
      CTX_TRY_CTX(mask_one(run.root.get(), k), "masking " + k.target + " (" + k.why + ")");
      return {};
    }
    case StepKind::fs: {
      const auto& f = std::get<FsStep>(m);
      CTX_TRY_ASSIGN(UniqueFd point, mount_point(run.dirs, f.target, true));
      auto r = sys::mount_fresh(f.fstype, point.get(), fs_flags(f.attrs), f.options);
      if (!r) return fail(fresh_fs_error(f, r.error()).with_context(f.target));
      return {};
    }
    case StepKind::dev_node: {
      const auto& n = std::get<DevNodeStep>(m);
      CTX_TRY_CTX(bind_dev_node(run.dirs, n), n.target);
      return {};
    }
    case StepKind::symlink: {
      const auto& l = std::get<SymlinkStep>(m);
      CTX_TRY_ASSIGN(int dir, run.dirs.open(std::string(path_dirname(l.target))));
      CTX_TRY_CTX(sys::make_symlink_at(l.link, dir, std::string(path_basename(l.target))), l.target);
      return {};
    }
    case StepKind::socket: {
      CTX_TRY_ASSIGN(UniqueFd sock, bind_socket(run.dirs, std::get<SocketStep>(m)));
      run.sockets.push_back(std::move(sock));
      return {};
    }
    case StepKind::seal: {
      const auto& z = std::get<SealStep>(m);
      CTX_TRY_ASSIGN(int dir, run.dirs.open(z.target));
      CTX_TRY_CTX(sys::set_mount_attrs(dir, z.attrs, false), z.target);
      return {};
    }
  }
  return {};
}

// Whether a step puts a mount at its target (which covers what a kept
// directory descriptor there or below names).
bool mounts_at_target(const MountStep& m) {
  switch (mountspec::kind_of(m)) {
    case StepKind::root:
    case StepKind::bind:
    case StepKind::view:
    case StepKind::mask:
    case StepKind::fs:
    case StepKind::dev_node: return true;
    case StepKind::symlink:
    case StepKind::socket:
    case StepKind::seal: return false;
  }
  return true;
}

}  // namespace

// The one function that makes the sandbox's mounts: the plan's steps, in
// order. The sockets of /run/ctx go to the supervisor over the channel.
Result<UniqueFd> apply_mounts(const LaunchPlan& plan, Reporter& rep, UniqueFd fuse) {
  if (std::any_of(plan.mounts.begin(), plan.mounts.end(),
                  [](const MountStep& m) { return std::holds_alternative<ViewStep>(m); }))
    CTX_TRY_CTX(send_tool_tree(plan, rep), "the tools of " + plan.ctx_root);
  // A privileged launch takes its root and bind sources only from file
  // systems of plain files (mountspec/source_fs.hpp): the table they are
  // seen in, read once.
  std::optional<std::vector<sys::MountEntry>> host_mounts;
  if (plan.ids.privileged) {
    CTX_TRY_ASSIGN(host_mounts, sys::mount_table());
  }
  MountRun run{plan, rep, ViewMount(std::move(fuse), plan), host_mounts ? &*host_mounts : nullptr, {}, DirCache(-1), {}};
  for (const MountStep& m : plan.mounts) {
    if (Step t = timing_step(m); t != rep.current()) rep.enter(t);
    CTX_TRY(apply_step(run, m));
    if (mounts_at_target(m)) run.dirs.mounted(mountspec::target_of(m));
  }
  run.view.report(rep);
  // A model's sandbox has none (launcher/plan/model_plan.hpp); an agent's both.
  if (run.sockets.size() == 2) {
    rep.send({Record::Kind::sockets, Step::run_ctx, 0, 0, {}}, {run.sockets[0].get(), run.sockets[1].get()});
  } else if (!run.sockets.empty()) {
    return fail(Error{EPROTO, "the mount plan holds " + std::to_string(run.sockets.size()) + " sockets, not 2 or none"});
  }
  return std::move(run.root);
}

}  // namespace ctx::launcher
