#include "launcher/supervisor.hpp"

#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <nlohmann/json.hpp>

#include "base/names.hpp"
#include "base/path.hpp"
#include "base/timestamp.hpp"
#include "cgroup/placement.hpp"
#include "launcher/channel.hpp"
#include "launcher/children.hpp"
#include "launcher/notify.hpp"
#include "launcher/sandbox.hpp"
#include "sys/file.hpp"
#include "sys/resolve.hpp"
#include "sys/process.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

using nlohmann::json;

/// The cap of <name>.d/log (and of log.1, the previous one).
constexpr std::uint64_t kMaxLogBytes = 1 << 20;


// The agent's files on the host: <name>.d (status, pid, log) and the
// session directory (events.jsonl). Writes are best effort once the
// launch is under way: a full disk must not kill a running agent, but is
// reported on stderr.
class AgentFiles {
 public:
  AgentFiles(const LaunchPlan& plan, int ddir) : plan_(plan), ddir_(ddir) {}

  void status(const char* s) { warn(sys::atomic_replace(ddir_, "status", std::string(s) + "\n"), "status"); }
  void pid(pid_t p) { warn(sys::atomic_replace(ddir_, "pid", std::to_string(p) + "\n"), "pid"); }

  /// Appends a line to <name>.d/log. The log is capped: once a line would
  /// take it past kMaxLogBytes it becomes log.1 (replacing the older one)
  /// and a new log begins, so the newest lines are always kept and the
  /// two never hold more than twice the cap.
  void log(json j) {
    j["ts"] = timestamp_now();
    j["agent"] = plan_.name;
    std::string line = j.dump() + "\n";
    if (log_size_ == kUnknownSize) {
      auto st = sys::stat_at(ddir_, "log");
      log_size_ = st && *st ? (*st)->size : 0;
    }
    if (log_size_ + line.size() > kMaxLogBytes && log_size_ > 0) {
      warn(sys::rename_at(ddir_, "log", ddir_, "log.1"), "log");
      log_size_ = 0;
    }
    auto r = sys::append_file(ddir_, "log", line, 0644);
    if (r) log_size_ += line.size();
    warn(r, "log");
  }

  void event(json j) {
    if (!open_session()) return;
    json out;
    out["ts"] = timestamp_now();
    for (auto& [k, v] : j.items()) out[k] = v;
    out["agent"] = plan_.name;
    out["session"] = plan_.session;
    warn(sys::append_file(session_.get(), "events.jsonl", out.dump() + "\n", 0644, owner()), "events.jsonl");
  }

  /// The session's `state` file (seed 003: an owned child's session ends
  /// "cancelled" when its parent dies).
  void session_state(const std::string& s) {
    if (open_session()) warn(sys::atomic_replace(session_.get(), "state", s + "\n"), "state");
  }

  /// An event in another agent's session stream (the parent's, for
  /// agent.child.cancel), stamped with that agent and session.
  void event_of(const std::string& agent, const std::string& session, json j) {
    auto home = sys::open_dir(plan_.ctx_root + "/home", true);
    if (!home) return;
    // Never through a symlink: the parent's agent may have planted one in
    // its own home, and this supervisor may be root.
    auto dir = sys::open_dir_beneath(home->get(), std::to_string(plan_.owner) + "/agent/" + agent + "/session/" + session);
    if (!dir) return warn(fail(dir.error()), "the parent's events.jsonl");
    json out;
    out["ts"] = timestamp_now();
    for (auto& [k, v] : j.items()) out[k] = v;
    out["agent"] = agent;
    out["session"] = session;
    warn(sys::append_file(dir->get(), "events.jsonl", out.dump() + "\n", 0644, owner()), "the parent's events.jsonl");
  }

  /// `status` of the coordination directory in the parent's session.
  void context_status(const std::string& dir, const std::string& s) {
    if (dir.empty() || !path_is_at_or_under(dir, plan_.ctx_root)) return;
    auto root = sys::open_dir(plan_.ctx_root);
    if (!root) return;
    auto d = sys::open_dir_beneath(root->get(), std::string(path_suffix(dir, plan_.ctx_root)));
    if (!d) return warn(fail(d.error()), "context status");
    warn(sys::atomic_replace(d->get(), "status", s + "\n"), "context status");
  }

