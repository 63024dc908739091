#include "launcher/supervisor/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <functional>
#include <nlohmann/json.hpp>

#include "agentdir/tier.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"
#include "base/timestamp.hpp"
#include "cgroup/placement.hpp"
#include "launcher/control/model_gate.hpp"
#include "launcher/control/server.hpp"
#include "launcher/control/tool_gate.hpp"
#include "launcher/records/agent_files.hpp"
#include "launcher/records/as_owner.hpp"
#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/endpoint_start.hpp"
#include "launcher/sandbox/preflight.hpp"
#include "launcher/sandbox/sandbox.hpp"
#include "launcher/sandbox/start.hpp"
#include "launcher/supervisor/notify.hpp"
#include "launcher/supervisor/pty_relay.hpp"
#include "launcher/supervisor/view_process.hpp"
#include "launcher/supervisor/watchdog.hpp"
#include "mountspec/geometry.hpp"
#include "sys/fault.hpp"
#include "sys/file.hpp"
#include "sys/landlock.hpp"
#include "sys/namespace.hpp"
#include "sys/probe.hpp"
#include "sys/process.hpp"
#include "sys/pty.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

using nlohmann::json;

// Without a writable cgroup v2 the sandbox is supervised through its pidfd
// and its pid namespace (whose end kills everything in it). Said on stderr
// once per user and boot where a verified private directory can hold the
// marker (SuperviseOptions::marker_dir), otherwise every time; in the
// agent's log every time.
// The directory that holds the agent's .d/ and socket: <ctx>/agent, or
// for a user agent <ctx>/home/<U>/agent reached beneath the CTX root
// without a symlink (what the loader read; its owner U could otherwise
// swap in a link to another agent's directory).
Result<UniqueFd> open_agents_dir(const LaunchPlan& plan) {
  if (!plan.tier_user) return sys::open(sys::at_cwd, plan.ctx_root + "/agent", sys::Open::directory);
  CTX_TRY_ASSIGN(UniqueFd root, sys::open(sys::at_cwd, plan.ctx_root, sys::Open::directory));
  auto d = sys::open(root.get(), agentdir::agents_rel(plan.tier_user),
                     sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
  if (!d) return fail(d.error().with_context(path_join(plan.ctx_root, agentdir::agents_rel(plan.tier_user))));
  return d;
}

void warn_once_without_cgroup(const std::string& marker_dir, const std::string& why) {
  const char* marker = "ctx-agent-run.warned-no-cgroup";
  if (!marker_dir.empty())
    if (auto dir = sys::open(sys::at_cwd, marker_dir, sys::Open::directory); dir) {
      auto seen = sys::stat_at(dir->get(), marker);
      if (seen && *seen) return;
      (void)sys::append_file(dir->get(), marker, "", 0600);
    }
  std::fprintf(stderr, "ctx-agent-run: warning: no writable cgroup v2 (%s): supervising by pidfd instead\n", why.c_str());
}

// Whether pid (a socket peer or a datagram's sender, in our pid namespace)
// is a process of the sandbox: in its pid namespace. Unknown is no.
bool in_sandbox(unsigned long sandbox_pidns, const Result<pid_t>& pid) {
  if (!pid || *pid <= 0 || sandbox_pidns == 0) return false;
  auto ns = sys::ns_inode(*pid, "pid");
  return ns && *ns == sandbox_pidns;
}

// A run id for the `parent` file of the children this run creates.
std::string new_run_id() {
  char buf[32];
  std::snprintf(buf, sizeof buf, "r%llx%x", static_cast<unsigned long long>(sys::now_us()),
                static_cast<unsigned>(::getpid()));
  return buf;
}

}  // namespace

namespace {

// One supervised launch, in the order of docs/launcher.md: open the
// agent's files and take the lock, place it in its cgroup, start the
// sandbox, read its setup report, supervise, tear down. Every member
// function is one concern; run() is the sequence.

class Supervisor : private ControlHost {
 public:
  Supervisor(const agentdir::AgentSpec& spec, const LaunchPlan& plan, const SuperviseOptions& opts,
             std::optional<Error>& error)
      : spec_(spec), plan_(plan), opts_(opts), error_(error) {}

  int run();

 private:
  int failed(Error e);
  int fail_launch(const Error& e);
  std::optional<int> open_agent();
  std::optional<int> take_locks();
  std::string socket_name() const;
  std::optional<int> place();
  std::optional<int> watch();
  std::optional<int> start_sandbox();
  Result<void> read_namespaces(const sys::Child& sandbox);
  Result<void> write_start_records();
  void log_start_notes();
  std::optional<int> finish_setup();
  void report_started();
  void start_children();
  bool peer_allowed(int conn) const override;
  std::optional<std::string> inner_path(const std::string& host) const override;
  void child_spawned(int pidfd) override;
  void supervise_loop();
  void read_lifeline();
  void reap_sandbox();
  void view_ended();
  void read_notify();
  void on_signal(int sig);
  void cancel(const char* reason);
  void set_state(AgentState s);
  int teardown();

