#include "launcher/sandbox/model_run.hpp"

#include <unistd.h>

#include <csignal>

#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/sandbox.hpp"
#include "sys/identity.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

Result<ModelRun> start_model(const LaunchPlan& plan, const std::array<int, 3>& stdio) {
  CTX_TRY_ASSIGN(auto sync, sys::make_seqpacket_pair());
  CTX_TRY_ASSIGN(auto chan, sys::make_seqpacket_pair());
  CTX_TRY_ASSIGN(sys::Child child, sys::clone_child({plan.clone_flags, -1}));
  if (child.pid == 0) {
    for (int i = 0; i < 3; ++i)
      if (!sys::dup_to(stdio[static_cast<std::size_t>(i)], i)) _exit(kExitLaunchFailed);
    run_sandbox(plan, SandboxIo{sync.first.get(), chan.second.get(), -1});
  }
  sync.first.reset();
  chan.second.reset();
  auto abort = [&](const Error& e) {
    (void)sys::signal_pidfd(child.pidfd.get(), SIGKILL);
    (void)sys::wait_pid(child.pid);
    return fail(e);
  };
  const IdPlan& ids = plan.ids;
  if (ids.user_ns && !ids.user_ns_after_mounts) {
    Result<void> r = ids.map_via_helpers ? sys::run_id_map_helpers(child.pid, ids.uid_map, ids.gid_map)
                                         : sys::write_id_maps(child.pid, ids.uid_map, ids.gid_map, ids.deny_setgroups);
    if (!r) return abort(r.error().with_context("the model's id maps"));
  }
  char go = 1;
  if (auto r = sys::write_all(sync.second.get(), &go, 1); !r) return abort(r.error());
  // Setup ends with the model's exec (EOF) or an error record.
  while (true) {
    auto m = sys::recv_message(chan.first.get(), kMaxRecordSize, 2);
    if (!m) return abort(m.error().with_context("the model's sandbox"));
    if (!*m) break;
    auto r = decode((*m)->bytes);
    if (r && r->kind == Record::Kind::error) {
      (void)sys::wait_pid(child.pid);
      return fail(Error{r->code == 0 ? EIO : r->code, r->detail});
    }
  }
  ModelRun run;
  run.child = std::move(child);
  run.lifeline = std::move(sync.second);
  return run;
}

}  // namespace ctx::launcher
