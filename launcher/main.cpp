// ctx-agent-run [--ctx-root DIR] [--session-space P] [--session S] [--dry-run]
//               [--json-status-fd FD] [--user U | --system] NAME
//               [-- CMD ARG...]
//
// Reads <ctx>/agent/NAME.d/* (or a user agent's
// <ctx>/home/<U>/agent/NAME.d/*, agentdir/tier.hpp) strictly, plans the
// sandbox, and launches and supervises the agent's runtime inside it.
// The one place that prints errors of the launcher.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agentdir/child.hpp"
#include "agentdir/load.hpp"
#include "agentdir/tier.hpp"
#include "base/names.hpp"
#include "base/text.hpp"
#include "launcher/plan/ancestry.hpp"
#include "launcher/plan/caller.hpp"
#include "launcher/plan/plan.hpp"
#include "launcher/plan/plan_json.hpp"
#include "launcher/sandbox/sandbox.hpp"
#include "launcher/supervisor/supervisor.hpp"
#include "launcher/supervisor/watchdog.hpp"
#include "sys/process.hpp"
#include "sys/pty.hpp"

namespace {

// The usage line with what follows "--", which CLI11 does not know.
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string name) const override {
    return "Usage: " + name + " [OPTIONS] NAME [-- CMD ARG...]\n";
  }
};

int report(const ctx::Error& e, int code) {
  std::fprintf(stderr, "ctx-agent-run: %s\n", ctx::printable(e.msg).c_str());
  return code;
}

std::string env_or(const char* key, const char* dflt) {
  const char* v = std::getenv(key);
  return v != nullptr && *v != '\0' ? v : dflt;
}

// What the command line says.
struct Args {
  std::vector<std::string> command;  ///< after "--"
  std::string ctx_root = env_or("CTX_ROOT", "/ctx");
  std::string session = "default";
  std::string session_space;  ///< --session-space P: the session in shared/P
  std::string name;
  bool dry_run = false;
  int status_fd = -1;
  std::string cgroup_base;
  bool require_cgroup = false;
  bool require_view = false;
  bool static_view = false;
  int cancel_grace_ms = ctx::launcher::kDefaultCancelGraceMs;
  pid_t owned_by = 0;
  std::string cgroup_leaf;
  long long user = -1;  ///< --user U: the user agent of home/<U>/agent
  bool system = false;  ///< --system: the system agent, even with a user agent of the name
};