  const agentdir::AgentSpec& spec_;
  const LaunchPlan& plan_;
  const SuperviseOptions& opts_;
  std::optional<Error>& error_;

  std::uint64_t t0_ = sys::now_us(), t_clone_ = 0, t_exec_ = 0;
  UniqueFd sigfd_, agents_, ddir_;
  UniqueFd idir_;         ///< <name>.d/instance/<session>, locked while we run
  bool primary_ = false;  ///< holds <name>.d's lock (docs/abi.md, "Instances")
  // The instance's socket (socket_name()) exists from start_sandbox on;
  // its name goes on every way out (the descriptor is the sandbox's).
  struct SocketName {
    int dir = -1;
    std::string name;
    void remove() {
      if (dir >= 0) (void)sys::remove_at(dir, name);
      dir = -1;
    }
    ~SocketName() { remove(); }
  } socket_name_;
  std::optional<AgentFiles> files_;
  std::optional<cgroup::Placement> placement_;
  std::optional<Watchdog> watchdog_;
  std::optional<sys::Child> child_;
  UniqueFd lifeline_;
  bool lifeline_ended_ = false;  ///< the sandbox's end closed it: no longer polled
  bool sandbox_ended_ = false;   ///< its init's word: the runtime ended, nothing of it runs
  bool sandbox_reaped_ = false;
  unsigned long sandbox_pidns_ = 0;  ///< only its processes may use the sockets
  json namespaces_ = json::object();
  SetupReport setup_;
  std::optional<ToolGate> tools_;    ///< decides `ctx tool` calls
  std::optional<ModelGate> models_;  ///< decides and starts `ctx model` calls
  std::optional<ControlServer> children_;  ///< serves the control socket with the two gates above
  std::optional<PtyRelay> relay_;
  std::optional<ViewProcess> view_;
  // Said in the log once the session's files are written (place()).
  std::vector<Event> start_logs_;
  std::optional<std::string> without_cgroup_;  ///< why there is no cgroup, for the warning
  bool session_refused_ = false;               ///< begin_session failed: nothing recorded

