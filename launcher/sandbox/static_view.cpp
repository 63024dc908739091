#include "launcher/sandbox/static_view.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include "agentdir/load.hpp"
#include "base/path.hpp"
#include "launcher/sandbox/mounts.hpp"
#include "sys/file.hpp"
#include "sys/mount.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

using Type = access::HostEntry::Type;

std::string child_of(const std::string& rel, const std::string& name) { return rel.empty() ? name : rel + "/" + name; }

// A directory shown whole: what the agent's own home holds but its
// session/, the sessions shown there, and each entry of a readable shared
// space but its tool tier. shared/ and each space are built name by name
// like the rest, so that a space's tool/ is always the view's: one made
// (or swapped in by a rename) after launch is not there. So are the home
// and its session/, so that another session is absent without
// `session:<name> read` (docs/abi-policy.md, "session").
bool whole(const access::Viewer& v, const std::string& rel) {
  const bool space = rel.rfind("shared/", 0) == 0 && rel.find('/', 7) == std::string::npos;
  return rel != "shared" && !space && !access::holds_sessions(v, rel) && access::plain(v, rel);
}

// How often a file replaced between its clone and its attach is opened
// again before the view gives up (a writer that replaces it this often is
// rewriting it continuously).
constexpr int kReplacedRetries = 16;

}  // namespace

// Who looks: the agent, its owner and the runtime's host ids, as the
// launch placed them, and its ancestors' types (the label and policy are
// read live).
access::Viewer runtime_viewer(const LaunchPlan& plan) {
  access::Viewer v;
  v.agent = plan.name;
  v.owner = plan.owner;
  v.user_tier = plan.tier_user.has_value();
  v.ancestors = plan.ancestor_types;
  v.session = home_session(plan);
  v.uid = plan.ids.host_uid;
  v.gid = plan.ids.host_gid;
  v.groups = plan.ids.host_groups;
  return v;
}

StaticView::StaticView(UniqueFd root, access::Viewer v) : root_(std::move(root)), tree_(root_.get()), v_(std::move(v)) {
  auto h = tree_.stat("bin/ctx");
  if (h && h->type == Type::regular && (h->mode & 0111) != 0) helper_ = "bin/ctx";
}

Result<StaticView> StaticView::open(const LaunchPlan& plan) {
  CTX_TRY_ASSIGN(UniqueFd root, sys::open(sys::at_cwd, plan.ctx_root, sys::Open::directory | sys::Open::no_follow));
  // Read once: the static view is what the tree and the policy were at
  // launch.
  access::Viewer v = access::load_viewer(plan.ctx_root, runtime_viewer(plan));
  return StaticView(std::move(root), std::move(v));
}

