// Policy v0 (docs/abi.md "Policy v0", docs/abi-policy.md): a type-enforcement
// allowlist. Default deny, no deny rules, no globs, no priority, no
// inheritance, no variables, no path matching. Pure.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "base/result.hpp"

namespace ctx::policy {

/// The fixed object classes of v1.
enum class Class { tool, model, shared, session, mount, agent, network };

/// The class as written in a rule ("tool"); "?" for a value outside the enum.
std::string_view to_string(Class c);
/// nullopt for a class that is not in the fixed table.
std::optional<Class> class_from(std::string_view s);
/// The permissions a class admits, in the spec's order.
const std::vector<std::string_view>& permissions_of(Class c);

/// One `allow <subject> <class>:<object> <permission>` line.
struct Rule {
  std::string subject;
  Class cls = Class::tool;
  std::string object;
  std::string permission;
  int line = 0;  ///< 1-based line in the policy file; 0 if made in code

  bool operator==(const Rule&) const = default;
};

/// The rule as one policy line without its '\n' and line number:
/// "allow coder_t tool:fs.read execute". For every rule parse or from_rules
/// accepts, parsing this line gives the same rule back.
std::string format_rule(const Rule& r);

/// The rule that would grant something, quoted for a message:
/// "'allow coder_t tool:fs.read execute'" ("<no label>" for an empty
/// subject). One wording for every "lacks"/"has no" sentence.
std::string missing_rule(std::string_view subject, Class cls, std::string_view object, std::string_view permission);

/// A parsed policy: the rules in file order and a hash index for
/// constant-time checks.
class Policy {
 public:
  Policy() = default;

  /// Parses a policy file. `file` names it in messages. On failure returns
  /// the first error; `all` collects every error. Unknown class or
  /// permission is EINVAL.
  static Result<Policy> parse(std::string_view file, std::string_view content, std::vector<Error>* all = nullptr);
  /// Builds a policy from rules already validated (for derived policies).
  /// Each rule is checked again exactly as a policy line would be; the
  /// first invalid one is EINVAL naming it ("rule 2: allow ...", or
  /// "policy line 5: allow ..." when it carries a line).
  static Result<Policy> from_rules(std::vector<Rule> rules);

  /// True if exactly this rule is present. Constant time (one hash lookup).
  bool allows(std::string_view subject, Class cls, std::string_view object, std::string_view permission) const;
  /// The rule that allows the request, if any.
  std::optional<Rule> find(std::string_view subject, Class cls, std::string_view object,
                           std::string_view permission) const;
  /// The rules in file order. Duplicate rules are kept, each with its own
  /// line, so that `ctx check` can warn about them; find() and explain()
  /// cite the first.
  const std::vector<Rule>& rules() const { return rules_; }

  /// Same rules, in the same order, with the same lines.
  bool operator==(const Policy& o) const { return rules_ == o.rules_; }

 private:
  std::vector<Rule> rules_;
  std::unordered_set<std::string> index_;
};

/// Decides whether a child's policy lies within its parent's effective
/// policy: every child rule must name the child's subject type and the
/// parent must hold the same class:object permission for its own type.
/// Fails with EACCES, reason "exceeds_parent_policy", naming the first
/// offending child rule and its line; a rule for another subject is
/// EINVAL, reason "wrong_subject". A child without a label (empty
/// child_type) may hold no rule at all (wrong_subject); a parent without a
/// label holds nothing. Rules are checked in order; the first fault wins.
Result<void> check_subset(const Policy& parent, std::string_view parent_type, const Policy& child,
                          std::string_view child_type);

/// A request as written on a command line: "tool:fs.read" + "execute".
struct Request {
  Class cls = Class::tool;
  std::string object;
  std::string permission;
};

/// Parses "CLASS:OBJECT" and "PERMISSION" with the same rules as a policy
/// line (EINVAL naming the problem).
Result<Request> parse_request(std::string_view class_object, std::string_view permission);

/// Why a request is allowed or denied.
struct Explanation {
  bool allowed = false;
  std::optional<Rule> rule;  ///< the allowing rule
  std::string text;          ///< one sentence for people
};

/// Explains a decision: the allowing rule with its line, or that no rule
/// allows it (with the exact line that would). The text cites "policy line
/// N" (the caller knows the file); an empty subject (no label) is denied.
Explanation explain(const Policy& p, std::string_view subject, const Request& r);

/// Where a class's permission takes effect, one sentence for people: the
/// launcher at plan time, the supervisor, the agent view; or "no
/// enforcement point in v0: <why>". Empty for a permission the class does
/// not have. One table (policy/enforcement.cpp), documented in
/// docs/abi-policy.md, "What each class gates".
std::string_view enforcement_note(Class c, std::string_view perm);

}  // namespace ctx::policy