// Parses the command line; an exit code when the launcher ends here.
std::optional<int> parse_args(int argc, char** argv, Args& a) {
  // Everything after "--" is the runtime's command line, untouched.
  int cli_argc = argc;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--") {
      cli_argc = i;
      for (int j = i + 1; j < argc; ++j) a.command.emplace_back(argv[j]);
      break;
    }
  CLI::App app{"Launch an agent's runtime inside a kernel-enforced sandbox."};
  app.set_version_flag("--version", "ctx-agent-run " CTX_VERSION);
  app.formatter(std::make_shared<UsageFormatter>());
  app.add_option("--ctx-root", a.ctx_root, "the CTX root (default $CTX_ROOT or /ctx)");
  app.add_option("--session", a.session, "session name (default: default)");
  app.add_option("--session-space", a.session_space,
                 "keep the session in the shared space P (<ctx>/shared/P/agent/NAME/session/S) instead of the "
                 "agent's home");
  app.add_flag("--dry-run", a.dry_run, "print the launch plan as JSON and exit; touches nothing");
  app.add_option("--json-status-fd", a.status_fd,
                 "write pid, namespace ids, step timings and exit status as JSON to FD");
  app.add_option("--cgroup-base", a.cgroup_base, "the delegated cgroup v2 directory to place the agent in");
  app.add_flag("--require-cgroup", a.require_cgroup, "fail instead of falling back when no writable cgroup v2 exists");
  auto* live = app.add_flag("--require-view", a.require_view,
                            "fail instead of building the agent view statically when /dev/fuse cannot be used");
  app.add_flag("--static-view", a.static_view,
               "build the agent view once at launch (tmpfs and binds, not live) instead of serving it over FUSE")
      ->excludes(live);
  app.add_option("--cancel-grace-ms", a.cancel_grace_ms,
                 "when cancelling owned children: milliseconds between SIGTERM and cgroup.kill (default 2000)")
      ->check(CLI::Range(0, 600000));
  app.add_option("--owned-by", a.owned_by, "(internal) the parent supervisor's pid; its death cancels this agent");
  app.add_option("--cgroup-leaf", a.cgroup_leaf, "(internal) the subtree's name below --cgroup-base");
  app.add_option("--user", a.user,
                 "launch the user agent <ctx>/home/U/agent/NAME.d (default: the system agent, or "
                 "the caller's own user agent when only that exists)")
      ->check(CLI::Range(0LL, 4294967294LL))
      ->excludes(app.add_flag("--system", a.system, "launch the system agent <ctx>/agent/NAME.d"));
  app.add_option("NAME", a.name, "the agent")->required();
  try {
    app.parse(cli_argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (a.command.empty() && cli_argc != argc && argc == cli_argc + 1)
    return report(ctx::Error{EINVAL, "nothing after '--'; give a command or drop the '--'"}, 2);
  if (a.status_fd >= 0 && !ctx::sys::is_open_fd(a.status_fd))
    return report(ctx::Error{EBADF, "--json-status-fd " + std::to_string(a.status_fd) +
                                        ": EBADF: not an open file descriptor; open it for the launcher (e.g. 3>file)"},
                  2);
  if (auto issue = ctx::session_name_issue(a.session))
    return report(ctx::Error{EINVAL, "--session " + a.session + ": " + *issue}, 2);
  if (!a.session_space.empty()) {
    if (auto issue = ctx::space_name_issue(a.session_space))
      return report(ctx::Error{EINVAL, "--session-space " + a.session_space + ": " + *issue}, 2);
    // An owned child's session is its parent's decision (seed 003).
    if (a.owned_by != 0)
      return report(ctx::Error{ENOTSUP, "--session-space " + a.session_space +
                                            ": ENOTSUP: an owned child (--owned-by) keeps its session in its "
                                            "own home; drop --session-space"},
                    2);
  }
  // The CTX root by its real path: a launch opens roots and mount sources
  // without following symbolic links, and the agent view recognises the
  // CTX tree in the mount table by path.
  a.ctx_root = ctx::sys::absolute_path(a.ctx_root);
  if (auto real = ctx::sys::real_path(a.ctx_root)) a.ctx_root = *real;
  return std::nullopt;
}

// The supervisor's options from the arguments and the environment.
ctx::launcher::SuperviseOptions supervise_options(const Args& a, const ctx::launcher::PlanOptions& po, uid_t euid) {
  ctx::launcher::SuperviseOptions so;
  so.json_status_fd = a.status_fd;
  std::string xdg = env_or("XDG_RUNTIME_DIR", "");
  // Only a directory that is verifiably the caller's alone: one planted by
  // another user is never used.
  if (ctx::sys::is_private_dir(xdg))
    so.marker_dir = xdg;
  else if (euid == 0)
    so.marker_dir = "/run";
  so.parent_notify_socket = env_or("NOTIFY_SOCKET", "");
  so.cgroup_base = a.cgroup_base;
  so.require_cgroup = a.require_cgroup;
  so.self_exe = "/proc/self/exe";
  // Not NOTIFY_SOCKET (ours), nor a test's injected fault (sys/fault.hpp),
  // which names a step of this launch, not of its children's.
  for (char** e = environ; *e != nullptr; ++e)
    if (std::string_view v(*e); v.rfind("NOTIFY_SOCKET=", 0) != 0 && v.rfind("CTX_FAULT=", 0) != 0)
      so.child_env.emplace_back(*e);
  so.cancel_grace_ms = a.cancel_grace_ms;
  so.owned_by = a.owned_by;
  so.cgroup_leaf = a.cgroup_leaf;
  so.handoff_dir = po.handoff_dir;
  return so;
}

// The session's rules, from what the host holds: a shared session
// (--session-space) needs its space and shared:<space> write (docs/abi.md,
// "Shared sessions"); a new session needs write, a resume also resume
// (docs/abi-policy.md, "session"). Then the home's sessions, for the plan
// to mask those the policy does not let the agent read.
ctx::Result<void> check_sessions(const ctx::agentdir::AgentSpec& spec, const Args& a, ctx::launcher::PlanOptions& po) {
  if (!a.session_space.empty()) {
    // One the caller may not open exists all the same: the supervisor
    // refuses it as a space the owner may not write.
    auto space = ctx::sys::open(ctx::sys::at_cwd, spec.ctx_root + "/shared/" + a.session_space,
                                ctx::sys::Open::directory | ctx::sys::Open::no_follow);
    CTX_TRY(ctx::launcher::check_session_space(spec, a.session_space, space || space.error().code != ENOENT));
  }
  // The home's sessions: directories only (a .keep file or a planted
  // link is no session). The plan masks those the policy hides, and a
  // resume is told from a new session by them, so a home whose sessions
  // cannot be listed (an agent may chmod its own session directory) is
  // refused. None: no directory yet (a first launch), or a link or a file
  // there, which making the session refuses.
  const std::string sessions = spec.ctx_root + "/home/" + ctx::sessions_rel(spec.owner, spec.name);
  auto unlisted = [&](int code) {
    return ctx::Error{code, sessions + ": " + ctx::errno_name(code) +
                                ": the agent's sessions cannot be listed, so the launch cannot hide those its "
                                "policy does not let it read; give the agent's owner read and search rights there "
                                "again (chmod u+rx)"};
  };
  std::vector<std::string> home;
  auto dir = ctx::sys::open(ctx::sys::at_cwd, sessions, ctx::sys::Open::directory | ctx::sys::Open::no_follow);
  if (!dir && dir.error().code != ENOENT && dir.error().code != ENOTDIR && dir.error().code != ELOOP)
    return ctx::fail(unlisted(dir.error().code));
  if (dir) {
    auto names = ctx::sys::list_open_dir(dir->get());
    if (!names) return ctx::fail(unlisted(names.error().code));
    for (const auto& n : *names)
      if (auto st = ctx::sys::stat_at(dir->get(), n); st && *st && S_ISDIR((*st)->mode)) home.push_back(n);
  }
  // A session of the home exists when it is one of those; a shared
  // session lives in its space.
  const bool session_exists =
      a.session_space.empty()
          ? std::find(home.begin(), home.end(), a.session) != home.end()
          : static_cast<bool>(ctx::sys::open(
                ctx::sys::at_cwd,
                spec.ctx_root + "/" + ctx::launcher::session_dir_rel(spec.owner, spec.name, a.session_space) + "/" +
                    a.session,
                ctx::sys::Open::directory | ctx::sys::Open::no_follow));
  CTX_TRY(ctx::launcher::check_session_policy(spec, a.session, session_exists));
  po.sessions = std::move(home);
  return {};
}

}  // namespace