  AgentState state_ = AgentState::start;
  int exit_code_ = kExitLaunchFailed;
  bool cancelled_ = false, killed_ = false;
  bool notify_refused_ = false;
  std::string cancel_reason_;  // parent_dead or stopped
  std::uint64_t kill_at_ = 0;
};

int Supervisor::failed(Error e) {
  error_ = std::move(e);
  return kExitLaunchFailed;
}

int Supervisor::fail_launch(const Error& e) {
  log_start_notes();
  files_->status(AgentState::dead);
  files_->log({"agent.error", "", EventStatus::error, {{"code", errno_name(e.code)}, {"error", e.msg}}});
  files_->event({"agent.stop", "", EventStatus::error, {{"exit_status", kExitLaunchFailed}, {"error", e.msg}}});
  files_->end_session("failed");
  files_->context_status(opts_.handoff_dir, "failed");
  return failed(e);
}

// Signals first, so that an owned child's PR_SET_PDEATHSIG
// (parent_dead_signal) waits in the signalfd instead of killing us
// half-way; then <name>.d and the instance's locks (take_locks), which
// live as long as this process.
std::optional<int> Supervisor::open_agent() {
  std::vector<int> watched{SIGTERM,      SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, parent_dead_signal(),
                           stop_signal()};
  if (plan_.terminal) watched.push_back(SIGWINCH);
  auto sigfd = sys::block_into_signalfd(watched);
  if (!sigfd) return failed(sigfd.error());
  sigfd_ = std::move(*sigfd);
  auto agents = open_agents_dir(plan_);
  if (!agents) return failed(agents.error());
  agents_ = std::move(*agents);
  auto ddir = sys::open(agents_.get(), plan_.name + ".d", sys::Open::directory | sys::Open::no_follow);
  if (!ddir) return failed(ddir.error().with_context(plan_.name + ".d"));
  ddir_ = std::move(*ddir);
  if (auto code = take_locks()) return code;
  files_.emplace(plan_, ddir_.get(), idir_.get(), primary_);
  // The session's directories before the sandbox, which may show them;
  // its files come after the clone (write_start_records).
  if (auto r = files_->open_session_tree(); !r) return failed(r.error());
  if (auto f = sys::fault_at("supervisor.open_agent"); !f) return fail_launch(f.error());
  return std::nullopt;
}

// The agent's lock (flock on <name>.d) makes the primary instance, as
// before instances; held by another, this launch is an extra instance.
// Each instance then locks <name>.d/instance/<session>: one supervisor per
// session. An owned child runs once (its parent starts it by name).
std::optional<int> Supervisor::take_locks() {
  auto pid_in = [](int dir) {
    std::string pid = "?";
    if (auto f = sys::read_small_file(dir, "pid", 64); f && *f) pid = (*f)->data.substr(0, (*f)->data.find('\n'));
    return pid;
  };
  auto locked = sys::try_lock(ddir_.get());
  if (!locked) return failed(locked.error());
  primary_ = *locked;
  if (!primary_ && (opts_.owned_by != 0 || !opts_.handoff_dir.empty()))
    return failed(Error{
        EBUSY, plan_.name + ": EBUSY: already running (supervisor pid " + pid_in(ddir_.get()) + "); stop it first"});
  const std::string rel = "instance/" + plan_.session;
  // Made with the rights of <name>.d's owner: a root launch of an agent
  // whose owner keeps its .d must not make directories the owner's own
  // launches cannot write their status into.
  sys::MakeAs as;
  if (plan_.ids.privileged)
    if (auto st = sys::stat_fd(ddir_.get())) as = sys::Creds{st->uid, st->gid, {}};
  auto idir = sys::open_or_make_dirs(ddir_.get(), rel, 0755, as);
  if (!idir) return failed(idir.error().with_context(plan_.name + ".d/" + rel));
  idir_ = std::move(*idir);
  auto mine = sys::try_lock(idir_.get());
  if (!mine) return failed(mine.error().with_context(plan_.name + ".d/" + rel));
  if (!*mine)
    return failed(Error{EBUSY, plan_.name + ": EBUSY: session " + plan_.session +
                                   " is already running (supervisor pid " + pid_in(idir_.get()) +
                                   "); stop it first, or launch with another --session"});
  return std::nullopt;
}

// The primary's socket is <name>.sock (the name before instances); an
// extra's is <name>@<session>.sock, which no agent's can be (an agent
// name has no '@').
std::string Supervisor::socket_name() const {
  return primary_ ? plan_.name + ".sock" : plan_.name + "@" + plan_.session + ".sock";
}

// The agent's cgroup subtree; its destructor kills and removes it on every
// way out.
std::optional<int> Supervisor::place() {
  std::string why_not;
  bool reaped = false;
  // A user agent's cgroup is agent-<name>.u<U>: never its system namesake's.
  const std::string agent = agentdir::tier_instance(plan_.name, plan_.tier_user);
  // An extra instance's is <primary's>@<session>: its own leftovers are
  // the only ones it reaps (under its session's lock), never another
  // instance's; no agent's name has an '@'.
  std::string leaf = opts_.cgroup_leaf;
  if (!primary_) leaf = cgroup::agent_cgroup_name(agent, plan_.ctx_root) + "@" + plan_.session;
  cgroup::PlacementOptions po{
      agent, plan_.ctx_root, plan_.owner, plan_.ids.privileged, opts_.cgroup_base, plan_.limits, leaf};
  auto pl = cgroup::Placement::create(po, why_not, reaped);
  if (!pl) return fail_launch(pl.error());
  if (reaped)
    start_logs_.push_back(
        {"agent.reap", "", EventStatus::ok, {{"cgroup", (*pl) ? (*pl)->agent_dir() : std::string()}}});
  if (*pl) {
    placement_ = std::move(**pl);
    auto [bytes, fds] = placement_->handover();
    if (auto r = sys::send_message(watchdog_->socket(), "g" + bytes, fds); !r)
      return fail_launch(r.error().with_context("handing the cgroup to the watchdog"));
    if (auto f = sys::fault_at("supervisor.place"); !f) return fail_launch(f.error());
    return std::nullopt;
  }
  bool limits = plan_.limits && (plan_.limits->memory_max || plan_.limits->pids_max || plan_.limits->cpu_max);
  if (opts_.require_cgroup || limits)
    return fail_launch(Error{EOPNOTSUPP, std::string(limits ? "limits" : "--require-cgroup") +
                                             ": EOPNOTSUPP: no writable cgroup v2: " + why_not});
  start_logs_.push_back({"agent.cgroup", "", EventStatus::unavailable, {{"reason", why_not}}});
  without_cgroup_ = why_not;
  if (auto f = sys::fault_at("supervisor.place"); !f) return fail_launch(f.error());
  return std::nullopt;
}

// The watchdog (start_watchdog), from before anything a launch makes
// exists.
std::optional<int> Supervisor::watch() {
  WatchdogJob job{plan_,
                  agents_.get(),
                  ddir_.get(),
                  idir_.get(),
                  primary_,
                  socket_name(),
                  opts_.cancel_grace_ms,
                  spec_.parent ? opts_.handoff_dir : std::string()};
  auto w = Watchdog::start(job);
  if (!w) return fail_launch(w.error().with_context("the watchdog"));
  watchdog_.emplace(std::move(*w));
  if (auto f = sys::fault_at("supervisor.watchdog"); !f) return fail_launch(f.error());
  return std::nullopt;
}

// The agent socket, then the sandbox started (launcher/sandbox/start.hpp)
// into the namespaces and the cgroup, and its setup read.
std::optional<int> Supervisor::start_sandbox() {
  auto listen =
      sys::listen_unix_at(agents_.get(), socket_name(),
                          path_join(plan_.ctx_root, agentdir::agents_rel(plan_.tier_user)) + "/" + socket_name());
  if (!listen) return fail_launch(listen.error());
  socket_name_.dir = agents_.get();
  socket_name_.name = socket_name();
  if (auto f = sys::fault_at("supervisor.listen"); !f) return fail_launch(f.error());
  UniqueFd endpoint;
  if (plan_.endpoint) endpoint = open_endpoint_program();
  SandboxStart how;
  how.listen_fd = listen->get();
  how.endpoint_exe = endpoint.get();
  how.cgroup_fd = placement_ ? placement_->runtime_fd() : -1;
  how.clone_context = "creating namespaces";
  how.id_maps_context = "writing id maps";
  how.report_context = "the sandbox's report";
  how.userns_remedy = true;
  how.all_namespaces = opts_.json_status_fd >= 0;
  how.held = [this](const sys::Child& c) { return read_namespaces(c); };
  how.mapped = []() -> Result<void> {
    CTX_TRY(sys::fault_at("supervisor.clone"));
    return sys::fault_at("supervisor.id_maps");
  };
  how.released = [this] { return write_start_records(); };
  how.on_view = [this](UniqueFd fuse) -> Result<void> {
    // In the agent's cgroup (its own leaf): what an agent makes the view
    // hold counts against the agent's limits.
    CTX_TRY_ASSIGN(ViewProcess v, ViewProcess::start(plan_, std::move(fuse), placement_ ? placement_->view_fd() : -1));
    view_.emplace(std::move(v));
    return {};
  };
  auto s = launcher::start_sandbox(plan_, how);
  // A session that could not begin is left as it was, and so are the records.
  if (!s) return session_refused_ ? failed(s.error()) : fail_launch(s.error());
  t_exec_ = sys::now_us();
  t_clone_ = s->clone_us;
  child_ = std::move(s->child);
  lifeline_ = std::move(s->lifeline);  // open until we exit: the sandbox's lifeline
  setup_ = std::move(s->setup);
  return std::nullopt;
}

// Namespace ids are read while the child is held at the lifeline: a
// runtime that exits at once would take them with it, and once the
// sandbox has taken its ids its memory is not dumpable, so an
// unprivileged supervisor may no longer read /proc/<pid>/ns (EACCES).
// A sandbox that is not held (supervisor_maps_ids) reports them itself,
// before anything else it sends (take_namespaces).
// The sandbox's pid namespace: only its processes may use the sockets.
Result<void> Supervisor::read_namespaces(const sys::Child& sandbox) {
  auto pidns = sys::ns_inode(sandbox.pid, "pid");
  if (!pidns) return fail(pidns.error().with_context("the sandbox's pid namespace"));
  sandbox_pidns_ = *pidns;
  if (opts_.json_status_fd >= 0)
    for (const char* n : {"user", "mnt", "pid", "net", "uts", "ipc", "cgroup"})
      if (auto ino = sys::ns_inode(sandbox.pid, n)) namespaces_[n] = *ino;
  return {};
}

// What place() found (a reaped cgroup, none writable), said once the
// session's files are written or the launch fails.
void Supervisor::log_start_notes() {
  for (const Event& e : start_logs_) files_->log(e);
  start_logs_.clear();
  // An owned child's parent has said it already (its cgroup is the
  // parent's subtree, so both lack one); the child's .d/log keeps it.
  if (without_cgroup_ && opts_.owned_by == 0) warn_once_without_cgroup(opts_.marker_dir, *without_cgroup_);
  without_cgroup_.reset();
}

// The start records are written while the sandbox sets itself up on the
// other CPU: they cost as much as the namespace setup, and nothing reads
// the runtime's notifications before they are done.
Result<void> Supervisor::write_start_records() {
  // The session's files before any record: a launch that cannot write
  // them is refused (its runtime never starts) and leaves status, pid and
  // log as they were.
  if (auto r = files_->begin_session(); !r) {
    session_refused_ = true;
    return r;
  }
  // From here on the supervisor's end ends the session (its watchdog's
  // too: it finds `state` running).
  files_->session_begun();
  // What the previous supervisor of this instance left: the primary's is
  // <name>.d/status, an extra instance's its own.
  auto prev = sys::read_small_file(primary_ ? ddir_.get() : idir_.get(), "status", 64);
  if (prev && *prev && (*prev)->data != "dead\n")
    files_->log(
        {"agent.reap", "", EventStatus::ok, {{"previous_status", (*prev)->data.substr(0, (*prev)->data.find('\n'))}}});
  log_start_notes();
  // Without status and pid nothing can see or stop the agent: refused
  // (docs/launcher.md, "Full disks").
  CTX_TRY(files_->start(::getpid()));
  // The runtime and its argument count, never the arguments (they may
  // hold a prompt or a secret: docs/launcher.md, "Logs, events and what
  // they never hold").
  const Event start{"agent.start",
                    "",
                    EventStatus::ok,
                    {{"runtime", plan_.argv.empty() ? std::string() : plan_.argv[0]}, {"argc", plan_.argv.size()}}};
  files_->log(start);
  files_->event(start);
  return sys::fault_at("supervisor.records");
}

// Setup ended with the runtime's exec (EOF on the channel) or an error;
// what the agent needs of it is checked, and a failure said.
std::optional<int> Supervisor::finish_setup() {
  // No error and no sockets: the sandbox ended (was killed) before it
  // handed them over; its exit status is added below.
  const bool vanished = !setup_.error && (!setup_.notify.valid() || !setup_.control.valid());
  if (vanished)
    setup_.error = Record{Record::Kind::error, Step::run_ctx, ECHILD, 0,
                          "the sandbox ended during its setup, before it handed over its sockets"};
  if (!setup_.error && sandbox_pidns_ == 0) {
    // Reported by the sandbox before any other record: while only the
    // launcher's code runs in it, before the runtime exists.
    for (const auto& n : setup_.namespaces) {
      if (n.name == "pid") sandbox_pidns_ = n.inode;
      if (opts_.json_status_fd >= 0) namespaces_[n.name] = n.inode;
    }
    if (sandbox_pidns_ == 0)
      setup_.error = Record{Record::Kind::error, Step::start, EIO, 0, "the sandbox did not report its namespaces"};
  }
  if (!setup_.error)
    if (auto r = sys::set_nonblocking(setup_.control.get()); !r)
      setup_.error = Record{Record::Kind::error, Step::run_ctx, r.error().code, 0, r.error().msg};
  if (!setup_.error)
    if (auto f = sys::fault_at("supervisor.setup"); !f) {
      setup_.error = Record{Record::Kind::error, Step::exec, f.error().code, 0, f.error().msg};
      (void)sys::signal_pidfd(child_->pidfd.get(), SIGKILL);
    }
  if (!setup_.error && plan_.terminal) {
    // Output goes to the caller's terminal; to stdout when that is not one
    // (the runtime's stdout stays whatever the caller gave it then).
    int out = sys::is_terminal(1) ? 1 : sys::is_terminal(2) ? 2 : 1;
    if (auto r = PtyRelay::start(0, out, std::move(setup_.master), watchdog_->socket()); r) {
      relay_.emplace(std::move(*r));
    } else {
      setup_.error =
          Record{Record::Kind::error, Step::terminal, r.error().code, 0, r.error().with_context("terminal").msg};
    }
  }
  if (!setup_.error) return std::nullopt;
  Error e = setup_error(*setup_.error);
  const int code = reap_failed(*child_);
  if (vanished) e.msg += " (its exit status: " + std::to_string(code) + ")";
  if (code != kExitNotFound && code != kExitNotExecutable) {
    if (setup_.error->step == Step::private_mounts) e = with_userns_remedy(plan_, e);
    return fail_launch(e);
  }
  // Not found in the sandbox: say so when the host has it (a mount is
  // missing), read with the owner's rights as the sandbox's files are.
  if (code == kExitNotFound)
    if (auto as_owner = AsOwner::enter(plan_.ids))
      if (auto hint = runtime_host_hint(plan_)) e.msg += "; " + *hint;
  files_->status(AgentState::dead);
  files_->log(
      {"agent.error", "", EventStatus::error, {{"code", errno_name(e.code)}, {"error", e.msg}, {"exit_status", code}}});
  files_->event({"agent.stop", "", EventStatus::error, {{"exit_status", code}}});
  files_->end_session("failed");
  files_->context_status(opts_.handoff_dir, "failed");
  error_ = e;
  return code;
}

void Supervisor::report_started() {
  json timings = json::object();
  for (const auto& t : setup_.timings) timings[std::string(to_string(t.step))] = t.usec;
  timings["prepare"] = t_clone_ - t0_;
  timings["total"] = t_exec_ - t0_;
  files_->log({"agent.exec", "", EventStatus::ok, {{"pid", child_->pid}, {"setup_us", t_exec_ - t0_}}});
  files_->exec();
  if (opts_.json_status_fd >= 0) {
    json j{{"event", "started"},
           {"agent", plan_.name},
           {"pid", child_->pid},
           {"supervisor_pid", ::getpid()},
           {"namespaces", namespaces_},
           {"timings_us", timings},
           {"cgroup", placement_ ? json(placement_->agent_dir() + "/runtime") : json(nullptr)}};
    if (builds_view(plan_)) {
      // What the static view bound at launch, beyond the plan's steps.
      auto binds = json::array();
      for (const auto& b : setup_.static_binds) binds.push_back({{"kind", b.kind}, {"target", b.target}});
      j["static_view_binds"] = std::move(binds);
    }
    std::string s = j.dump() + "\n";
    (void)sys::write_all(opts_.json_status_fd, s.data(), s.size());
  }
  if (spec_.parent && !opts_.handoff_dir.empty()) files_->context_status(opts_.handoff_dir, "running");
}

// The control socket's requests: owned children, tools and models
// (launcher/control/server.hpp).
void Supervisor::start_children() {
  ControlServerConfig cc;
  cc.parent = &spec_;
  cc.session = plan_.session;
  cc.run = new_run_id();
  cc.spawn.self_exe = opts_.self_exe;
  cc.spawn.agent_cgroup = placement_ ? placement_->agent_dir() : std::string();
  cc.spawn.require_cgroup = opts_.require_cgroup;
  cc.spawn.cancel_grace_ms = opts_.cancel_grace_ms;
  cc.spawn.env = opts_.child_env;
  cc.spawn.owner = owner_rights(plan_.ids);
  cc.host = this;
  cc.records = &*files_;
  if (setup_.tools.valid()) {
    models_.emplace(plan_, setup_.tools.get(), *files_);
    tools_.emplace(plan_, std::move(setup_.tools), *files_);
    cc.models = &*models_;
    cc.tools = &*tools_;
  }
  children_.emplace(std::move(cc), std::move(setup_.control));
}

bool Supervisor::peer_allowed(int conn) const { return in_sandbox(sandbox_pidns_, sys::peer_pid(conn)); }

std::optional<std::string> Supervisor::inner_path(const std::string& host) const {
  return mountspec::inner_path_of(plan_.mounts, plan_.ctx_root, host);
}

void Supervisor::child_spawned(int pidfd) {
  if (watchdog_) (void)sys::send_message(watchdog_->socket(), "p", {pidfd});
}

void Supervisor::set_state(AgentState s) {
  if (s == state_) return;
  state_ = s;
  files_->status(s);
}

// sd_notify: only from processes of the sandbox, and within the agent's
// one rate limit (the control server's: launcher/control/rate_limit.hpp).
void Supervisor::read_notify() {
  for (int i = 0; i < 64; ++i) {
    auto d = sys::recv_datagram_from(setup_.notify.get());
    if (!d || !*d) break;
    if (!in_sandbox(sandbox_pidns_, (*d)->pid)) {
      // Said once: a sender outside the sandbox, or one already gone.
      if (!notify_refused_)
        files_->log({"agent.notify",
                     "",
                     EventStatus::denied,
                     {{"pid", (*d)->pid}, {"reason", "the sender is not a process of the sandbox (or has exited)"}}});
      notify_refused_ = true;
      continue;
    }
    if (!children_->admit()) continue;  // the agent's one rate limit, counted there
    NotifyEffect e = apply_notify((*d)->bytes, to_string(state_));
    if (e.ready && !opts_.parent_notify_socket.empty()) (void)sys::send_datagram(opts_.parent_notify_socket, "READY=1");
    auto next = agent_state_of(e.state);
    if (next && *next != state_ && !cancelled_) {
      set_state(*next);
      files_->log({"agent.status", "", EventStatus::ok, {{"state", e.state}}});
    }
  }
}

// The cancellation sequence of seed 003 (our parent died, or `ctx agent
// stop`): stopping, no new connections, the children cancelled, SIGTERM
// to every process of the sandbox (the init does it on 'T' over the
// lifeline; launcher/sandbox/sandbox.cpp), SIGKILL after the grace period
// (supervise_loop).
void Supervisor::cancel(const char* reason) {
  if (cancelled_) return;
  cancelled_ = true;
  cancel_reason_ = reason;
  (void)sys::fault_at("cancel.begin");
  set_state(AgentState::stopping);
  files_->log({"agent.cancel",
               "",
               cancel_reason_ == "stopped" ? EventStatus::stopped : EventStatus::cancelled,
               {{"reason", cancel_reason_}}});
  socket_name_.remove();  // no new connections
  children_->close_control();
  children_->cancel_all();
  (void)sys::fault_at("cancel.children");
  // Only the init can reach every process of its pid namespace; if the
  // lifeline cannot carry the word, the runtime at least gets SIGTERM.
  if (!sys::write_all(lifeline_.get(), "T", 1)) (void)sys::signal_pidfd(child_->pidfd.get(), SIGTERM);
  (void)sys::fault_at("cancel.term");
  kill_at_ = sys::now_us() + static_cast<std::uint64_t>(opts_.cancel_grace_ms) * 1000;
}

void Supervisor::on_signal(int sig) {
  if (sig == parent_dead_signal()) return cancel("parent_dead");
  if (sig == stop_signal()) return cancel("stopped");
  if (sig == SIGCHLD) return;
  if (sig == SIGWINCH) {
    if (relay_) relay_->window_changed();
    return;
  }
  set_state(AgentState::stopping);
  files_->log({"agent.signal", "", EventStatus::ok, {{"signal", sig}}});
  (void)sys::signal_pidfd(child_->pidfd.get(), sig);
}

// Signals, sd_notify messages, the control socket, owned children, and the
// runtime's exit.
void Supervisor::supervise_loop() {
  // The parent may have died between our start and now.
  if (opts_.owned_by != 0 && ::getppid() != opts_.owned_by) cancel("parent_dead");
  (void)sys::fault_at("supervisor.supervise");
  while (true) {
    std::vector<struct pollfd> fds{
        {sigfd_.get(), POLLIN, 0}, {child_->pidfd.get(), POLLIN, 0}, {setup_.notify.get(), POLLIN, 0}};
    fds.push_back({lifeline_ended_ ? -1 : lifeline_.get(), POLLIN, 0});  // fds[3]
    fds.push_back({view_ ? view_->pidfd() : -1, POLLIN, 0});  // fds[4]
    if (relay_) relay_->add_poll_fds(fds);
    children_->add_poll_fds(fds);
    int timeout = children_->poll_timeout_ms();
    if (cancelled_ && !killed_) {
      std::uint64_t now = sys::now_us();
      int kill_in = now >= kill_at_ ? 0 : static_cast<int>((kill_at_ - now + 999) / 1000);
      timeout = timeout < 0 ? kill_in : std::min(timeout, kill_in);
    }
    if (!sys::poll_fds(fds, timeout)) return;
    if (cancelled_ && !killed_ && sys::now_us() >= kill_at_) {
      // The grace period is over: SIGKILL to everything in runtime/ (or,
      // without a cgroup, to the sandbox's init, whose end kills the pid
      // namespace).
      killed_ = true;
      (void)sys::fault_at("cancel.kill");
      if (placement_) (void)placement_->kill_runtime();
      (void)sys::signal_pidfd(child_->pidfd.get(), SIGKILL);
    }
    if (fds[2].revents & POLLIN) read_notify();
    if (fds[3].revents & POLLIN) read_lifeline();
    if (fds[4].revents & POLLIN) view_ended();
    if (relay_) relay_->handle(fds);
    if (fds[0].revents & POLLIN)
      if (auto sig = sys::read_signalfd(sigfd_.get())) on_signal(*sig);
    children_->handle(fds);
    if (sandbox_ended_) return;
    if (fds[1].revents & POLLIN) {
      reap_sandbox();
      return;
    }
  }
}

// The view's server ended. Cleanly (0) when its mount is gone, which is
// how a sandbox's end looks from there (possibly before the runtime's
// exit reaches us). Otherwise it died while the agent runs: the sandbox
// sees ENOTCONN through the view (never the durable tree), and an agent
// without its view is stopped like a cancelled one.
void Supervisor::view_ended() {
  int st = view_->reap();
  view_.reset();
  if (exit_code_of(st) == 0) return;
  files_->log({"agent.view", "", EventStatus::dead, {{"exit_status", exit_code_of(st)}}});
  std::fprintf(stderr, "ctx-agent-run: %s: the agent view's server ended (exit status %d); stopping the agent\n",
               printable(plan_.name).c_str(), exit_code_of(st));
  cancel("view_dead");
}

// Job control of an interactive launch: the runtime stopped (^Z on its
// terminal, or a SIGSTOP), so the agent stops as a whole the way a
// foreground program does: the caller's terminal goes back to its own
// mode (PtyRelay::hand_back: what the runtime wrote shown, its modes
// reset, the terminal's answers to it read and dropped) and the
// supervisor stops itself, which gives the shell the terminal. Once
// continued (fg), raw mode again and the runtime goes on. Nothing typed
// meanwhile reaches the sandbox: nobody reads the terminal.
void Supervisor::read_lifeline() {
  char word[2] = {};
  auto got = sys::read_message(lifeline_.get(), word, sizeof word);
  // The init's exit closes its end before its pidfd says so; polled
  // further, the end of file would spin this loop until then, on a busy
  // machine for milliseconds of a CPU the exit itself needs.
  if (!got || !*got) lifeline_ended_ = true;
  if (!got || !*got) return;
  // The init's last word (end_sandbox in launcher/sandbox/sandbox.cpp):
  // the runtime's exit status, everything of the sandbox killed and
  // reaped but the init, whose exit the end records need not wait for.
  if (word[0] == 'x' && *got == 2) {
    exit_code_ = static_cast<unsigned char>(word[1]);
    sandbox_ended_ = true;
    lifeline_ended_ = true;
    return;
  }
  const char c = word[0];
  if (c != 'S' || !relay_) return;
  relay_->hand_back(PtyRelay::Why::stopped);
  sys::stop_self();
  relay_->resume();
  (void)sys::write_all(lifeline_.get(), "c", 1);
}

// The sandbox's init, reaped once: its exit status is the runtime's unless
// its last word gave that already.
void Supervisor::reap_sandbox() {
  if (sandbox_reaped_) return;
  sandbox_reaped_ = true;
  auto st = sys::wait_pid(child_->pid);
  if (!sandbox_ended_) exit_code_ = st ? exit_code_of(*st) : kExitLaunchFailed;
}

// Our runtime is gone: so is the parent of our children (seed 003, "Parent
// Death"). Each child cancels itself (SIGTERM, grace, cgroup.kill) and
// records it; once the grace period is over, one cgroup.kill of our
// subtree ends whatever runtime is left below us at once. Then the
// records of the end.
int Supervisor::teardown() {
  (void)sys::fault_at("teardown.begin");
  if (relay_) {
    relay_->hand_back(PtyRelay::Why::ended);  // the caller's terminal as it was
    relay_.reset();
  }
  socket_name_.remove();
  children_->report_dropped(true);
  if (children_->running() > 0) {
    set_state(AgentState::stopping);
    children_->close_control();
    children_->cancel_all();
    children_->wait_all(opts_.cancel_grace_ms, false);
    (void)sys::fault_at("teardown.children");
    if (placement_) (void)placement_->kill_subtree();
    children_->wait_all(kChildRecordsMs, true);
  }
  // The loop ended without the sandbox's end (its poll failed): the
  // sandbox is ended now, not waited for while this process holds it
  // alive (its lifeline).
  if (!sandbox_ended_ && !sandbox_reaped_) (void)sys::signal_pidfd(child_->pidfd.get(), SIGKILL);
  // A cgroup is removed once empty: after the init's exit.
  if (placement_) {
    reap_sandbox();
    if (auto r = placement_->remove(); !r)
      files_->log({"agent.error", "", EventStatus::error, {{"error", r.error().msg}}});
  }
  (void)sys::fault_at("teardown.cgroup");
  files_->status(AgentState::dead);
  (void)sys::fault_at("teardown.records");
  // A parent's stop ends in "stopped", the parent's death in "cancelled".
  const bool stopped = cancelled_ && cancel_reason_ == "stopped";
  const EventStatus outcome = stopped           ? EventStatus::stopped
                              : cancelled_      ? EventStatus::cancelled
                              : exit_code_ == 0 ? EventStatus::ok
                                                : EventStatus::error;
  const Event stop{"agent.stop", "", outcome, {{"exit_status", exit_code_}}};
  files_->log(stop);
  files_->event(stop);
  const char* end = stopped ? "stopped" : cancelled_ ? "cancelled" : exit_code_ == 0 ? "done" : "failed";
  files_->end_session(end);
  if (spec_.parent && !opts_.handoff_dir.empty()) files_->context_status(opts_.handoff_dir, end);
  if (cancelled_ && !stopped && spec_.parent)
    files_->event_of(spec_.parent->agent, spec_.parent->session.empty() ? "default" : spec_.parent->session,
                     {"agent.child.cancel",
                      "agent/" + plan_.name,
                      EventStatus::cancelled,
                      {{"parent", spec_.parent->agent}, {"child", plan_.name}, {"reason", "parent_dead"}}});
  if (opts_.json_status_fd >= 0) {
    std::string s = json{{"event", "exited"}, {"agent", plan_.name}, {"exit_status", exit_code_}}.dump() + "\n";
    (void)sys::write_all(opts_.json_status_fd, s.data(), s.size());
  }
  // Written beside the init's exit when its word came first; the
  // launcher never ends before its sandbox's init.
  reap_sandbox();
  return exit_code_;
}

int Supervisor::run() {
  if (auto code = open_agent()) return *code;
  if (int abi = sys::landlock_abi().value_or(0); abi < sys::kLandlockScopeAbi)
    std::fprintf(stderr,
                 "ctx-agent-run: notice: this kernel's Landlock (ABI %d) cannot scope abstract unix sockets and "
                 "signals (ABI %d, Linux 6.12): a granted network reaches the host's abstract sockets\n",
                 abi, sys::kLandlockScopeAbi);
  // Every return from here on releases the watchdog, if one was started.
  struct WatchdogGuard {
    std::optional<Watchdog>& w;
    ~WatchdogGuard() {
      if (w) w->finish();
    }
  } watchdog_guard{watchdog_};
  if (auto code = watch()) return *code;
  if (auto code = place()) return *code;
  if (auto code = start_sandbox()) return *code;
  if (auto code = finish_setup()) return *code;
  report_started();
  start_children();
  supervise_loop();
  return teardown();
}

}  // namespace

int supervise(const agentdir::AgentSpec& spec, const LaunchPlan& plan, const SuperviseOptions& opts,
              std::optional<Error>& error) {
  return Supervisor(spec, plan, opts, error).run();
}

}  // namespace ctx::launcher
