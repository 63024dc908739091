// The mount class of policy v0 (docs/abi-policy.md, "What each class
// gates"): every line of an agent's mount table needs a rule naming its
// target, the path inside the sandbox: `allow <type> mount:<target> read`
// for a ro line, and `write` as well for a rw line. Pure.
#pragma once

#include <string_view>
#include <vector>

#include "base/result.hpp"
#include "mountspec/table.hpp"
#include "policy/policy.hpp"

namespace ctx::agentdir {

/// The permissions a table line needs, in order: {"read"} for ro,
/// {"read", "write"} for rw.
std::vector<std::string_view> mount_permissions(const mountspec::Entry& e);

/// The rules a table needs for `subject`, one per line and permission, in
/// table order (the rules a child's policy is given at create).
std::vector<policy::Rule> mount_rules(const mountspec::Table& table, std::string_view subject);

/// Every table line the policy does not allow, one EACCES each with reason
/// "mount_policy", located at the line of `<agent>.d/mount` and naming the
/// rule to add: "coder.d/mount:4: EACCES: rw mount /srv/p -> /work needs
/// 'allow coder_t mount:/work write' in coder.d/policy; add the rule or
/// remove the line". An agent without a label (empty subject) holds no
/// rule, so every line is refused.
std::vector<Error> mount_policy_errors(std::string_view agent, const mountspec::Table& table,
                                       const policy::Policy& policy, std::string_view subject);

/// The first of mount_policy_errors, or nothing.
Result<void> check_mount_policy(std::string_view agent, const mountspec::Table& table, const policy::Policy& policy,
                                std::string_view subject);

}  // namespace ctx::agentdir
