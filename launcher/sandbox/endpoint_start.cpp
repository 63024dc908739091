#include "launcher/sandbox/endpoint_start.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "base/path.hpp"
#include "base/text.hpp"
#include "launcher/sandbox/sandbox.hpp"
#include "sys/landlock.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"
#include "sys/seccomp.hpp"
#include "sys/socket.hpp"

namespace ctx::launcher {

namespace {

// Bounds of the endpoint's own: a thread per connection (64 at most) with
// small stacks, a few descriptors per call, no core dump (it holds the
// token).
constexpr struct {
  sys::Resource resource;
  std::uint64_t value;
} kEndpointLimits[] = {
    {sys::Resource::address_space, std::uint64_t{1} << 30},
    {sys::Resource::open_files, 512},
    {sys::Resource::core_size, 0},
};

void warn(const std::string& what) {
  std::fprintf(stderr, "ctx-agent-run: warning: the model endpoint: %s; the agent runs without it\n",
               printable(what).c_str());
}

[[noreturn]] void exec_endpoint(const LaunchPlan& plan, int exe, int listen) {
  sys::reset_signals();
  if (auto n = sys::open(sys::at_cwd, "/dev/null", sys::Open::read_write)) {
    (void)sys::dup_to(n->get(), 0);
    (void)sys::dup_to(n->get(), 1);
  }
  // The program at 3 (LISTEN_FDS), its file's descriptor close-on-exec.
  if (auto r = sys::keep_only_fds({listen, exe}); !r) {
    warn(r.error().msg);
    _exit(kExitLaunchFailed);
  }
  auto fail = [](const Error& e) {
    warn(e.msg);
    _exit(kExitLaunchFailed);
  };
  if (auto r = sys::set_cloexec(4); !r) fail(r.error());
  if (auto r = sys::set_process_limit(plan.nproc); !r) fail(r.error());
  for (const auto& l : kEndpointLimits) {
    if (l.resource == sys::Resource::address_space && sys::kAddressSanitizer) continue;
    if (auto r = sys::lower_limit(l.resource, l.value); !r) fail(r.error());
  }
  // The runtime's confinement (sandbox.cpp, exec_runtime): no_new_privs
  // and no capabilities are the init's already.
  if (auto r = sys::landlock_scope_ipc(); !r) fail(r.error().with_context("Landlock"));
  if (auto r = sys::load_seccomp_program(sys::builtin_seccomp_program()); !r) fail(r.error());
  std::vector<std::string> env{"LISTEN_FDS=1", "LISTEN_PID=" + std::to_string(::getpid()), "CTX_AGENT=" + plan.name};
  if (!plan.endpoint->token.empty()) env.push_back("CTX_MODEL_TOKEN=" + plan.endpoint->token);
  if (!plan.endpoint->refusal.empty()) env.push_back("CTX_NETWORK_REFUSAL=" + plan.endpoint->refusal);
  Error e = sys::exec_fd(4, {kEndpointProgram}, env, sys::ExecFd::close);
  warn(e.with_context(kEndpointProgram).msg);
  _exit(kExitLaunchFailed);
}

}  // namespace

UniqueFd open_endpoint_program() {
  std::vector<std::string> candidates;
  // The link names the executable as the kernel resolved it: no path walk.
  if (auto self = sys::read_link_at(sys::at_cwd, "/proc/self/exe"))
    candidates.push_back(std::string(path_dirname(*self)) + "/" + kEndpointProgram);
  candidates.push_back(std::string(CTX_LIBEXECDIR) + "/" + kEndpointProgram);
  for (const auto& c : candidates)
    if (auto fd = sys::open(sys::at_cwd, c, sys::Open::path_only)) return std::move(*fd);
  return UniqueFd();
}

EndpointSocket listen_endpoint(const LaunchPlan& plan, int exe) {
  if (!plan.endpoint) return {};
  if (exe < 0) {
    warn(std::string(kEndpointProgram) + " is not installed");
    return {};
  }
  auto sock = sys::listen_tcp_loopback(plan.endpoint->port);
  if (!sock) {
    warn(sock.error().msg);
    return {};
  }
  return {std::move(sock->first), "http://127.0.0.1:" + std::to_string(sock->second)};
}

void start_endpoint(const LaunchPlan& plan, int exe, int listen) {
  auto pid = sys::fork_process();
  if (!pid) {
    warn(pid.error().msg);
    return;
  }
  if (*pid == 0) exec_endpoint(plan, exe, listen);
}

}  // namespace ctx::launcher