 private:
  bool open_session() {
    if (session_.valid()) return true;
    auto home = sys::open_dir(plan_.ctx_root + "/home", true);
    if (!home) return warn(fail(home.error()), "events.jsonl"), false;
    std::string rel = std::to_string(plan_.owner) + "/agent/" + plan_.name + "/session/" + plan_.session;
    auto dir = sys::open_or_make_dirs(home->get(), rel, 0755, owner());
    if (!dir) return warn(fail(dir.error()), "events.jsonl"), false;
    session_ = std::move(*dir);
    return true;
  }
  // A root supervisor gives what it creates in the owner's home tier to
  // the agent's host ids, so the agent's own tools can append events.
  std::optional<sys::Ownership> owner() const {
    if (!plan_.ids.privileged) return std::nullopt;
    return sys::Ownership{plan_.ids.host_uid, plan_.ids.host_gid};
  }
  void warn(const Result<void>& r, const char* what) {
    if (!r) std::fprintf(stderr, "ctx-agent-run: warning: %s.d/%s: %s\n", plan_.name.c_str(), what, r.error().msg.c_str());
  }
  static constexpr std::uint64_t kUnknownSize = ~std::uint64_t{0};
  const LaunchPlan& plan_;
  int ddir_;
  UniqueFd session_;
  std::uint64_t log_size_ = kUnknownSize;
};

// Adds the remedy to errors that mean the kernel will not give this
// unprivileged caller a user namespace (disabled, limited to zero, or
// Ubuntu's AppArmor restriction, which lets the namespace be created but
// strips its capabilities so the first mount fails).
Error with_userns_remedy(const LaunchPlan& plan, Error e) {
  if (plan.ids.privileged || (e.code != EPERM && e.code != EACCES && e.code != ENOSPC && e.code != EUSERS)) return e;
  e.msg += " (unprivileged user namespaces are unavailable to uid " + std::to_string(plan.ids.host_uid) +
           ": raise user.max_user_namespaces, set kernel.unprivileged_userns_clone=1, on Ubuntu load "
           "examples/apparmor/ctx-agent-run or set kernel.apparmor_restrict_unprivileged_userns=0, or launch as root "
           "from a systemd unit)";
  return e;
}

// Without a writable cgroup v2 the sandbox is supervised through its pidfd
// and its pid namespace (whose end kills everything in it). Said on stderr
// once per user and boot where a verified private directory can hold the
// marker (SuperviseOptions::marker_dir), otherwise every time; in the
// agent's log every time.
void warn_once_without_cgroup(const std::string& marker_dir, const std::string& why) {
  const char* marker = "ctx-agent-run.warned-no-cgroup";
  if (!marker_dir.empty())
    if (auto dir = sys::open_dir(marker_dir); dir) {
      auto seen = sys::stat_at(dir->get(), marker);
      if (seen && *seen) return;
      (void)sys::append_file(dir->get(), marker, "", 0600);
    }
  std::fprintf(stderr, "ctx-agent-run: warning: no writable cgroup v2 (%s); supervising with the pidfd and the pid namespace "
               "instead (--require-cgroup makes this an error)\n", why.c_str());
}

// What the sandbox reported over the channel until its runtime's execve
// (EOF) or its error.
struct SetupReport {
  json timings = json::object();
  UniqueFd notify;   ///< the NOTIFY_SOCKET, bound in the sandbox
  UniqueFd control;  ///< the control socket, bound in the sandbox
  std::optional<Record> error;
};

