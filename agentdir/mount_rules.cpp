#include "agentdir/mount_rules.hpp"

#include <string>

#include "base/text.hpp"

namespace ctx::agentdir {

std::vector<std::string_view> mount_permissions(const mountspec::Entry& e) {
  if (e.attrs.rdonly) return {"read"};
  return {"read", "write"};
}

std::vector<policy::Rule> mount_rules(const mountspec::Table& table, std::string_view subject) {
  std::vector<policy::Rule> out;
  for (const auto& e : table)
    for (auto perm : mount_permissions(e))
      out.push_back({std::string(subject), policy::Class::mount, e.target, std::string(perm), 0});
  return out;
}

std::vector<Error> mount_policy_errors(std::string_view agent, const mountspec::Table& table,
                                       const policy::Policy& policy, std::string_view subject) {
  std::vector<Error> out;
  const std::string file = std::string(agent) + ".d/mount";
  for (const auto& e : table)
    for (auto perm : mount_permissions(e)) {
      if (!subject.empty() && policy.allows(subject, policy::Class::mount, e.target, perm)) continue;
      std::string what = std::string(e.attrs.rdonly ? "ro" : "rw") + " mount " + e.source + " -> " + e.target;
      std::string text =
          subject.empty() ? what +
                                ": the agent has no label, so its policy allows no mount; give it a label and the rule "
                                "'allow <its type> mount:" +
                                e.target + " " + std::string(perm) + "'"
                          : what + " needs " + policy::missing_rule(subject, policy::Class::mount, e.target, perm) +
                                " in " + std::string(agent) + ".d/policy; add the rule or remove the line";
      Error err = located(file, e.line, 0, EACCES, text);
      err.reason = "mount_policy";
      out.push_back(std::move(err));
      break;  // one error per line: the first permission it lacks
    }
  return out;
}

Result<void> check_mount_policy(std::string_view agent, const mountspec::Table& table, const policy::Policy& policy,
                                std::string_view subject) {
  auto errors = mount_policy_errors(agent, table, policy, subject);
  if (!errors.empty()) return fail(std::move(errors.front()));
  return {};
}

}  // namespace ctx::agentdir
