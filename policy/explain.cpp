// One sentence for people on why policy v0 allows or denies a request.
#include <string>

#include "policy/policy.hpp"

namespace ctx::policy {

Explanation explain(const Policy& p, std::string_view subject, const Request& r) {
  Explanation e;
  if (subject.empty()) {
    e.text = "denied: the agent has no label, so policy v0 denies everything";
    return e;
  }
  Rule wanted{std::string(subject), r.cls, r.object, r.permission, 0};
  if (auto rule = p.find(subject, r.cls, r.object, r.permission)) {
    e.allowed = true;
    // The caller knows the file; the line is what we know.
    e.text = rule->line > 0 ? "allowed by policy line " + std::to_string(rule->line) + ": " + format_rule(*rule)
                            : "allowed by the rule '" + format_rule(*rule) + "'";
    e.rule = std::move(rule);
    return e;
  }
  e.text = "denied: no rule '" + format_rule(wanted) + "' (policy v0 is default deny)";
  return e;
}

}  // namespace ctx::policy
