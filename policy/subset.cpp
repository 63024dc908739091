// Attenuation of policy v0: a child holds nothing its parent lacks.
#include <string>

#include "policy/policy.hpp"

namespace ctx::policy {

Result<void> check_subset(const Policy& parent, std::string_view parent_type, const Policy& child,
                          std::string_view child_type) {
  const auto& rules = child.rules();
  for (std::size_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    // Rules made in code have no line; their position names them.
    std::string where =
        r.line > 0 ? "child policy line " + std::to_string(r.line) : "child policy rule " + std::to_string(i + 1);
    where += ": " + format_rule(r);
    if (child_type.empty())
      return fail(Error{EINVAL,
                        where + ": EINVAL: the child has no label, so no rule can apply to it; give it a "
                                "label or an empty policy",
                        "wrong_subject"});
    if (r.subject != child_type)
      return fail(
          Error{EINVAL,
                where + ": EINVAL: names subject " + r.subject + ", but the child's type is " + std::string(child_type),
                "wrong_subject"});
    if (!parent.allows(parent_type, r.cls, r.object, r.permission)) {
      std::string held = std::string(to_string(r.cls)) + ":" + r.object + " " + r.permission;
      std::string why = parent_type.empty() ? "the parent has no label, so it holds nothing (not " + held + ")"
                                            : "the parent (" + std::string(parent_type) + ") does not hold " + held;
      return fail(Error{EACCES, where + ": EACCES: " + why, "exceeds_parent_policy"});
    }
  }
  return {};
}

}  // namespace ctx::policy
