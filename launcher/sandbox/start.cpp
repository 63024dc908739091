#include "launcher/sandbox/start.hpp"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include "launcher/sandbox/reporter.hpp"
#include "launcher/sandbox/sandbox.hpp"
#include "sys/identity.hpp"
#include "sys/namespace.hpp"
#include "sys/probe.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

void SetupReport::take(Record r, std::vector<UniqueFd> fds, const std::function<Result<void>(UniqueFd)>& on_view) {
  switch (r.kind) {
    case Record::Kind::timings:
      for (const auto& t : decode_timings(r.detail)) timings.push_back(t);
      break;
    case Record::Kind::sockets:
      if (fds.size() == 2) {
        notify = std::move(fds[0]);
        control = std::move(fds[1]);
      }
      break;
    case Record::Kind::pty:
      if (fds.size() == 1) master = std::move(fds[0]);
      break;
    case Record::Kind::tools:
      if (fds.size() == 1) tools = std::move(fds[0]);
      break;
    case Record::Kind::view:
      if (fds.size() != 1 || !on_view) break;
      if (auto v = on_view(std::move(fds[0])); !v && !error)
        error = Record{Record::Kind::error, r.step, v.error().code, 0, v.error().with_context("the agent view").msg};
      break;
    case Record::Kind::static_binds:
      for (auto& b : decode_static_binds(r.detail)) static_binds.push_back(std::move(b));
      break;
    case Record::Kind::namespaces:
      for (auto& n : decode_namespaces(r.detail)) namespaces.push_back(std::move(n));
      break;
    case Record::Kind::error: error = std::move(r); break;
  }
}

Error setup_error(const Record& error) { return Error{error.code == 0 ? EIO : error.code, error.detail}; }

int reap_failed(const sys::Child& sandbox) {
  auto st = sys::wait_pid(sandbox.pid);
  return st ? exit_code_of(*st) : kExitLaunchFailed;
}

// The remedies where the kernel will not give this unprivileged caller a
// user namespace (disabled, limited to zero, or Ubuntu's AppArmor
// restriction, which lets the namespace be created but strips its
// capabilities so the first mount fails).
Error with_userns_remedy(const LaunchPlan& plan, Error e) {
  if (plan.ids.privileged || (e.code != EPERM && e.code != EACCES && e.code != ENOSPC && e.code != EUSERS)) return e;
  e.msg += " (unprivileged user namespaces are unavailable to uid " + std::to_string(plan.ids.host_uid) +
           ": raise user.max_user_namespaces, set kernel.unprivileged_userns_clone=1, on Ubuntu load "
           "its profile (apparmor_parser -r /etc/apparmor.d/ctx-agent-run) or set kernel.apparmor_restrict_unprivileged_userns=0, or launch as root "
           "from a systemd unit)";
  return e;
}

bool supervisor_maps_ids(const IdPlan& ids) { return ids.user_ns && !ids.user_ns_after_mounts && ids.map_via_helpers; }

namespace {

// The clone's child: the descriptors it is given, then the sandbox's side.
[[noreturn]] void enter_sandbox(const LaunchPlan& plan, const SandboxStart& how, int lifeline, int channel) {
  if (how.stdio)
    for (int i = 0; i < 3; ++i)
      if (!sys::dup_to((*how.stdio)[static_cast<std::size_t>(i)], i)) _exit(kExitLaunchFailed);
  SandboxIo io;
  io.lifeline = lifeline;
  io.channel = channel;
  io.listen_fd = how.listen_fd;
  io.endpoint_exe = how.endpoint_exe;
  io.all_namespaces = how.all_namespaces;
  io.joined = how.join.has_value();
  io.id_maps_context = how.id_maps_context;
  io.userns_remedy = how.userns_remedy;
  run_sandbox(plan, io);
}

// The child of a start that joins namespaces made ahead (how.join): it
// joins them (their owner's rights: the user namespace first, which gives
// it every capability there, then the network namespace it owns), makes
// the plan's other namespaces, and clones the sandbox's init as the
// supervisor's child; the init's pid goes to the supervisor on the
// lifeline, then this process ends. An error goes on the channel, as the
// sandbox's own would. The supervisor's ends of the lifeline and the
// channel (`theirs`) are closed first: the init's check that the
// supervisor lives (map_itself, be_init) is EOF on its lifeline, which
// this process must not hold off.
[[noreturn]] void join_then_enter(const LaunchPlan& plan, const SandboxStart& how, int lifeline, int channel,
                                  std::array<int, 2> theirs) {
  for (int fd : theirs) (void)sys::close_fd_range(static_cast<unsigned>(fd), static_cast<unsigned>(fd));
  Reporter rep(channel);
  auto fail = [&](const Error& e) {
    rep.send({Record::Kind::error, Step::id_maps, e.code, 0, e.with_context(how.id_maps_context).msg}, {});
    _exit(kExitLaunchFailed);
  };
  if (auto r = sys::join_ns(how.join->user, CLONE_NEWUSER); !r) fail(r.error());
  if (auto r = sys::join_ns(how.join->net, CLONE_NEWNET); !r) fail(r.error());
  if (auto r = sys::unshare_ns(
          static_cast<int>(plan.clone_flags & ~static_cast<std::uint64_t>(CLONE_NEWUSER | CLONE_NEWNET)));
      !r)
    fail(r.error());
  auto init = sys::clone_sibling();
  if (!init) fail(init.error());
  if (*init == 0) enter_sandbox(plan, how, lifeline, channel);
  const std::int32_t pid = *init;
  (void)sys::write_all(lifeline, &pid, sizeof pid);
  _exit(0);
}

Result<void> write_id_maps(const LaunchPlan& plan, const SandboxStart& how, pid_t pid) {
  const IdPlan& ids = plan.ids;
  if (!supervisor_maps_ids(ids)) return {};
  Result<void> r = sys::run_id_map_helpers(pid, ids.uid_map, ids.gid_map);
  if (r) return {};
  Error e = r.error().with_context(how.id_maps_context);
  return fail(how.userns_remedy ? with_userns_remedy(plan, e) : e);
}

// The records until the runtime's exec (EOF), an error record included:
// the sandbox ends right after sending one.
void read_setup(int channel, const SandboxStart& how, StartedSandbox& s) {
  while (true) {
    auto m = sys::recv_message(channel, kMaxRecordSize, 2);
    if (!m) {
      // Nothing more of its setup can be followed.
      (void)sys::signal_pidfd(s.child.pidfd.get(), SIGKILL);
      s.setup.error =
          Record{Record::Kind::error, Step::start, m.error().code, 0, how.report_context + ": " + m.error().msg};
      return;
    }
    if (!*m) return;
    auto r = decode((*m)->bytes);
    if (!r) continue;
    s.setup.take(std::move(*r), std::move((*m)->fds), how.on_view);
  }
}

}  // namespace