SetupReport read_setup(int channel) {
  SetupReport out;
  while (true) {
    auto m = sys::recv_message(channel, kMaxRecordSize, 2);
    if (!m) {
      out.error = Record{Record::Kind::error, Step::start, m.error().code, 0, "the sandbox's report: " + m.error().msg};
      return out;
    }
    if (!*m) return out;  // EOF: the runtime's execve succeeded
    auto r = decode((*m)->bytes);
    if (!r) continue;
    switch (r->kind) {
      case Record::Kind::timing:
        out.timings[std::string(to_string(r->step))] = r->usec;
        break;
      case Record::Kind::sockets:
        if ((*m)->fds.size() == 2) {
          out.notify = std::move((*m)->fds[0]);
          out.control = std::move((*m)->fds[1]);
        }
        break;
      case Record::Kind::pty:
        break;
      case Record::Kind::error:
        out.error = std::move(*r);
        break;
    }
  }
}

// Whether pid (a socket peer or a datagram's sender, in our pid namespace)
// is a process of the sandbox: in its pid namespace. Unknown is no.
bool in_sandbox(unsigned long sandbox_pidns, const Result<pid_t>& pid) {
  if (!pid || *pid <= 0 || sandbox_pidns == 0) return false;
  auto ns = sys::ns_inode(*pid, "pid");
  return ns && *ns == sandbox_pidns;
}

// The watchdog of a parent: a small process outside the agent's cgroup
// that outlives a supervisor killed by SIGKILL and then does what its
// teardown would have done: waits for the owned children (they got
// PR_SET_PDEATHSIG and cancel themselves), kills and removes the cgroup
// subtree, removes <name>.sock and marks the agent dead. Started with the
// first child (a childless agent's leftovers are reaped by its next
// launch), it closes every fd it does not need, the sandbox's lifeline
// among them. A supervisor that ends normally writes 'c' to the returned
// pipe and reaps it. It keeps the one-instance lock (the shared open file
// of <name>.d) while it cleans.
Result<std::pair<UniqueFd, pid_t>> start_watchdog(const LaunchPlan& plan, int agents, int ddir,
                                                  cgroup::Placement* placement, int grace_ms) {
  CTX_TRY_ASSIGN(auto pipe, sys::make_pipe());
  CTX_TRY_ASSIGN(pid_t pid, sys::fork_process());
  if (pid != 0) return std::pair<UniqueFd, pid_t>(std::move(pipe.second), pid);
  // The supervisor's signal mask is inherited: SIGINT, SIGTERM etc. stay
  // blocked here, so a ^C to the process group does not stop the cleanup.
  std::vector<int> keep{2, pipe.first.get(), agents, ddir};
  if (placement != nullptr)
    for (int fd : placement->fds()) keep.push_back(fd);
  if (!sys::close_fds_except(keep)) _exit(1);
  char c = 0;
  auto r = sys::read_byte(pipe.first.get(), c);
  if (r && *r && c == 'c') _exit(0);
  AgentFiles files(plan, ddir);
  files.status("stopping");
  if (placement != nullptr) {
    (void)placement->wait_children_gone(grace_ms + 3000);
    (void)placement->remove();
  }
  (void)sys::remove_at(agents, plan.name + ".sock");
  files.status("dead");
  files.log({{"event", "agent.stop"}, {"reason", "supervisor_killed"}});
  files.event({{"type", "agent.stop"}, {"object", "agent/" + plan.name}, {"status", "error"}, {"reason", "supervisor_killed"}});
  _exit(0);
}

// A run id for the `parent` file of the children this run creates.
std::string new_run_id() {
  char buf[32];
  std::snprintf(buf, sizeof buf, "r%llx%x", static_cast<unsigned long long>(sys::now_us()), static_cast<unsigned>(::getpid()));
  return buf;
}

}  // namespace

