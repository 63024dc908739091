// The launch plan: every decision of a launch (ids and maps, namespaces,
// mounts in order with flags, root, cwd, environment, runtime argv) made
// by pure code from an AgentSpec and the caller's credentials. Only
// sandbox.cpp applies it. `ctx-agent-run --dry-run` prints it as JSON.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "agentdir/entitlement.hpp"
#include "base/result.hpp"
#include "cgroup/limits.hpp"
#include "mountspec/steps.hpp"
#include "sys/identity.hpp"

namespace ctx::launcher {

/// Who runs the launcher (effective ids) and what the machine offers.
struct Caller {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;  ///< supplementary groups
  /// The owner's groups from the group database, for opening mount
  /// sources with the owner's credentials in a privileged launch.
  std::vector<std::uint32_t> owner_groups;
  /// What the owner may give an agent (a root caller only): the identity
  /// entitlement of DESIGN.md 4b.
  agentdir::OwnerIds owner_ids;
  /// The owner's primary gid (passwd), when known (a root caller only).
  std::optional<std::uint32_t> owner_primary_gid;
  /// newuidmap/newgidmap are installed (the uidmap package); read for an
  /// unprivileged `iso uid` only, like the ranges below.
  bool have_id_map_helpers = false;
  /// Subordinate id ranges delegated to the caller (/etc/subuid, subgid).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> subuid, subgid;  ///< (start, count)
};

/// How identity is established (DESIGN.md section 3, the iso table).
struct IdPlan {
  bool privileged = false;  ///< the caller is root
  bool user_ns = false;     ///< the sandbox has its own user namespace
  /// When the namespace is made: at clone (unprivileged: the caller's own
  /// ids are mapped) or after the mounts, once the sandbox has dropped to
  /// host ids (privileged userns/shared).
  bool user_ns_after_mounts = false;
  bool map_via_helpers = false;  ///< newuidmap/newgidmap write the maps
  bool deny_setgroups = false;
  std::vector<sys::IdMapLine> uid_map;
  std::vector<sys::IdMapLine> gid_map;
  /// Host credentials the sandbox takes with set_ids before any user
  /// namespace of its own (privileged launches only).
  std::optional<sys::Creds> host_ids;
  /// Ids of the runtime as seen inside the sandbox.
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;
  /// Ids of the runtime as seen from the host.
  std::uint32_t host_uid = 0;
  std::uint32_t host_gid = 0;
  std::vector<std::uint32_t> host_groups;
  /// Credentials mount sources and mount points are opened with.
  sys::Creds fs;
};

/// The mount plan's steps (mountspec/steps.hpp).
using mountspec::BindStep;
using mountspec::DevNodeStep;
using mountspec::FsStep;
using mountspec::MaskKeep;
using mountspec::MaskStep;
using mountspec::MountStep;
using mountspec::RootStep;
using mountspec::SealStep;
using mountspec::SocketStep;
using mountspec::StepKind;
using mountspec::SymlinkStep;
using mountspec::ViewStep;

/// The HTTP model endpoint (docs/models.md, "The HTTP endpoint"): a
/// process the sandbox's init starts at the first connection to its
/// socket, when the policy grants at least one `model:<name> use` or the
/// sandbox has no network (then it is also the agent's HTTP proxy, which
/// refuses every request with `refusal`: docs/models.md, "Without
/// network").
struct EndpointPlan {
  /// 127.0.0.1:kEndpointPort in the sandbox's own network namespace; 0 (a
  /// port the kernel picks) with the host's.
  std::uint16_t port = 0;
  /// The per-launch token every call must carry (CTX_MODEL_TOKEN); empty:
  /// no model is granted, and model calls are refused.
  std::string token;
  /// Without network: what a proxy request is answered (403): the cause
  /// and the policy line that would change it. Empty with the host's
  /// network (no proxy is set).
  std::string refusal;
};

/// The whole plan.
struct LaunchPlan {
  std::string name;
  std::string session;
  /// --session-space P: the session lives in <ctx>/shared/P/agent/<name>/
  /// session/ instead of the agent's home (docs/abi.md, "Shared
  /// sessions"); empty for a home session.
  std::string session_space;
  std::string ctx_root;  ///< host path of the CTX root
  std::uint32_t owner = 0;
  /// A user agent's tier (its owner's uid), none for a system agent
  /// (agentdir/tier.hpp): where its .d/, socket and entry are.
  std::optional<std::uint32_t> tier_user;
  /// An owned child's ancestors' label types, parent first
  /// (AgentSpec::ancestor_types): every tool's and model's own policy must
  /// admit them too.
  std::vector<std::string> ancestor_types;
  std::string root;  ///< host path that becomes "/"
  std::string cwd;
  IdPlan ids;
  std::uint64_t clone_flags = 0;  ///< CLONE_NEW* at clone time
  int unshare_flags = 0;          ///< CLONE_NEW* unshared after the mounts
  bool net_ns = true;             ///< loopback only
  /// Every mount of the sandbox, in the order it is made: the root, the
  /// binds (parents before children), the masks, the tool views, then
  /// /proc, /dev and /run/ctx (mountspec::append_fixed_steps).
  mountspec::MountPlan mounts;
  std::string hostname;
  std::vector<std::string> env;   ///< KEY=VALUE, exactly this, in order
  std::vector<std::string> argv;  ///< argv[0] is the path inside the sandbox
  std::string notify_target;      ///< NOTIFY_SOCKET path inside the sandbox
  /// An interactive launch (a terminal among the caller's 0-2): the
  /// runtime gets a pty of the sandbox's own instead (launcher/supervisor/pty_relay.hpp).
  bool terminal = false;
  std::optional<cgroup::Limits> limits;  ///< cgroup limits of the `limits` file
  /// Bounds that hold without cgroup controllers: the size of /dev/shm
  /// (a tmpfs size: bytes with an optional K/M/G/T suffix) and
  /// RLIMIT_NPROC of the runtime (docs/security.md says what it counts).
  std::string shm_size;
  std::uint64_t nproc = 0;
  /// The HTTP model endpoint, when the agent has one. Its CTX_MODEL_URL is
  /// in `env` for a fixed port; with a picked one the sandbox adds it.
  std::optional<EndpointPlan> endpoint;
};

/// Options of a plan that do not come from the control files.
/// The caller's variables an interactive launch passes on (the pty's
/// terminal type and the person's language), each only when its value is
/// a plain name (terminal_env_value_ok); the agent's `env` file overrides
/// them. Every other variable of the caller stays outside.
inline constexpr std::string_view kTerminalEnv[] = {"TERM",       "COLORTERM", "LANG",        "LANGUAGE",
                                                     "LC_ALL",     "LC_CTYPE",  "LC_MESSAGES", "LC_COLLATE",
                                                     "LC_NUMERIC", "LC_TIME",   "LC_MONETARY"};

/// Whether a value of kTerminalEnv may pass: 1 to 128 bytes of letters,
/// digits and . _ + - @ : (no '/': glibc reads a locale name that holds
/// one as a path, and terminfo a TERM that does). Pure.
bool terminal_env_value_ok(std::string_view value);

struct PlanOptions {
  std::string session = "default";
  /// The shared space the session lives in (LaunchPlan::session_space).
  std::string session_space;
  std::vector<std::string> command;  ///< "-- CMD ARG..." override
  /// Names of the shared spaces that exist under <ctx>/shared (listed by
  /// the caller), so that a mount exposing all of them can mask the ones
  /// the policy does not allow.
  std::vector<std::string> shared_spaces;
  /// An owned child's coordination directory in its parent's session
  /// (<...>/context/child/<name>, host path), when it exists: its handoff
  /// is shown read-only and its result channels writable at kHandoffDir.
  std::string handoff_dir;
  /// Host directories the agent must not see even where a mount shows
  /// them: the session trees of its ancestors (a child never reads its
  /// parent's messages.jsonl). Each is masked like a disallowed shared
  /// space.
  std::vector<std::string> hidden_dirs;
  /// The directories in the agent's own session/ directory (the caller
  /// lists them): each one other than this launch's session that is a
  /// session name (not `index`, not a dot name) is
  /// masked wherever a bind shows it unless the policy allows
  /// `session:<name> read` (docs/abi-policy.md, "session").
  std::vector<std::string> sessions;
  /// An owned child's parent's mount table (host sources), to tie binds
  /// derived from the parent's non-recursive binds to their mount.
  mountspec::Table parent_mounts;
  /// A terminal among the caller's 0-2 (LaunchPlan::terminal).
  bool terminal = false;
  /// The caller's environment (KEY=VALUE); only the variables of
  /// kTerminalEnv are taken from it, and only when `terminal` is set.
  std::vector<std::string> caller_env;
  /// The agent view is served (docs/view.md): a bind of the CTX root (or
  /// of a directory above it, or of a part of it that is not the agent's
  /// own home or a shared space) shows the view there instead of the
  /// durable tree, and the tool tiers a shared space brings are the
  /// view's. The caller decides from whether /dev/fuse can be used.
  bool view = false;
  /// The view is built once at launch with tmpfs and binds
  /// (launcher/sandbox/static_view.hpp) instead of served over FUSE: where
  /// /dev/fuse cannot be used, or on request (--static-view).
  bool static_view = false;
  /// The per-launch token of the HTTP model endpoint (64 hex digits, the
  /// caller's random); empty: no endpoint.
  std::string model_token;
};

/// Fixed paths inside every sandbox.
inline constexpr const char* kInnerCtxRoot = "/ctx";
inline constexpr const char* kNotifyDir = "/run/ctx";
inline constexpr const char* kNotifyPath = "/run/ctx/notify";
/// The supervisor's control socket (`ctx agent create|start|stop|wait`).
inline constexpr const char* kSupervisorPath = "/run/ctx/supervisor";
/// Where an owned child finds handoff.md (ro) and writes result.md,
/// refs.jsonl and artifact/.
inline constexpr const char* kHandoffDir = "/handoff";
/// The HTTP model endpoint's port in a sandbox's own network namespace.
inline constexpr std::uint16_t kEndpointPort = 7180;
inline constexpr const char* kDefaultPath = "/ctx/bin:/usr/local/bin:/usr/bin:/bin";
/// /dev/shm's size and the process bound unless `limits` sets shm.max and
/// nproc.max.
inline constexpr const char* kDefaultShmSize = "64M";
inline constexpr std::uint64_t kDefaultNproc = 1024;

/// The session class at launch (docs/abi-policy.md, "session"): a new
/// session S needs `allow <type> session:S write`, an existing one also
/// `session:S resume`. EACCES naming the policy file and the line to add.
/// An owned child's `default` session is its parent's decision
/// (agent:<child> create and start) and is not checked here. The
/// launcher asks it before make_plan (launcher/main.cpp).
Result<void> check_session_policy(const agentdir::AgentSpec& spec, const std::string& session, bool exists);

/// A session in shared space `space` (--session-space, docs/abi.md,
/// "Shared sessions"): the space must exist (ENOENT with `ctx init
/// --shared`) and the policy must allow `shared:<space> write` (EACCES
/// naming the policy file and the line to add). Asked before anything is
/// made, with check_session_policy. `space_exists`: the caller looked.
Result<void> check_session_space(const agentdir::AgentSpec& spec, const std::string& space, bool space_exists);

/// The host directory of a launch's sessions, below the CTX root:
/// home/<owner>/agent/<name>/session, or shared/<space>/agent/<name>/session.
std::string session_dir_rel(std::uint32_t owner, const std::string& name, const std::string& space);

/// The launch's session when it lives in the agent's home; "" for a
/// shared one (--session-space), whose home holds no session of this
/// launch: what the agent view and the list of the home's sessions show
/// as the agent's own there.
std::string home_session(const LaunchPlan& plan);

/// Whether the plan's agent view is served over FUSE (a view step without
/// `built`), and whether it is built at launch (one with).
bool serves_view(const LaunchPlan& plan);
bool builds_view(const LaunchPlan& plan);

/// Whether a bind or the root shows the agent home's session/, through
/// the list of its sessions (a mask that keeps entries: plan.cpp,
/// AgentSessions) the agent view left in the plan. A shared session's
/// launch then makes that session/ when it is missing, so that the list
/// has a directory to cover.
bool lists_home_sessions(const LaunchPlan& plan);

/// Makes the plan, or fails with the reason a person can act on: EPERM for
/// an iso profile the caller cannot have, EACCES for a shared space the
/// policy does not allow, EINVAL for targets the launcher reserves.
Result<LaunchPlan> make_plan(const agentdir::AgentSpec& spec, const Caller& caller, const PlanOptions& opts);

}  // namespace ctx::launcher
