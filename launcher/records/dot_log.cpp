#include "launcher/records/dot_log.hpp"

#include <optional>

#include "launcher/records/agent_files.hpp"
#include "launcher/records/as_owner.hpp"
#include "sys/file.hpp"
#include "sys/resolve.hpp"

namespace ctx::launcher {

namespace {

// A .d/ only root can have put a file in: root writes there as itself,
// since a hard link to another file of root's could only be root's own.
bool root_only(int dirfd) {
  auto st = sys::stat_fd(dirfd);
  return st && st->uid == 0 && (st->mode & 022) == 0;
}

}  // namespace

Result<void> append_dot_log(const LaunchPlan& plan, const std::string& rel, const std::string& line, DotLogRule rule) {
  std::optional<AsOwner> as_owner;
  switch (rule) {
    case DotLogRule::opt_in: {
      // The .d/ is found as the owner finds it too.
      CTX_TRY_ASSIGN(AsOwner a, AsOwner::enter(plan.ids));
      as_owner.emplace(std::move(a));
      break;
    }
    case DotLogRule::shared: break;
  }
  auto root = sys::open(sys::at_cwd, plan.ctx_root, sys::Open::directory);
  if (!root) return fail(root.error());
  // A .d/ that cannot be opened so (missing, a symlink on the way, not
  // the owner's to search) is no .d/: the object keeps no log.
  auto d = sys::open(root->get(), rel + ".d", sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
  if (!d) return fail(Error{ENOENT, rel + ".d: ENOENT: " + d.error().msg});
  switch (rule) {
    case DotLogRule::opt_in: return sys::append_existing(d->get(), "log", line, kMaxLogBytes);
    case DotLogRule::shared: {
      if (!root_only(d->get())) {
        CTX_TRY_ASSIGN(AsOwner a, AsOwner::enter(plan.ids));
        as_owner.emplace(std::move(a));
      }
      std::uint64_t size = kUnknownLogSize;
      return append_capped_log(d->get(), line, size);
    }
  }
  return fail(Error{EINVAL, "EINVAL: unknown .d/log rule"});
}

}  // namespace ctx::launcher
