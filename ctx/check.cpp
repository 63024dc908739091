#include "ctx/check.hpp"

#include <sys/stat.h>

#include <set>

#include "agentdir/load.hpp"
#include "sys/file.hpp"

namespace ctx::helper {

std::vector<Finding> check_agent(const std::string& ctx_root, const std::string& name) {
  std::vector<Finding> out;
  auto error = [&](const Error& e) { out.push_back({Finding::Level::error, e.msg}); };
  auto warn = [&](const std::string& s) { out.push_back({Finding::Level::warning, s}); };
  std::vector<Error> errors;
  auto listing = agentdir::read_control_files(ctx_root, name, &errors);
  for (const auto& e : errors) error(e);
  if (!listing) return out;
  for (const auto& u : listing->unknown)
    warn(name + ".d/" + u + ": not a control file of the ABI; it is ignored (remove or rename it)");
  errors.clear();
  auto spec = agentdir::build_spec(name, ctx_root, listing->files, agentdir::passwd_primary_gid(), &errors);
  for (const auto& e : errors) error(e);
  if (!spec) return out;
  const std::string subject = spec->subject();
  std::set<std::string> seen;
  for (const auto& r : spec->policy.rules()) {
    std::string where = name + ".d/policy:" + std::to_string(r.line) + ": ";
    if (!seen.insert(policy::format_rule(r)).second) warn(where + "duplicate rule");
    if (subject.empty()) {
      warn(where + "inert: the agent has no label, so no rule applies to it");
    } else if (r.subject != subject) {
      warn(where + "inert: names subject " + r.subject + ", but the agent's label type is " + subject);
    }
  }
  return out;
}

std::vector<std::string> agent_names(const std::string& ctx_root) {
  std::vector<std::string> out;
  auto d = sys::open_dir(ctx_root + "/agent");
  if (!d) return out;
  auto names = sys::list_dir(d->get());
  if (!names) return out;
  for (const auto& n : *names) {
    if (n.size() <= 2 || n.substr(n.size() - 2) != ".d") continue;
    auto st = sys::stat_at(d->get(), n);
    if (st && *st && S_ISDIR((*st)->mode)) out.push_back(n.substr(0, n.size() - 2));
  }
  return out;
}

}  // namespace ctx::helper
