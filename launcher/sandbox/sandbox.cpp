#include "launcher/sandbox/sandbox.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <exception>

#include "launcher/sandbox/channel.hpp"
#include "launcher/sandbox/endpoint_start.hpp"
#include "launcher/sandbox/mounts.hpp"
#include "launcher/sandbox/preflight.hpp"
#include "launcher/sandbox/reporter.hpp"
#include "launcher/sandbox/start.hpp"
#include "mountspec/geometry.hpp"
#include "sys/fault.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"
#include "sys/landlock.hpp"
#include "sys/mount.hpp"
#include "sys/namespace.hpp"
#include "sys/process.hpp"
#include "sys/pty.hpp"
#include "sys/resolve.hpp"
#include "sys/seccomp.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

// The runtime's pty in an interactive launch: its peer, and which of 0-2
// were the caller's terminal (those get the peer).
struct Terminal {
  UniqueFd peer;
  std::vector<int> fds;
};

// Why: container engines' default seccomp profiles allow sethostname only
// to a container holding CAP_SYS_ADMIN, whatever namespace it would change.
Error hostname_error(Error e) {
  if (e.code == EPERM)
    e.msg +=
        ": a seccomp filter refuses it (a container engine's default profile does): the launch is refused; `ctx "
        "check --env` names the profile to run with";
  return e;
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
  if (serves_view(plan)) {
    auto f = sys::open(sys::at_cwd, "/dev/fuse", sys::Open::read_write);
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
    // The user namespace the runtime runs in is this one, not the one
    // reported at the start.
    CTX_TRY_ASSIGN(unsigned long user, sys::ns_inode(0, "user"));
    rep.send({Record::Kind::namespaces, rep.current(), 0, 0, encode_namespaces({{"user", user}})}, {});
  }
  if (ids.map_via_helpers) CTX_TRY_CTX(sys::set_ids(ids.uid, ids.gid, ids.groups), "setting ids");
  // Credential changes cleared PDEATHSIG; arm it again.
  CTX_TRY(sys::set_parent_death_signal(SIGKILL));
  // Emptied once in the namespace the runtime runs in: a launch that left
  // root above did it there, unless a user namespace made since (which
  // starts with a full set) holds the runtime. Again without CAP_SETPCAP it
  // would cost a failed drop and a read a capability.
  if (!ids.host_ids || ids.user_ns_after_mounts)
    CTX_TRY_CTX(sys::drop_bounding_set(), "dropping capabilities");
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
// The timings a runtime's process leaves for the init to send once it has
// executed the runtime (run_sandbox): in the init's memory, which that
// process shares until its exec.
struct Handover {
  Reporter timings{-1};
  bool left = false;
};

[[noreturn]] void exec_runtime(const LaunchPlan& plan, const SandboxIo& io, Reporter rep, const Terminal& term,
                               const std::string& model_url, Handover& handover) {
  rep.enter(Step::exec);
  // An interactive launch: the sandbox's pty in place of the caller's
  // terminal, and a process group of its own, made the pty's foreground
  // one here, before the exec (the init, which waits for the exec, does it
  // again): a runtime that reads or sets its terminal at once is not
  // stopped as a background one. The job-control signals stay blocked
  // (the init blocked them) until reset_signals, so that neither a ^Z in
  // between nor tcsetpgrp from the background stops this process while the
  // init waits for its exec.
  if (term.peer.valid()) {
    if (auto r = sys::set_process_group(0, 0); !r) die(rep, r.error());
    if (auto r = sys::set_foreground(term.peer.get(), ::getpid()); !r) die(rep, r.error());
    for (int fd : term.fds)
      if (auto r = sys::dup_to(term.peer.get(), fd); !r) die(rep, r.error());
    // Its descriptor is closed with the others below; the object is the
    // init's (this process shares its memory until the exec).
  }
  sys::reset_signals();
  // The default time slice again: the launcher's short one is for its own
  // processes, not the agent's.
  sys::set_time_slice(0);
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
  // The timings are the init's to send after the exec: sent from here they
  // would wake the supervisor, which, on a busy machine, takes this
  // process's CPU until the next tick (docs/performance.md, "Under load").
  if constexpr (sys::kSpawnSharesMemory) {
    handover.timings = err;
    handover.left = true;
  } else {
    err.flush();  // a forked child's memory is its own (sanitizer builds)
  }
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
  handover.left = false;  // not executed: die() below sends them with the error
  int code = last.code == ENOENT || last.code == ENOTDIR ? kExitNotFound : kExitNotExecutable;
  // ENOENT for a file that is there: its #! interpreter or its loader is
  // missing, or its #! line ends in CR. Say which; and that a name is in
  // none of PATH's directories when it is not.
  std::optional<std::string> found;
  if (code == kExitNotFound)
    for (const auto& c : candidates)
      if (sys::open(sys::at_cwd, c, sys::Open::path_only)) {
        found = c;
        break;
      }
  if (code == kExitNotFound && !found && cmd.find('/') == std::string::npos)
    last = Error{ENOENT, "execve: ENOENT: in none of the sandbox's PATH directories (" + env_value(env, "PATH") + ")"};
  last = last.with_context("runtime " + cmd);
  if (found)
    if (auto fd = sys::open(sys::at_cwd, *found, sys::Open::nonblock)) {
      std::string head(4096, '\0');
      if (auto n = sys::read_at(fd->get(), head.data(), head.size(), 0)) {
        head.resize(*n);
        RuntimeLookup look{
            [](const std::string& p) { return sys::open(sys::at_cwd, p, sys::Open::path_only).has_value(); },
            {},
            env_value(env, "PATH")};
        const std::string host = mountspec::host_path_of(plan.mounts, plan.ctx_root, *found).value_or(*found);
        if (auto issue = runtime_issue(cmd, host, head, plan.root, look))
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
  CTX_TRY_ASSIGN(UniqueFd null, sys::open(sys::at_cwd, "/dev/null", sys::Open::read_write));
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
// The model endpoint waits in `listen` (with its program at `exe`) until
// its first connection: a launch whose agent never calls a model or the
// proxy starts no process for it.
struct PendingEndpoint {
  const LaunchPlan* plan = nullptr;
  UniqueFd exe;
  UniqueFd listen;
};

// The runtime ended, and with it the sandbox: every other process in it
// is killed (kill(-1) from pid 1 reaches all of its pid namespace but
// itself) and reaped first, so that the word on the lifeline ('x' and the
// exit status) means nothing of the sandbox runs any more. The supervisor
// writes its end records on that word, while this process's exit takes
// its memory and the mount namespace down; it reaps this process before
// it exits itself. A process this one may not kill (an LSM label that
// refuses its signal) or that takes long to die gets no word: the init
// exits, the kernel's own end of the pid namespace (which no permission
// check stops) kills it, and the supervisor waits for that exit as it did
// before the word.
constexpr int kEndReapMs = 200;

[[noreturn]] void end_sandbox(int sigfd, int lifeline, int code) {
  (void)sys::signal_pid(-1, SIGKILL);
  if (sys::reap_all(sigfd, kEndReapMs)) {
    const char word[2] = {'x', static_cast<char>(code)};
    (void)sys::write_all(lifeline, word, sizeof word);
  }
  _exit(code);
}

[[noreturn]] void be_init(pid_t runtime, int sigfd, int lifeline, bool terminal, PendingEndpoint endpoint) {
  while (true) {
    std::vector<struct pollfd> fds{{sigfd, POLLIN, 0}, {lifeline, POLLIN, 0}};
    if (endpoint.listen.valid()) fds.push_back({endpoint.listen.get(), POLLIN, 0});
    if (!sys::poll_fds(fds, -1)) _exit(kExitLaunchFailed);
    if (fds.size() > 2 && fds[2].revents != 0) {
      start_endpoint(*endpoint.plan, endpoint.exe.get(), endpoint.listen.get());
      endpoint.listen.reset();
      endpoint.exe.reset();
    }
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
      if ((*done)->first == runtime) end_sandbox(sigfd, lifeline, exit_code_of((*done)->second));
    }
  }
}

// A sandbox the supervisor does not hold (supervisor_maps_ids): a
// supervisor that died before PDEATHSIG was set has closed the lifeline;
// the id maps of an unprivileged launch, written for its own user
// namespace (one line, the caller's ids, setgroups denied: what the kernel
// lets a process write without privilege); then its namespaces as it
// reads them, for the supervisor, whose /proc/PID/ns reads would race
// with this process becoming undumpable (at its credential changes).
void map_itself(const LaunchPlan& plan, const SandboxIo& io, Reporter& rep) {
  std::vector<struct pollfd> life{{io.lifeline, POLLIN | POLLRDHUP, 0}};
  if (auto n = sys::poll_fds(life, 0); !n || (life[0].revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0)
    _exit(kExitLaunchFailed);
  const IdPlan& ids = plan.ids;
  if (ids.user_ns && !ids.user_ns_after_mounts && !io.joined)
    if (auto r = sys::write_id_maps(0, ids.uid_map, ids.gid_map, ids.deny_setgroups); !r) {
      Error e = r.error().with_context(io.id_maps_context);
      die(rep, io.userns_remedy ? with_userns_remedy(plan, e) : e);
    }
  std::vector<NamespaceReport> ns;
  for (const char* n : {"pid", "user", "mnt", "net", "uts", "ipc", "cgroup"}) {
    if (!io.all_namespaces && ns.size() == 1) break;
    auto ino = sys::ns_inode(0, n);
    if (!ino) die(rep, ino.error().with_context("reading the sandbox's namespaces"));
    ns.push_back({n, *ino});
  }
  rep.send({Record::Kind::namespaces, rep.current(), 0, 0, encode_namespaces(ns)}, {});
}

// The runtime's process (exec_runtime), started once the init's setup is
// done; returns its pid once it has executed the runtime (or ended), after
// sending the timings it left here.
pid_t spawn_runtime(const LaunchPlan& plan, const SandboxIo& io, Reporter& rep, const Terminal& term,
                    const std::string& model_url) {
  // The runtime's process shares this one's memory until its exec (this
  // process waits meanwhile): nothing of the launcher's memory is copied
  // for a process that replaces it at once.
  struct Runtime {
    const LaunchPlan& plan;
    const SandboxIo& io;
    Reporter& rep;
    const Terminal& term;
    const std::string& model_url;
    Handover& handover;
  };
  Handover handover;
  Runtime runtime{plan, io, rep, term, model_url, handover};
  // Pid 1 ignores them anyway; the runtime's process starts with them
  // blocked (exec_runtime).
  if (term.peer.valid())
    if (auto r = sys::block_signals({SIGTSTP, SIGTTIN, SIGTTOU}); !r) die(rep, r.error());
  auto pid = sys::spawn_sharing_memory(
      [](void* p) {
        auto* r = static_cast<Runtime*>(p);
        try {
          exec_runtime(r->plan, r->io, r->rep, r->term, r->model_url, r->handover);
        } catch (const std::exception& e) {
          r->handover.left = false;
          Reporter own = r->rep;  // the init's is not this process's to change
          die(own, Error{ENOMEM, std::string("the runtime's process: ") + e.what()});
        } catch (...) {
          r->handover.left = false;
          Reporter own = r->rep;
          die(own, Error{EIO, "EIO: the runtime's process ended on an unknown exception"});
        }
      },
      &runtime);
  if (!pid) die(rep, pid.error());

  // The runtime's timings, which its process left here before its exec.
  if (handover.left) {
    handover.timings.set_fd(io.channel);
    handover.timings.flush();
  }
  return *pid;
}

}  // namespace

void run_sandbox(const LaunchPlan& plan, const SandboxIo& io) {
  // Nothing of the supervisor's but what this half needs: above all not
  // its directory fds (host paths outside the new root).
  Reporter rep(io.channel);
  if (auto r = sys::close_fds_except({0, 1, 2, io.lifeline, io.channel, io.listen_fd, io.endpoint_exe}); !r)
    die(rep, r.error());
  // The sandbox dies with its supervisor; a supervisor that died before
  // this line is caught below: EOF for the go byte, or the closed lifeline
  // map_itself finds.
  if (auto r = sys::set_parent_death_signal(SIGKILL); !r) die(rep, r.error());
  if (supervisor_maps_ids(plan.ids)) {
    char go = 0;
    if (auto got = sys::read_byte(io.lifeline, go); !got || !*got) _exit(kExitLaunchFailed);
  } else {
    map_itself(plan, io, rep);
  }
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
  // Listening before the runtime exists; started at its first connection.
  EndpointSocket endpoint = listen_endpoint(plan, io.endpoint_exe);
  PendingEndpoint pending{&plan, UniqueFd(io.endpoint_exe), std::move(endpoint.listen)};
  if (!pending.listen.valid()) pending.exe.reset();
  // Only for a model grant: a proxy's URL is in the plan's variables.
  const std::string model_url = plan.endpoint && !plan.endpoint->token.empty() ? endpoint.url : "";
  // Nothing of the agent's runs before the supervisor has its start
  // records (a launch refused for them kills this process here); EOF:
  // the supervisor is gone.
  char records = 0;
  if (auto got = sys::read_byte(io.lifeline, records); !got || !*got) _exit(kExitLaunchFailed);
  if (records != kRecordsWritten)
    die(rep, Error{EPROTO, "EPROTO: the supervisor's lifeline sent byte " +
                               std::to_string(static_cast<unsigned char>(records)) +
                               " where its start records' byte belongs"});
  if (auto f = sys::fault_at("sandbox.fork"); !f) die(rep, f.error());
  const pid_t pid = spawn_runtime(plan, io, rep, term, model_url);
  // The init: the runtime's exec closes its copy of the channel; ours is
  // closed now so that the supervisor sees EOF exactly then. The pty's
  // peer is the runtime's alone after the runtime's group is in front, so
  // the master sees its end.
  sys::close_fd(io.channel);
  sys::close_fd(io.listen_fd);
  (void)sys::fault_at("sandbox.init");
  if (term.peer.valid()) {
    (void)sys::set_process_group(pid, pid);
    (void)sys::set_foreground(term.peer.get(), pid);
    term.peer.reset();
  }
  be_init(pid, sigfd->get(), io.lifeline, plan.terminal, std::move(pending));
}

}  // namespace ctx::launcher
