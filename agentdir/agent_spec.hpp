// An agent's control files (`<ctx>/agent/<name>.d/*`, docs/abi.md "The control
// files of `<ctx>/agent/<name>.d/`") as one plain value. Every decision of a
// launch is made from this struct; meta.json is validated but never stored
// here, so no decision can depend on it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cgroup/limits.hpp"
#include "mountspec/table.hpp"
#include "policy/policy.hpp"

namespace ctx::agentdir {

/// Isolation profile (DESIGN.md section 3).
enum class Iso { shared, uid, userns };

/// Lifecycle ownership. `detached` is reserved by the spec and refused.
enum class Life { owned };

std::string_view to_string(Iso i);
std::string_view to_string(Life l);

/// A label: a bare type ("reviewer_t") or user:role:type:level.
struct Label {
  std::string user;   ///< empty for a bare type
  std::string role;   ///< empty for a bare type
  std::string type;   ///< the policy subject
  std::string level;  ///< empty for a bare type; may itself contain ':'
  bool operator==(const Label&) const = default;
};

/// `parent`: agent:<name> [session:<s>] [run:<r>]
struct Parent {
  std::string agent;
  std::string session;  ///< empty when absent
  std::string run;      ///< empty when absent
  bool operator==(const Parent&) const = default;
};

/// Who decided the agent's identity files: for each of uid, gid and
/// groups, whether the file is absent (the default applies, which is the
/// owner's own) or owned by root. A root launch trusts those; ids from a
/// file the owner wrote must be ones the owner is entitled to
/// (entitlement.hpp). build_spec cannot know and says false; load() sets
/// them from the files' owners, and an owned child's launch clears those
/// its ancestors' files do not also have.
struct IdentitySource {
  bool uid_by_root = false;
  bool gid_by_root = false;
  bool groups_by_root = false;
  bool operator==(const IdentitySource&) const = default;
};

/// Everything a launch needs from `<name>.d/`, defaults applied.
struct AgentSpec {
  std::string name;
  std::string ctx_root;  ///< the CTX root the agent was read from, e.g. "/ctx"
  /// The tier it was read from (docs/abi.md "User agents"): none for a
  /// system agent (`<ctx>/agent/<name>.d`), the uid U for a user agent
  /// (`<ctx>/home/<U>/agent/<name>.d`), whose owner is U.
  std::optional<std::uint32_t> tier_user;

  std::uint32_t owner = 0;
  std::uint32_t uid = 0;  ///< defaults to owner
  std::uint32_t gid = 0;  ///< defaults to the owner's primary group
  std::vector<std::uint32_t> groups;
  std::optional<Label> label;  ///< none: default deny for everything
  Iso iso = Iso::userns;
  std::optional<Parent> parent;
  Life life = Life::owned;
  std::string root;                                      ///< defaults to <ctx>/home/<owner>/agent/<name>/root
  std::string cwd;                                       ///< defaults to "/"
  std::vector<std::pair<std::string, std::string>> env;  ///< file order
  std::vector<std::string> path;                         ///< CTX_PATH dirs
  bool path_set = false;                                 ///< false: the default CTX_PATH applies
  mountspec::Table mounts;
  std::vector<std::string> models;
  policy::Policy policy;
  std::optional<cgroup::Limits> limits;  ///< the `limits` file (cgroup/limits.hpp)
  IdentitySource id_source;
  /// An owned child's ancestors' label types, parent first (filled by a
  /// launch, `ctx explain` and `ctx view` from the parent chain; never
  /// read from `<name>.d/`). "" stands for an ancestor without a label or
  /// one that cannot be read: it admits nothing. A tool's or model's own
  /// policy must admit every one of them as well as the agent's own type
  /// (docs/abi.md "Attenuation (children)"; agentdir::ancestor_types).
  std::vector<std::string> ancestor_types;

  /// The label's type, or "" with no label.
  std::string subject() const { return label ? label->type : std::string(); }

  bool operator==(const AgentSpec&) const = default;
};

}  // namespace ctx::agentdir