// The shortest slice the kernel grants (0.1 ms).
constexpr std::uint64_t kLaunchSliceNs = 100'000;

int main(int argc, char** argv) {
  // The watchdog of a supervisor that is gone (launcher/supervisor/watchdog.hpp).
  if (argc == 3 && std::strcmp(argv[1], "--watchdog") == 0) return ctx::launcher::run_watchdog(argv[2]);
  // Short time slices for the launcher's processes (the runtime gets the
  // default back before its exec): on a busy machine each process of a
  // launch waits less for a CPU when it starts or wakes (docs/performance.md,
  // "Under load").
  ctx::sys::set_time_slice(kLaunchSliceNs);
  ctx::sys::ignore_sigpipe();
  Args a;
  if (auto code = parse_args(argc, argv, a)) return *code;
  ctx::agentdir::LoadOptions lo;
  const uid_t euid = ::geteuid();
  lo.require_trusted_files = euid == 0;
  // An owned child (--owned-by) is always a system agent.
  auto tier = a.system || a.owned_by != 0
                  ? ctx::Result<ctx::agentdir::Tier>(std::nullopt)
                  : ctx::agentdir::find_tier(a.ctx_root, a.name,
                                             a.user < 0 ? std::nullopt : std::optional<std::uint32_t>(a.user), euid);
  if (!tier) return report(tier.error(), ctx::launcher::kExitLaunchFailed);
  lo.user = *tier;
  auto spec = ctx::agentdir::load(a.ctx_root, a.name, lo);
  if (!spec) return report(spec.error(), ctx::launcher::kExitLaunchFailed);
  auto caller = ctx::launcher::probe_caller(*spec);
  if (!caller) return report(caller.error(), ctx::launcher::kExitLaunchFailed);
  ctx::launcher::PlanOptions po;
  po.session = a.session;
  po.session_space = a.session_space;
  po.command = a.command;
  po.shared_spaces = ctx::launcher::list_shared_spaces(spec->ctx_root);
  po.terminal = ctx::sys::is_terminal(0) || ctx::sys::is_terminal(1) || ctx::sys::is_terminal(2);
  if (po.terminal)
    for (char** e = environ; *e != nullptr; ++e) po.caller_env.emplace_back(*e);
  // The agent view: served over FUSE (live) where /dev/fuse can be used,
  // else built once at launch, said every time, refused on request.
  po.view = true;
  po.static_view = a.static_view;
  if (!a.static_view && ctx::launcher::shows_ctx_tree(*spec)) {
    if (auto fuse = ctx::launcher::fuse_usable(); !fuse) {
      std::string why = "/dev/fuse cannot be used (" + fuse.error().msg + "), so " + spec->name +
                        "'s agent view is built once at launch: it will not follow policy or tree changes while "
                        "it runs; chmod 0666 /dev/fuse (Debian's default) or a udev rule gives the live view";
      if (a.require_view) return report(ctx::Error{EACCES, "--require-view: " + why}, ctx::launcher::kExitLaunchFailed);
      std::fprintf(stderr, "ctx-agent-run: warning: %s\n", ctx::printable(why).c_str());
      po.static_view = true;
    }
  }
  if (spec->parent)
    if (auto r = ctx::launcher::plan_ancestry(*spec, po,
                                              [&](const std::string& n) { return ctx::agentdir::load(a.ctx_root, n); });
        !r)
      return report(r.error(), ctx::launcher::kExitLaunchFailed);
  if (auto r = check_sessions(*spec, a, po); !r) return report(r.error(), ctx::launcher::kExitLaunchFailed);
  // The HTTP model endpoint's token: new at every launch, never stored.
  auto token = ctx::sys::random_hex(32);
  if (!token) return report(token.error(), ctx::launcher::kExitLaunchFailed);
  po.model_token = std::move(*token);
  // An owned child runs only under its parent's supervisor (seed 003 rule
  // 5); a dry run touches nothing and may show its plan.
  if (!a.dry_run)
    if (auto r = ctx::launcher::check_owned_launch(*spec, a.owned_by, ::getppid()); !r)
      return report(r.error(), ctx::launcher::kExitLaunchFailed);
  auto plan = ctx::launcher::make_plan(*spec, *caller, po);
  if (!plan) return report(plan.error(), ctx::launcher::kExitLaunchFailed);
  if (a.dry_run) {
    std::cout << ctx::launcher::plan_to_json(*plan).dump(2, ' ', true) << "\n";
    return 0;
  }
  std::optional<ctx::Error> error;
  int code = ctx::launcher::supervise(*spec, *plan, supervise_options(a, po, euid), error);
  if (error) report(*error, code);
  return code;
}
