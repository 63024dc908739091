// Starting a sandbox, the agent's and every model's, written once: the
// lifeline and the channel, the clone into the plan's namespaces (and
// cgroup), the id maps and the go byte where the supervisor writes them
// (supervisor_maps_ids), and the setup's records until the
// runtime's exec (EOF) or the error that ended it. What differs between
// an agent's launch and a model call is a parameter (SandboxStart). The
// sandbox's side of it is run_sandbox (sandbox.hpp).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "base/unique_fd.hpp"
#include "launcher/plan/plan.hpp"
#include "launcher/sandbox/channel.hpp"
#include "sys/process.hpp"

namespace ctx::launcher {

/// What a sandbox reported over the channel until its runtime's execve
/// (EOF) or its error.
struct SetupReport {
  std::vector<StepTiming> timings;  ///< the steps' durations, in the order sent
  UniqueFd notify;                  ///< the NOTIFY_SOCKET, bound in the sandbox
  UniqueFd control;                 ///< the control socket, bound in the sandbox
  UniqueFd master;                  ///< the runtime's pty (an interactive launch)
  UniqueFd tools;                   ///< the read-only clone of the CTX root `ctx tool` runs tools from
  std::vector<BindReport> static_binds;  ///< the binds a static agent view made at launch, in order
  std::vector<NamespaceReport> namespaces;  ///< what a sandbox that mapped itself read of its namespaces
  std::optional<Record> error;      ///< the error that ended the setup

  /// Takes one record with the descriptors that came with it. A kind's
  /// descriptors are kept only in the number it carries (others are
  /// closed). A view's /dev/fuse descriptor goes to on_view (dropped when
  /// it is empty), whose error becomes the setup's error ("the agent
  /// view: ...") unless there is one already; an error record replaces
  /// any earlier error.
  void take(Record r, std::vector<UniqueFd> fds, const std::function<Result<void>(UniqueFd)>& on_view);
};

/// What differs between the starts of sandboxes (an agent's launch, each
/// model call). Each hook that fails ends the start with its error, the
/// sandbox killed and reaped.
/// A user and a network namespace made ahead for one sandbox
/// (ModelGate's spare): the user namespace already has the plan's id maps
/// and owns the network namespace (whose loopback the sandbox brings up,
/// as in one of its own).
struct JoinNamespaces {
  int user = -1;
  int net = -1;
};

struct SandboxStart {
  /// The descriptors the sandbox gets as its 0, 1 and 2; nullopt: the
  /// supervisor's own.
  std::optional<std::array<int, 3>> stdio;
  int listen_fd = -1;  ///< the agent socket, the runtime's fd 3 (LISTEN_FDS); -1 none
  /// The HTTP model endpoint's program (O_PATH; launcher/sandbox/endpoint_start.hpp); -1 none.
  int endpoint_exe = -1;
  int cgroup_fd = -1;  ///< the cgroup directory the sandbox is cloned into; -1 the supervisor's
  std::string clone_context;    ///< what a failed clone is said with ("" nothing)
  std::string id_maps_context;  ///< what failed id maps are said with
  std::string report_context;   ///< what a channel that cannot be read is said with
  /// A refused clone into a user namespace, or refused id maps, name the
  /// remedies (with_userns_remedy).
  bool userns_remedy = false;
  /// The sandbox reports every namespace of its own (SetupReport::
  /// namespaces), not only its pid namespace, when it maps itself.
  bool all_namespaces = false;
  /// Join these instead of making a user and a network namespace at the
  /// clone (a plan whose sandbox maps itself, with both in its flags): a
  /// child joins them, makes the plan's other namespaces and clones the
  /// sandbox's init as the supervisor's child (CLONE_PARENT), then exits.
  std::optional<JoinNamespaces> join;
  /// After the clone, only while a sandbox whose id maps the supervisor
  /// writes (supervisor_maps_ids) is held before them: what must be read
  /// of it before it takes its ids (its namespaces). A sandbox that maps
  /// itself reports them instead (SetupReport::namespaces).
  std::function<Result<void>(const sys::Child&)> held;
  /// After the clone (and the id maps the supervisor writes), before the
  /// records are read.
  std::function<Result<void>()> mapped;
  /// Once released, while the sandbox sets itself up, before its records
  /// are read.
  std::function<Result<void>()> released;
  /// Starts the agent view's server on the /dev/fuse descriptor the
  /// sandbox hands over (SetupReport::take).
  std::function<Result<void>(UniqueFd)> on_view;
};

/// A sandbox that start_sandbox released.
struct StartedSandbox {
  sys::Child child;          ///< the sandbox's init; its exit status is the runtime's
  UniqueFd lifeline;         ///< open while the supervisor wants the sandbox alive
  SetupReport setup;         ///< setup.error: the setup failed; the sandbox is not reaped yet
  std::uint64_t clone_us{};  ///< sys::now_us() just before the clone
};

/// Clones the sandbox of `plan`, writes its id maps (unless the plan has
/// the sandbox write them itself, user_ns_after_mounts), releases it and
/// reads its setup's records until its runtime's exec or the error that
/// ended it (setup.error; a channel that cannot be read is one, and the
/// sandbox is killed). An error before the release: the sandbox, if
/// cloned, killed and reaped.
Result<StartedSandbox> start_sandbox(const LaunchPlan& plan, const SandboxStart& how);

/// The error a failed setup's record stands for: its errno (EIO when it
/// names none) and its detail.
Error setup_error(const Record& error);

/// A failed setup's sandbox, reaped: the exit code of its init
/// (kExitLaunchFailed when it cannot be had).
int reap_failed(const sys::Child& sandbox);

/// `e`, with the remedies added when it means the kernel will not give
/// this unprivileged caller a user namespace.
Error with_userns_remedy(const LaunchPlan& plan, Error e);

/// Whether the supervisor writes the sandbox's id maps (newuidmap and
/// newgidmap for an unprivileged `iso uid`), holding the sandbox until
/// they are written. Otherwise the sandbox goes on alone at once: the
/// maps of an unprivileged launch (one line, the caller's own ids, with
/// setgroups denied) are the kind a process may write for its own user
/// namespace, and a root launch makes its user namespace later, itself.
bool supervisor_maps_ids(const IdPlan& ids);

/// A running model.
struct ModelRun {
  sys::Child child;   ///< the sandbox's init; its exit status is the model's
  UniqueFd lifeline;  ///< open while the supervisor wants the model alive
  // What the gate records when the model exits (ModelGate::finished).
  std::string name;   ///< provider/model, after any alias
  std::string rel;    ///< the model file below the CTX root
  std::string alias;  ///< the alias the caller named, below the CTX root ("" none)
  std::chrono::steady_clock::time_point started{};
};

}  // namespace ctx::launcher
