#include "launcher/supervisor/view_process.hpp"

#include <unistd.h>
#include <csignal>
#include <cstdio>

#include "base/text.hpp"
#include "sys/identity.hpp"
#include "view/server.hpp"

namespace ctx::launcher {

namespace {

[[noreturn]] void run_server(const LaunchPlan& plan, int fuse) {
  sys::set_process_name("ctx-view");
  sys::reset_signals();
  if (!sys::close_fds_except({2, fuse})) _exit(125);
  const IdPlan& ids = plan.ids;
  // A root supervisor's server reads the tree as the owner, so the view
  // can never show what the owner could not read.
  if (ids.privileged && !sys::set_ids(ids.fs.uid, ids.fs.gid, ids.fs.groups)) _exit(125);
  // A credential change clears PR_SET_PDEATHSIG: armed again.
  if (ids.privileged && !sys::set_parent_death_signal(SIGKILL)) _exit(125);
  if (!sys::set_no_new_privs()) _exit(125);
  for (const auto& l : view::kServerLimits) {
    if (l.resource == sys::Resource::address_space && sys::kAddressSanitizer) continue;
    if (auto r = sys::lower_limit(l.resource, l.value); !r) {
      std::fprintf(stderr, "ctx-view: %s\n", printable(r.error().msg).c_str());
      _exit(125);
    }
  }
  view::ServeOptions o;
  o.fuse_fd = fuse;
  o.ctx_root = plan.ctx_root;
  o.agent = plan.name;
  o.owner = plan.owner;
  o.user_tier = plan.tier_user.has_value();
  o.ancestors = plan.ancestor_types;
  o.session = home_session(plan);
  o.uid = ids.host_uid;
  o.gid = ids.host_gid;
  o.groups = ids.host_groups;
  // The mount was made in the sandbox's user namespace when it had one
  // from the start; a root launch mounts before its own.
  if (ids.user_ns && !ids.user_ns_after_mounts) {
    o.uid_map = ids.uid_map;
    o.gid_map = ids.gid_map;
  }
  auto r = view::serve(o);
  if (!r) std::fprintf(stderr, "ctx-view: %s\n", printable(r.error().msg).c_str());
  _exit(r ? 0 : 1);
}

}  // namespace

Result<ViewProcess> ViewProcess::start(const LaunchPlan& plan, UniqueFd fuse, int cgroup_fd) {
  CTX_TRY_ASSIGN(sys::Child c, sys::fork_owned(SIGKILL, cgroup_fd));
  if (c.pid == 0) run_server(plan, fuse.get());
  return ViewProcess(std::move(c));
}

int ViewProcess::reap() {
  reaped_ = true;
  auto st = sys::wait_pid(child_.pid);
  return st ? *st : -1;
}

ViewProcess::~ViewProcess() {
  if (reaped_ || child_.pid <= 0 || !child_.pidfd.valid()) return;
  (void)sys::signal_pidfd(child_.pidfd.get(), SIGKILL);
  (void)sys::wait_pid(child_.pid);
}

}  // namespace ctx::launcher
