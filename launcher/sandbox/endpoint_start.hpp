// The HTTP model endpoint's start inside the sandbox (docs/models.md,
// "The HTTP endpoint"): the init binds its socket and forks it beside the
// runtime, with the runtime's own confinement and no authority beyond the
// agent's; it dies with the sandbox (its pid namespace), and the init
// never waits for it.
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

/// Called by the sandbox's init after its setup (ids, capabilities,
/// no_new_privs), before the runtime's fork. Listens on 127.0.0.1 at the
/// plan's port, forks the endpoint and execs the program open at `exe`
/// (a descriptor from outside the root: the agent's mounts need not show
/// it; the loader and libmicrohttpd come from the sandbox's /usr). Returns
/// the endpoint's URL for CTX_MODEL_URL, or "" when it could not be
/// started (said on stderr as a warning; the agent runs without it).
std::string start_endpoint(const LaunchPlan& plan, int exe);

}  // namespace ctx::launcher
