// The HTTP model endpoint's start inside the sandbox (docs/models.md,
// "The HTTP endpoint"): the init binds its socket before the runtime
// exists and forks it at the first connection, with the runtime's own
// confinement and no authority beyond the agent's; it dies with the
// sandbox (its pid namespace), and the init never waits for it.
#pragma once

#include <string>

#include "base/unique_fd.hpp"
#include "launcher/plan/plan.hpp"

namespace ctx::launcher {

/// The program's name, in the build tree beside ctx-agent-run and
/// installed in the package's libexec directory.
inline constexpr const char* kEndpointProgram = "ctx-model-endpoint";

/// The endpoint's program, opened O_PATH by the supervisor before the
/// sandbox exists: kEndpointProgram beside the launcher's own executable
/// (the build tree), else in the package's libexec directory; an invalid
/// descriptor when neither has it.
UniqueFd open_endpoint_program();

/// The endpoint's socket, listening before the runtime exists: `listen`
/// (close-on-exec; invalid when there is no endpoint) and the URL for
/// CTX_MODEL_URL ("" when none).
struct EndpointSocket {
  UniqueFd listen;
  std::string url;
};

/// Called by the sandbox's init after its setup (ids, capabilities,
/// no_new_privs), before the runtime's fork: listens on 127.0.0.1 at the
/// plan's port. Nothing is started yet: connections wait in the socket's
/// backlog until the init, seeing the first one, calls start_endpoint.
/// When the socket cannot be made, or `exe` is invalid, the agent runs
/// without an endpoint (said on stderr as a warning).
EndpointSocket listen_endpoint(const LaunchPlan& plan, int exe);

/// Forks the endpoint on `listen` and execs the program open at `exe`
/// (a descriptor from outside the root: the agent's mounts need not show
/// it; the loader and libmicrohttpd come from the sandbox's /usr), with
/// the runtime's confinement. A failed fork is a warning; the init never
/// waits for the endpoint, which ends with the sandbox's pid namespace.
void start_endpoint(const LaunchPlan& plan, int exe, int listen);

}  // namespace ctx::launcher