bool StaticView::shows(const std::string& rel) const {
  if (rel.empty()) return true;
  std::string at;
  for (std::size_t start = 0; start <= rel.size();) {
    std::size_t slash = rel.find('/', start);
    at = rel.substr(0, slash);
    if (!access::decide(v_, tree_, at)) return false;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return true;
}

Result<void> StaticView::count_mount() {
  if (++mounts_ <= kMaxStaticViewMounts) return {};
  return fail(
      Error{E2BIG, "E2BIG: the static agent view would need more than " + std::to_string(kMaxStaticViewMounts) +
                       " mounts; make /dev/fuse usable (mode 0666) for the live view, which has no such bound"});
}

// One file of the tree, read-only, onto an empty file of its name.
// The tree changes while the view is built: the supervisor writes the
// agent's start records (<name>.d/status, pid) while the sandbox sets
// itself up, each by renaming a temporary file over the old one, and any
// other writer may do the same. So a listed name can be gone by the time
// it is opened (the temporary one), and a file cloned with open_tree can
// be renamed over or unlinked before it is attached, which move_mount
// refuses with ENOENT (checked on Linux 6.18). Either is a name that
// changed since the listing: it is opened again, and skipped (false)
// once it is gone or no longer a file, like an entry gone before
// decide().
Result<bool> StaticView::bind_file(int dirfd, const std::string& name, const std::string& host_rel,
                                   const std::string& inner, mountspec::StaticBindKind kind,
                                   const mountspec::StaticBuild& b) {
  bool made = false;
  for (int attempt = 1;; ++attempt) {
    auto src = sys::open(root_.get(), host_rel, sys::Open::path_only | sys::Open::beneath | sys::Open::no_symlinks);
    if (!src && src.error().code == ENOENT) {
      if (made) CTX_TRY(sys::remove_at(dirfd, name, false));
      return false;
    }
    if (!src) return fail(src.error());
    if (attempt > 1) {
      // What replaced the file must still be one (decide() saw a file).
      CTX_TRY_ASSIGN(sys::FileStat st, sys::stat_fd(src->get()));
      if (!S_ISREG(st.mode)) {
        CTX_TRY(sys::remove_at(dirfd, name, false));
        return false;
      }
    }
    auto attached =
        bind_tree(host_rel, src->get(), "", mountspec::attrs_of(b, kind), Rbind::no, [&]() -> Result<UniqueFd> {
          // The empty file is made once; a retry attaches onto it again.
          if (!made) {
            CTX_TRY(sys::make_file_at(dirfd, name, 0444));
            made = true;
            CTX_TRY(count_mount());
          }
          return sys::open(dirfd, name, sys::Open::path_only | sys::Open::beneath | sys::Open::no_symlinks | sys::Open::no_xdev);
        });
    if (attached) {
      binds_.push_back({kind, inner});
      return true;
    }
    if (attached.error().code != ENOENT || attempt == kReplacedRetries) return fail(attached.error());
  }
}

// A directory shown whole. Without what is mounted below it where the
// kernel allows (the agent's root lies in its home, and this view is being
// built inside that root); with it where it must (mounts a user namespace
// locks to their parent).
Result<void> StaticView::bind_whole(int dirfd, const std::string& name, const std::string& host_rel,
                                    const std::string& inner, const mountspec::StaticBuild& b) {
  auto src = sys::open(root_.get(), host_rel, sys::Open::path_only | sys::Open::beneath | sys::Open::no_symlinks);
  if (!src && src.error().code == ENOENT) return {};  // gone since the listing
  if (!src) return fail(src.error());
  const auto kind = mountspec::StaticBindKind::directory;
  auto bound =
      bind_tree(host_rel, src->get(), "", mountspec::attrs_of(b, kind), Rbind::where_locked, [&]() -> Result<UniqueFd> {
        CTX_TRY(sys::make_dir_at(dirfd, name, 0555));
        CTX_TRY_ASSIGN(UniqueFd point, sys::open(dirfd, name, sys::Open::path_only | sys::Open::beneath | sys::Open::no_symlinks | sys::Open::no_xdev));
        CTX_TRY(count_mount());
        return point;
      });
  if (!bound) return fail(bound.error().with_context(host_rel));
  binds_.push_back({kind, inner});
  return {};
}

Result<void> StaticView::fill(int dirfd, const std::string& rel, const std::string& inner,
                              const mountspec::StaticBuild& b) {
  using Kind = mountspec::StaticBindKind;
  for (const auto& name : access::list(v_, tree_, rel)) {
    const std::string at = child_of(rel, name);
    const std::string in = path_join(inner, name);
    auto s = access::decide(v_, tree_, at);
    if (!s) continue;  // gone since the listing
    if (s->entry.type == Type::directory && whole(v_, at)) {
      CTX_TRY(bind_whole(dirfd, name, s->host_rel, in, b));
      continue;
    }
    if (s->entry.type == Type::directory) {
      CTX_TRY(sys::make_dir_at(dirfd, name, 0755));
      CTX_TRY_ASSIGN(UniqueFd sub, sys::open(dirfd, name, sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks));
      CTX_TRY(fill(sub.get(), at, in, b));
      continue;
    }
    if (!access::tool_at(v_, at).empty()) {
      // An allowed tool: the helper at its name (a direct call asks the
      // supervisor, which records it and hands over the tool); without a
      // helper, the tool's bytes, not runnable from here.
      CTX_TRY(helper_ ? bind_file(dirfd, name, *helper_, in, Kind::tool, b)
                      : bind_file(dirfd, name, s->host_rel, in, Kind::tool_bytes, b));
      continue;
    }
    const Kind kind = s->no_exec ? Kind::file_no_exec : Kind::file;
    CTX_TRY(bind_file(dirfd, name, s->host_rel, in, kind, b));  // false: gone since the listing
  }
  return {};
}

}  // namespace ctx::launcher