Result<StartedSandbox> start_sandbox(const LaunchPlan& plan, const SandboxStart& how) {
  CTX_TRY_ASSIGN(auto sync, sys::make_seqpacket_pair());
  CTX_TRY_ASSIGN(auto chan, sys::make_seqpacket_pair());
  StartedSandbox s;
  s.clone_us = sys::now_us();
  const bool join = how.join.has_value();
  auto child = sys::clone_child({join ? 0 : plan.clone_flags, how.cgroup_fd});
  if (!child) {
    Error e = how.clone_context.empty() ? child.error() : child.error().with_context(how.clone_context);
    return fail(how.userns_remedy && (plan.clone_flags & CLONE_NEWUSER) != 0 ? with_userns_remedy(plan, e) : e);
  }
  if (child->pid == 0) {
    if (join) join_then_enter(plan, how, sync.first.get(), chan.second.get(), {sync.second.get(), chan.first.get()});
    enter_sandbox(plan, how, sync.first.get(), chan.second.get());
  }
  s.child = std::move(*child);
  sync.first.reset();
  chan.second.reset();
  if (join) {
    // The init's pid, from the child that cloned it, written before that
    // child ends; none: the child's error is on the channel. (Ended
    // otherwise between the two, by a kill, it leaves an init no one
    // knows: that init ends at its lifeline's EOF, as this start fails.)
    (void)sys::wait_pid(s.child.pid);
    auto m = sys::recv_message_nowait(sync.second.get(), 16);
    std::int32_t pid = 0;
    if (m && *m && (*m)->size() == sizeof pid) std::memcpy(&pid, (*m)->data(), sizeof pid);
    if (pid <= 0) {
      auto e = sys::recv_message(chan.first.get(), kMaxRecordSize, 0);
      if (e && *e)
        if (auto r = decode((*e)->bytes); r && r->kind == Record::Kind::error) return fail(setup_error(*r));
      return fail(Error{EIO, how.report_context + ": EIO: its start ended before its init"});
    }
    // Our child (CLONE_PARENT), so its pid names it until we reap it.
    auto pidfd = sys::open_pidfd(pid);
    if (!pidfd) {
      (void)sys::signal_pid(pid, SIGKILL);
      (void)sys::wait_pid(pid);
      return fail(pidfd.error());
    }
    s.child.pid = pid;
    s.child.pidfd = std::move(*pidfd);
  }
  auto abort = [&](const Error& e) {
    (void)sys::signal_pidfd(s.child.pidfd.get(), SIGKILL);
    (void)sys::wait_pid(s.child.pid);
    return fail(e);
  };
  // Only a sandbox whose maps the supervisor writes waits for them (and
  // for its go byte); any other goes on alone from its clone, up to its
  // runtime, which waits for kRecordsWritten below.
  const bool hold = supervisor_maps_ids(plan.ids);
  if (hold && how.held)
    if (auto r = how.held(s.child); !r) return abort(r.error());
  if (auto r = write_id_maps(plan, how, s.child.pid); !r) return abort(r.error());
  if (how.mapped)
    if (auto r = how.mapped(); !r) return abort(r.error());
  char go = 1;
  if (hold)
    if (auto r = sys::write_all(sync.second.get(), &go, 1); !r) return abort(r.error());
  // Open until the supervisor exits: EOF there ends the sandbox.
  s.lifeline = std::move(sync.second);
  if (how.released)
    if (auto r = how.released(); !r) return abort(r.error());
  // The runtime starts only now: a launch refused for its start records
  // (a full disk) has run nothing of the agent's, however late the
  // refusal came. The sandbox's setup ran beside the records; the init
  // reads this byte once its setup is done, so it waits only for records
  // that took longer than its setup.
  // A sandbox whose setup failed meanwhile has closed its end (EPIPE,
  // ECONNRESET): its error record is on the channel, read below.
  if (auto r = sys::write_all(s.lifeline.get(), &kRecordsWritten, 1);
      !r && r.error().code != EPIPE && r.error().code != ECONNRESET)
    return abort(r.error());
  read_setup(chan.first.get(), how, s);
  return s;
}

}  // namespace ctx::launcher
