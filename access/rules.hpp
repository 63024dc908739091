// The access rules: which entries of the durable CTX tree an agent sees,
// which tools it may run and which models it may use (docs/abi.md "The
// root" and "The agent view"; docs/view.md), decided one name at a time
// from its label, policy, identity and the entries themselves. Pure: what
// the CTX tree holds comes through the HostTree interface, so every gate
// decides with the same code (the FUSE view, the static view, the tool
// gate, the model gate, `ctx view` and `ctx explain`), and the unit tests
// with an in-memory tree.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agentdir/agent_spec.hpp"
#include "policy/policy.hpp"

namespace ctx::access {

/// What the tree holds at one name, never following a symbolic link.
struct HostEntry {
  enum class Type { directory, regular, symlink, other };
  Type type = Type::other;
  std::uint32_t mode = 0;  ///< st_mode's permission bits (07777)
  std::uint32_t uid = 0;   ///< host ids
  std::uint32_t gid = 0;
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
};

/// The durable tree below the CTX root, by relative path ("" is the root,
/// "agent/coder.d/status"). Implementations resolve beneath the root and
/// never through a symbolic link.
class HostTree {
 public:
  virtual ~HostTree() = default;
  /// The entry at rel; nullopt when there is none. One that exists but
  /// cannot be reached (a symlink on the way, no permission) must not be
  /// nullopt: a rule takes nullopt for "absent" (a tool without a policy).
  virtual std::optional<HostEntry> stat(const std::string& rel) const = 0;
  /// A small regular file's text (a tool's .d/policy, an agent's .d/parent).
  virtual std::optional<std::string> read(const std::string& rel) const = 0;
  /// A symbolic link's target text.
  virtual std::optional<std::string> read_link(const std::string& rel) const = 0;
  /// The names in the directory rel, in any order.
  virtual std::vector<std::string> list(const std::string& rel) const = 0;
};

/// Who looks: the facts the rules decide from.
struct Viewer {
  std::string agent;        ///< its name
  std::uint32_t owner = 0;  ///< home/<owner> is its user tier
  /// A user agent (home/<owner>/agent/<agent>.d): the system agent of the
  /// same name is another agent, and its own .d/ is in its home.
  bool user_tier = false;
  std::string subject;    ///< the label's type; "" (no label) is denied every grant
  policy::Policy policy;  ///< the agent's policy
  /// The session the agent runs in (its --session): shown in its home's
  /// session/ with index; every other entry there needs `session:<x>
  /// read`. "" (`ctx view` on the host, no launch): none is current.
  std::string session;
  /// An owned child's ancestors' types, parent first ("" for one that admits
  /// nothing: AgentSpec::ancestor_types). A tool's or model's own policy must
  /// admit each of them as well as `subject` (docs/abi.md "Attenuation
  /// (children)": a child's label never makes it more than its parent).
  std::vector<std::string> ancestors;
  /// The runtime's host ids, for the execute bit of a tool.
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::vector<std::uint32_t> groups;
};

/// The viewer an agent's control files make, with the runtime's host ids
/// as a launch gives them (iso uid: its uid; else the owner's), for
/// `ctx view` on the host.
Viewer viewer_for(const agentdir::AgentSpec& spec);

/// What the view serves at a path: the host entry at host_rel (the path
/// itself, or for a model alias the model it names), with its entry.
struct Shown {
  std::string host_rel;
  HostEntry entry;
  /// Not to be run from the view: a model entry (docs/abi.md "Agents, tools and
  /// models": a model is an inference endpoint that runs in a sandbox of its
  /// own, never with the agent's rights). Its entry's execute bits are cleared
  /// too.
  bool no_exec = false;
};

/// The ABI path of the CTX root inside every sandbox: model aliases point
/// below it (`main -> /ctx/model/debug/echo`).
inline constexpr std::string_view kAbiRoot = "/ctx";

/// The files of a tool's and a model's `.d/` that the view shows; every
/// other file there (policy, log, env with a model's credentials) is
/// absent.
inline constexpr std::string_view kToolMetaFiles[] = {"name", "description", "schema", "cap", "status"};
inline constexpr std::string_view kModelMetaFiles[] = {"id", "driver", "cap", "default", "status"};

/// Decides the entry `rel` (never "") whose parent directory the view
/// shows: nullopt hides it (ENOENT), else what to serve. No symbolic link
/// is ever shown; a model alias is shown as the model it names when that
/// model is. The rules:
///   <root>: status, bin, tool, model, agent, home, shared;
///   bin/...: files and directories;
///   tool tiers (tool, home/<owner>/tool, shared/<p>/tool): executables
///     the agent may run (its policy, the tool's own .d/policy when
///     present, the execute bit for its ids) and their .d/ with
///     kToolMetaFiles;
///   model tiers (model, home/<owner>/model): models with
///     `model:<name> use`, their .d/ with kModelMetaFiles, provider
///     directories that hold one, aliases to a shown model; files there
///     are never executable from the view (no_exec);
///   agent/: the agent and its .d/, agents whose parent file names it and
///     agents with `agent:<x> read`, with their .d/;
///   home/<owner>/{agent/<agent>/..., tool, model}: its own home whole,
///     but in its session/ only the current session, index and the
///     sessions with `session:<x> read` (docs/abi-policy.md, "session");
///   shared/<p>/... with `shared:<p> read`, its tool/ a tool tier;
///   anything else is absent.
std::optional<Shown> decide(const Viewer& v, const HostTree& t, const std::string& rel);

/// The names decide() shows in the directory rel ("" the root), sorted.
std::vector<std::string> list(const Viewer& v, const HostTree& t, const std::string& rel);

/// Which layer refuses a tool, in the order of the ABI's permission check
/// (docs/abi.md "Tools as files"): the agent's policy, the execute bit for the
/// viewer's ids, the tool's own .d/policy (when present; one that cannot be
/// read or parsed refuses).
enum class ToolVerdict { allowed, not_a_tool, agent_policy, mode, tool_policy };

/// The verdict on the tool `name`, the entry e in the tier directory
/// `tier` (rel). not_a_tool: e is not a regular file or name is invalid.
/// refused_type: on tool_policy, the type the tool's policy does not admit
/// (the viewer's, or an ancestor's; "" when the policy cannot be read).
ToolVerdict tool_verdict(const Viewer& v, const HostTree& t, const std::string& tier, const std::string& name,
                         const HostEntry& e, std::string* refused_type = nullptr);

/// The first of the viewer's type and its ancestors' types (in that
/// order) that `own`, an object's own policy, does not allow `perm` on
/// the object; nullopt when it admits them all. "" (no label, an unknown
/// ancestor) is never admitted.
std::optional<std::string> own_policy_refuses(const Viewer& v, const policy::Policy& own, policy::Class c,
                                              std::string_view object, std::string_view perm);

/// What an own policy that refused `refused` (own_policy_refuses) lacks,
/// for a message after "has no ": the missing rule, and when the type is
/// an ancestor's, that it is one (a child never gets what its ancestors
/// may not have).
std::string own_policy_gap(const Viewer& v, const std::string& refused, policy::Class c, std::string_view object,
                           std::string_view perm);

/// Which layer refuses a `ctx model` call (issue 12; docs/abi.md "Tools as
/// files": the agent's policy, the mode, then the object's own policy).
enum class ModelVerdict { allowed, not_found, agent_policy, mode, model_policy };

/// A `ctx model NAME` call decided: NAME is looked up in the user tier
/// (home/<owner>/model) first, then the system tier (model/), so that a
/// user's alias (`main`) takes the place of the system's; an alias is the
/// model it names, checked as that model. Layers: the agent's
/// `model:<name> use`, the execute bit for the viewer's ids, the model's
/// own .d/policy when present (one that cannot be read or parsed refuses).
struct ModelCall {
  ModelVerdict verdict = ModelVerdict::not_found;
  std::string name;   ///< provider/model, after an alias
  std::string rel;    ///< the model file below the CTX root ("" not found)
  std::string alias;  ///< the alias followed, below the CTX root ("" none)
  /// model_policy: the type the model's own policy does not admit ("" when
  /// it cannot be read).
  std::string refused_type;
};
ModelCall model_call(const Viewer& v, const HostTree& t, const std::string& name);

/// Whether the agent may execute the tool: tool_verdict() is allowed.
/// Exposed for `ctx explain`.
bool tool_allowed(const Viewer& v, const HostTree& t, const std::string& tier, const std::string& name,
                  const HostEntry& e);

/// Whether the view shows rel ("" the root) and every directory on its
/// way, and the viewer's ids may search each of those directories (the
/// view's server reads as the owner; a reader with more rights than the
/// runtime, such as a root supervisor, asks this too).
bool reachable(const Viewer& v, const HostTree& t, const std::string& rel);

/// The tool's name when rel is an entry directly in a tool tier (tool/,
/// home/<owner>/tool/, shared/<p>/tool/), else "".
std::string tool_at(const Viewer& v, const std::string& rel);

/// A directory below which the view shows everything the host has (the
/// agent's own home, a shared space outside its tool tier), or which the
/// launch plan governs itself (shared/: its spaces are masked or bound
/// read-only by policy): a bind of it stays a bind. rel below the CTX root.
bool plain(const Viewer& v, const std::string& rel);

/// The agent's own home and its session/ directory: plain(), but the
/// view hides some of what they hold (the other sessions), so a view made
/// of binds builds them name by name rather than binding them whole.
bool holds_sessions(const Viewer& v, const std::string& rel);

/// The tool tiers a bind of the plain directory rel reaches, as
/// CTX-root-relative paths: a shared space's tool/, or under shared/ the
/// tool/ of each space named in `spaces`. Pure: the caller lists spaces.
std::vector<std::string> tool_tiers_under(const std::string& rel, const std::vector<std::string>& spaces);

}  // namespace ctx::access
