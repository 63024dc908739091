#include "launcher/control/child_spawn.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>

#include "base/names.hpp"
#include "base/path.hpp"
#include "launcher/sandbox/sandbox.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

// <ctx>/home/<owner>/agent/<name>/session/default/output.log, for appending.
Result<UniqueFd> open_output(const agentdir::AgentSpec& child, const sys::MakeAs& owner) {
  CTX_TRY_ASSIGN(UniqueFd home,
                 sys::open(sys::at_cwd, child.ctx_root + "/home", sys::Open::directory | sys::Open::no_follow));
  CTX_TRY_ASSIGN(UniqueFd dir,
                 sys::open_or_make_dirs(home.get(), session_rel(child.owner, child.name, "default"), 0755, owner));
  return sys::open_append(dir.get(), "output.log", 0644, owner);
}

}  // namespace

int parent_dead_signal() { return SIGRTMIN + 2; }
int stop_signal() { return SIGRTMIN + 3; }

std::vector<std::string> child_supervisor_argv(const SpawnConfig& cfg, const std::string& ctx_root, pid_t parent_pid,
                                               const std::string& name, const std::vector<std::string>& command) {
  std::vector<std::string> argv{cfg.self_exe,
                                "--ctx-root",
                                ctx_root,
                                "--owned-by",
                                std::to_string(parent_pid),
                                "--cancel-grace-ms",
                                std::to_string(cfg.cancel_grace_ms),
                                "--json-status-fd",
                                "3"};
  // <agent>/child/<name>: beside runtime/, so the no-internal-process
  // rule holds at every level.
  if (!cfg.agent_cgroup.empty())
    argv.insert(argv.end(), {"--cgroup-base", cfg.agent_cgroup + "/child", "--cgroup-leaf", name});
  if (cfg.require_cgroup) argv.push_back("--require-cgroup");
  argv.push_back(name);
  if (!command.empty()) {
    argv.push_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
  }
  return argv;
}

Result<OwnedChild> spawn_child_supervisor(const SpawnConfig& cfg, const agentdir::AgentSpec& child,
                                          const std::vector<std::string>& command) {
  if (!cfg.agent_cgroup.empty()) {
    CTX_TRY_ASSIGN(UniqueFd base, sys::open(sys::at_cwd, cfg.agent_cgroup, sys::Open::directory));
    if (auto st = sys::stat_at(base.get(), "child"); !st || !*st) CTX_TRY(sys::make_dir_at(base.get(), "child", 0755));
  }
  std::vector<std::string> argv = child_supervisor_argv(cfg, child.ctx_root, ::getpid(), child.name, command);
  // The child's output is its own, not its parent's: stdin /dev/null,
  // stdout and stderr appended to its session's output.log (made beneath
  // the CTX root, never through a symlink).
  CTX_TRY_ASSIGN(UniqueFd devnull, sys::open(sys::at_cwd, "/dev/null", sys::Open::read));
  CTX_TRY_ASSIGN(UniqueFd out, open_output(child, cfg.owner));
  CTX_TRY_ASSIGN(auto pipe, sys::make_pipe());
  CTX_TRY_ASSIGN(sys::Child proc, sys::spawn_owned(cfg.self_exe, argv, cfg.env, parent_dead_signal(),
                                                   {pipe.second.get()}, {devnull.get(), out.get(), out.get()}));
  pipe.second.reset();
  CTX_TRY(sys::set_nonblocking(pipe.first.get()));
  OwnedChild c;
  c.pid = proc.pid;
  c.pidfd = std::move(proc.pidfd);
  c.status = std::move(pipe.first);
  return c;
}

int reap_child(const OwnedChild& c) {
  auto st = sys::wait_pid(c.pid);
  return st ? exit_code_of(*st) : kExitLaunchFailed;
}

void signal_children(ChildRegistry& reg, int sig) {
  for (const auto& name : reg.running_names()) (void)sys::signal_pidfd(reg.find(name)->pidfd.get(), sig);
}

void wait_children(ChildRegistry& reg, int timeout_ms, bool kill_left,
                   const std::function<void(const std::string&, int)>& ended) {
  std::uint64_t deadline = sys::now_us() + static_cast<std::uint64_t>(timeout_ms) * 1000;
  while (reg.running() > 0) {
    std::uint64_t now = sys::now_us();
    if (now >= deadline) break;
    std::vector<struct pollfd> fds;
    std::vector<std::string> names = reg.running_names();
    for (const auto& name : names) fds.push_back({reg.find(name)->pidfd.get(), POLLIN, 0});
    if (!sys::poll_fds(fds, static_cast<int>((deadline - now + 999) / 1000))) break;
    for (std::size_t i = 0; i < fds.size(); ++i)
      if (fds[i].revents != 0) ended(names[i], reap_child(*reg.find(names[i])));
  }
  if (!kill_left) return;
  for (const auto& name : reg.running_names()) {
    (void)sys::signal_pidfd(reg.find(name)->pidfd.get(), SIGKILL);
    ended(name, reap_child(*reg.find(name)));
  }
}

}  // namespace ctx::launcher