int supervise(const agentdir::AgentSpec& spec, const LaunchPlan& plan, const SuperviseOptions& opts,
              std::optional<Error>& error) {
  auto failed = [&](Error e) {
    error = std::move(e);
    return kExitLaunchFailed;
  };
  std::uint64_t t0 = sys::now_us();
  // First, so that an owned child's PR_SET_PDEATHSIG (parent_dead_signal)
  // waits in the signalfd instead of killing us half-way.
  const std::vector<int> watched{SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, parent_dead_signal(),
                                 stop_signal()};
  auto sigfd = sys::block_into_signalfd(watched);
  if (!sigfd) return failed(sigfd.error());
  auto agents = sys::open_dir(plan.ctx_root + "/agent");
  if (!agents) return failed(agents.error());
  auto ddir = sys::open_dir_at(agents->get(), plan.name + ".d");
  if (!ddir) return failed(ddir.error().with_context(plan.name + ".d"));

  // One instance per agent: the lock lives as long as this process.
  auto locked = sys::try_lock(ddir->get());
  if (!locked) return failed(locked.error());
  if (!*locked) {
    std::string pid = "?";
    if (auto f = sys::read_small_file(ddir->get(), "pid", 64); f && *f) pid = (*f)->data.substr(0, (*f)->data.find('\n'));
    return failed(Error{EBUSY, plan.name + ": EBUSY: already running (supervisor pid " + pid + "); stop it first"});
  }

  AgentFiles files(plan, ddir->get());
  if (auto prev = sys::read_small_file(ddir->get(), "status", 64); prev && *prev && (*prev)->data != "dead\n")
    files.log({{"event", "agent.reap"}, {"previous_status", (*prev)->data.substr(0, (*prev)->data.find('\n'))}});

  auto fail_launch = [&](const Error& e) {
    files.status("dead");
    files.log({{"event", "agent.error"}, {"code", errno_name(e.code)}, {"error", e.msg}});
    files.event({{"type", "agent.stop"}, {"object", "agent/" + plan.name}, {"status", "error"}, {"exit_status", kExitLaunchFailed},
                 {"error", e.msg}});
    files.context_status(opts.handoff_dir, "failed");
    return failed(e);
  };

  // The agent's cgroup subtree; its destructor kills and removes it on
  // every way out of this function.
  std::optional<cgroup::Placement> placement;
  {
    std::string why_not;
    bool reaped = false;
    cgroup::PlacementOptions po{plan.name, plan.ctx_root, plan.owner, plan.ids.privileged, opts.cgroup_base, plan.limits,
                                opts.cgroup_leaf};
    auto pl = cgroup::Placement::create(po, why_not, reaped);
    if (!pl) return fail_launch(pl.error());
    if (reaped) files.log({{"event", "agent.reap"}, {"cgroup", (*pl) ? (*pl)->agent_dir() : std::string()}});
    if (*pl) {
      placement = std::move(**pl);
    } else {
      bool limits = plan.limits && (plan.limits->memory_max || plan.limits->pids_max || plan.limits->cpu_max);
      if (opts.require_cgroup || limits)
        return fail_launch(Error{EOPNOTSUPP, std::string(limits ? "limits" : "--require-cgroup") +
                                                 ": EOPNOTSUPP: no writable cgroup v2: " + why_not});
      files.log({{"event", "agent.cgroup"}, {"status", "unavailable"}, {"reason", why_not}});
      warn_once_without_cgroup(opts.marker_dir, why_not);
    }
  }
  // Every return from here on releases the watchdog, if one was started.
  std::optional<std::pair<UniqueFd, pid_t>> watchdog;
  struct WatchdogGuard {
    std::optional<std::pair<UniqueFd, pid_t>>& w;
    ~WatchdogGuard() {
      if (!w) return;
      char c = 'c';
      (void)sys::write_all(w->first.get(), &c, 1);
      w->first.reset();
      (void)sys::wait_pid(w->second);
    }
  } watchdog_guard{watchdog};

  auto listen = sys::listen_unix_at(agents->get(), plan.name + ".sock", plan.ctx_root + "/agent/" + plan.name + ".sock");
  if (!listen) return fail_launch(listen.error());

  auto sync = sys::make_pipe();
  auto chan = sys::make_seqpacket_pair();
  if (!sync) return fail_launch(sync.error());
  if (!chan) return fail_launch(chan.error());

  std::uint64_t t_clone = sys::now_us();
  auto child = sys::clone_child({plan.clone_flags, placement ? placement->runtime_fd() : -1});
  if (!child) {
    Error e = child.error().with_context("creating namespaces");
    return fail_launch((plan.clone_flags & CLONE_NEWUSER) != 0 ? with_userns_remedy(plan, e) : e);
  }
  if (child->pid == 0) {
    SandboxIo io{sync->first.get(), chan->second.get(), listen->get()};
    run_sandbox(plan, io);
  }
  sync->first.reset();
  chan->second.reset();
  listen->reset();

  auto abort_child = [&](const Error& e) {
    (void)sys::signal_pidfd(child->pidfd.get(), SIGKILL);
    (void)sys::wait_pid(child->pid);
    (void)sys::remove_at(agents->get(), plan.name + ".sock");
    return fail_launch(e);
  };
  // Namespace ids are read while the child is held at the sync pipe: a
  // runtime that exits at once would take them with it.
  json ns = json::object();
  if (opts.json_status_fd >= 0)
    for (const char* n : {"user", "mnt", "pid", "net", "uts", "ipc", "cgroup"})
      if (auto ino = sys::ns_inode(child->pid, n)) ns[n] = *ino;
  if (plan.ids.user_ns && !plan.ids.user_ns_after_mounts) {
    Result<void> r = plan.ids.map_via_helpers
                         ? sys::run_id_map_helpers(child->pid, plan.ids.uid_map, plan.ids.gid_map)
                         : sys::write_id_maps(child->pid, plan.ids.uid_map, plan.ids.gid_map, plan.ids.deny_setgroups);
    if (!r) return abort_child(with_userns_remedy(plan, r.error().with_context("writing id maps")));
  }
  // The sandbox's pid namespace: only its processes may use the sockets.
  const unsigned long sandbox_pidns = sys::ns_inode(child->pid, "pid").value_or(0);
  char go = 1;
  if (auto r = sys::write_all(sync->second.get(), &go, 1); !r) return abort_child(r.error());
  // sync->second stays open until we exit: the sandbox's lifeline.

  // Written while the sandbox sets itself up on the other CPU: these file
  // writes cost as much as the whole namespace setup. Nothing reads the
  // runtime's notifications before they are done, so status still goes
  // start -> ready.
  files.status("start");
  files.pid(::getpid());
  files.log({{"event", "agent.start"}, {"session", plan.session}, {"argv", plan.argv}});
  files.event({{"type", "agent.start"}, {"object", "agent/" + plan.name}, {"status", "ok"}});

  // Setup ends with the runtime's exec (EOF on the channel) or an error.
  SetupReport setup = read_setup(chan->first.get());
  std::uint64_t t_exec = sys::now_us();
  if (!setup.error && (!setup.notify.valid() || !setup.control.valid()))
    setup.error = Record{Record::Kind::error, Step::run_ctx, EPROTO, 0, "the sandbox did not hand over its sockets"};
  if (!setup.error)
    if (auto r = sys::set_nonblocking(setup.control.get()); !r)
      setup.error = Record{Record::Kind::error, Step::run_ctx, r.error().code, 0, r.error().msg};
  if (setup.error) {
    Error e{setup.error->code == 0 ? EIO : setup.error->code, setup.error->detail};
    auto st = sys::wait_pid(child->pid);
    int code = st ? exit_code_of(*st) : kExitLaunchFailed;
    (void)sys::remove_at(agents->get(), plan.name + ".sock");
    if (code == kExitNotFound || code == kExitNotExecutable) {
      files.status("dead");
      files.log({{"event", "agent.error"}, {"code", errno_name(e.code)}, {"error", e.msg}, {"exit_status", code}});
      files.event({{"type", "agent.stop"}, {"object", "agent/" + plan.name}, {"status", "error"}, {"exit_status", code}});
      files.context_status(opts.handoff_dir, "failed");
      error = e;
      return code;
    }
    if (setup.error->step == Step::private_mounts) e = with_userns_remedy(plan, e);
    return fail_launch(e);
  }
  json timings = setup.timings;
  timings["prepare"] = t_clone - t0;
  timings["total"] = t_exec - t0;
  files.log({{"event", "agent.exec"}, {"pid", child->pid}, {"setup_us", t_exec - t0}});
  if (opts.json_status_fd >= 0) {
    json j{{"event", "started"}, {"agent", plan.name}, {"pid", child->pid}, {"supervisor_pid", ::getpid()},
           {"namespaces", ns}, {"timings_us", timings},
           {"cgroup", placement ? json(placement->agent_dir() + "/runtime") : json(nullptr)}};
    std::string s = j.dump() + "\n";
    (void)sys::write_all(opts.json_status_fd, s.data(), s.size());
  }
  const bool owned = spec.parent.has_value() && !opts.handoff_dir.empty();
  if (owned) {
    files.context_status(opts.handoff_dir, "running");
    files.session_state("running");
  }

  ChildrenConfig cc;
  cc.parent = &spec;
  cc.session = plan.session;
  cc.run = new_run_id();
  cc.self_exe = opts.self_exe;
  cc.agent_cgroup = placement ? placement->agent_dir() : std::string();
  cc.require_cgroup = opts.require_cgroup;
  cc.cancel_grace_ms = opts.cancel_grace_ms;
  cc.env = opts.child_env;
  if (plan.ids.privileged) cc.owner = sys::Ownership{plan.ids.host_uid, plan.ids.host_gid};
  cc.event = [&files](json j) { files.event(std::move(j)); };
  cc.before_first_child = [&]() -> Result<void> {
    if (watchdog) return {};
    CTX_TRY_ASSIGN(watchdog, start_watchdog(plan, agents->get(), ddir->get(),
                                            placement ? &*placement : nullptr, opts.cancel_grace_ms));
    return {};
  };
  cc.peer_allowed = [&](int conn) { return in_sandbox(sandbox_pidns, sys::peer_pid(conn)); };
  Children children(std::move(cc), std::move(setup.control));

  // Supervision: signals, sd_notify messages, the control socket, owned
  // children, the runtime's exit; and the cancellation sequence of seed
  // 003 when our own parent dies.
  std::string state = "start";
  int exit_code = kExitLaunchFailed;
  bool running = true;
  bool cancelled = false, killed = false;
  std::string cancel_reason;  // parent_dead or stopped
  std::uint64_t kill_at = 0;
  auto cancel = [&](const char* reason) {
    if (cancelled) return;
    cancelled = true;
    cancel_reason = reason;
    state = "stopping";
    files.status("stopping");
    files.log({{"event", "agent.cancel"}, {"reason", cancel_reason}});
    (void)sys::remove_at(agents->get(), plan.name + ".sock");  // no new connections
    children.close_control();
    children.cancel_all();
    (void)sys::signal_pidfd(child->pidfd.get(), SIGTERM);
    kill_at = sys::now_us() + static_cast<std::uint64_t>(opts.cancel_grace_ms) * 1000;
  };
  // sd_notify: only from processes of the sandbox, and at a bounded rate.
  NotifyLimiter limiter(kNotifyBurst, kNotifyPerSecond);
  auto read_notify = [&] {
    for (int i = 0; i < 64; ++i) {
      auto d = sys::recv_datagram_from(setup.notify.get());
      if (!d || !*d) break;
      if (!in_sandbox(sandbox_pidns, (*d)->pid) || !limiter.take(sys::now_us())) continue;
      if (auto n = limiter.dropped_since_last(); n > 0) files.log({{"event", "agent.notify"}, {"dropped", n}});
      NotifyEffect e = apply_notify((*d)->bytes, state);
      if (e.ready && !opts.parent_notify_socket.empty()) (void)sys::send_datagram(opts.parent_notify_socket, "READY=1");
      if (e.state != state && !cancelled) {
        state = e.state;
        files.status(state.c_str());
        files.log({{"event", "agent.status"}, {"status", state}});
      }
    }
  };
  // The parent may have died between our start and now.
  if (opts.owned_by != 0 && ::getppid() != opts.owned_by) cancel("parent_dead");
  while (running) {
    std::vector<struct pollfd> fds{{sigfd->get(), POLLIN, 0}, {child->pidfd.get(), POLLIN, 0}, {setup.notify.get(), POLLIN, 0}};
    children.add_poll_fds(fds);
    int timeout = -1;
    if (cancelled && !killed) {
      std::uint64_t now = sys::now_us();
      timeout = now >= kill_at ? 0 : static_cast<int>((kill_at - now + 999) / 1000);
    }
    if (!sys::poll_fds(fds, timeout)) break;
    if (cancelled && !killed && sys::now_us() >= kill_at) {
      // The grace period is over: SIGKILL to everything in runtime/ (or,
      // without a cgroup, to the sandbox's init, whose end kills the pid
      // namespace).
      killed = true;
      if (placement) (void)placement->kill_runtime();
      (void)sys::signal_pidfd(child->pidfd.get(), SIGKILL);
    }
    if (fds[2].revents & POLLIN) read_notify();
    if (fds[0].revents & POLLIN) {
      auto sig = sys::read_signalfd(sigfd->get());
      if (sig && *sig == parent_dead_signal()) {
        cancel("parent_dead");
      } else if (sig && *sig == stop_signal()) {
        cancel("stopped");
      } else if (sig && *sig != SIGCHLD) {
        if (state != "stopping") {
          state = "stopping";
          files.status("stopping");
        }
        files.log({{"event", "agent.signal"}, {"signal", *sig}});
        (void)sys::signal_pidfd(child->pidfd.get(), *sig);
      }
    }
    children.handle(fds);
    if (fds[1].revents & POLLIN) {
      auto st = sys::wait_pid(child->pid);
      exit_code = st ? exit_code_of(*st) : kExitLaunchFailed;
      running = false;
    }
  }

  // Our runtime is gone: so is the parent of our children (seed 003,
  // "Parent Death"). Mark ourselves stopping, then each child cancels
  // itself (SIGTERM, grace, cgroup.kill) and reports; those that outlast
  // the grace period by far are SIGKILLed with their subtrees below.
  (void)sys::remove_at(agents->get(), plan.name + ".sock");
  if (children.running() > 0) {
    if (state != "stopping") files.status("stopping");
    children.close_control();
    children.cancel_all();
    // Each child runs its own sequence (SIGTERM, grace, cgroup.kill) and
    // records it; once the grace period is over, one cgroup.kill of our
    // subtree ends whatever runtime is left below us at once.
    children.wait_all(opts.cancel_grace_ms, false);
    if (placement) (void)placement->kill_subtree();
    children.wait_all(3000, true);
  }
  if (placement)
    if (auto r = placement->remove(); !r) files.log({{"event", "agent.error"}, {"error", r.error().msg}});
  files.status("dead");
  files.log({{"event", "agent.stop"}, {"exit_status", exit_code}});
  // A parent's stop ends in "stopped", the parent's death in "cancelled".
  const bool stopped = cancelled && cancel_reason == "stopped";
  const char* outcome = stopped ? "stopped" : cancelled ? "cancelled" : exit_code == 0 ? "ok" : "error";
  files.event({{"type", "agent.stop"}, {"object", "agent/" + plan.name}, {"status", outcome}, {"exit_status", exit_code}});
  if (owned) {
    const char* s = stopped ? "stopped" : cancelled ? "cancelled" : exit_code == 0 ? "done" : "failed";
    files.session_state(s);
    files.context_status(opts.handoff_dir, s);
  }
  if (cancelled && !stopped && spec.parent)
    files.event_of(spec.parent->agent, spec.parent->session.empty() ? "default" : spec.parent->session,
                   {{"type", "agent.child.cancel"}, {"parent", spec.parent->agent}, {"child", plan.name},
                    {"reason", "parent_dead"}, {"object", "agent/" + plan.name}});
  if (opts.json_status_fd >= 0) {
    std::string s = json{{"event", "exited"}, {"agent", plan.name}, {"exit_status", exit_code}}.dump() + "\n";
    (void)sys::write_all(opts.json_status_fd, s.data(), s.size());
  }
  return exit_code;
}

}  // namespace ctx::launcher
