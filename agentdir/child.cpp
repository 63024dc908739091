// Planning an owned child (docs/abi.md "Children" and "Attenuation
// (children)"): the parent's request checked against the parent and turned
// into the child's control files. Pure.
#include "agentdir/child.hpp"

#include <algorithm>
#include <cstdio>
#include <set>

#include "agentdir/mount_rules.hpp"
#include <nlohmann/json.hpp>

#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"
#include "mountspec/table.hpp"
#include "policy/policy.hpp"

namespace ctx::agentdir {

namespace {

/// "<child>: [<where>: ]<ERRNO>: <what>", with the machine-readable reason.
Error refusal(std::string_view child, std::string_view where, int code, std::string_view reason,
              const std::string& what) {
  std::string msg(child);
  msg += ": ";
  if (!where.empty()) {
    msg += where;
    msg += ": ";
  }
  return Error{code, msg + errno_name(code) + ": " + what, std::string(reason)};
}

Error invalid(std::string_view child, std::string_view where, const std::string& what) {
  return refusal(child, where, EINVAL, "invalid_request", what);
}

std::string label_text(const Label& l) {
  return l.user.empty() ? l.type : l.user + ":" + l.role + ":" + l.type + ":" + l.level;
}

std::string one_per_line(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += i + "\n";
  return out;
}

std::string list_of(const std::vector<std::uint32_t>& ids) {
  std::string out;
  for (auto id : ids) out += (out.empty() ? "" : ", ") + std::to_string(id);
  return out;
}

std::string permission_list(policy::Class c) {
  std::string out;
  for (auto p : policy::permissions_of(c)) {
    if (!out.empty()) out += ' ';
    out += p;
  }
  return out;
}

/// The child's label as written in its `label` file, and its type, from
/// the request (checked exactly as the loader reads the file) or else the
/// parent's label.
struct ChildLabel {
  std::optional<std::string> text;
  std::string type;
};

Result<ChildLabel> child_label(const AgentSpec& parent, const ChildRequest& req, const PrimaryGidLookup& primary_gid) {
  if (!req.label) {
    if (!parent.label) return ChildLabel{};
    return ChildLabel{label_text(*parent.label), parent.label->type};
  }
  const std::string& l = *req.label;
  for (char c : l)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return fail(invalid(req.name, "label '" + printable(l) + "'", "contains a control character"));
  // The loader's own reading of a label file, so that what is accepted
  // here is exactly what loads.
  ControlFiles probe{{"owner", "0\n"}, {"gid", "0\n"}, {"label", l + "\n"}};
  auto s = build_spec(req.name, parent.ctx_root, probe, primary_gid);
  if (!s) {
    const std::string& m = s.error().msg;
    auto at = m.find(": EINVAL: ");
    return fail(invalid(req.name, "label '" + l + "'", at == std::string::npos ? m : m.substr(at + 10)));
  }
  return ChildLabel{l, s->label->type};
}

/// The rules the request asks for, with the child's type as subject, in
/// the order tools, model, shared, agents, network. Names and permissions
/// are checked here so that a message can cite the request's own field.
Result<std::vector<policy::Rule>> requested_rules(const ChildRequest& req, const std::string& subject) {
  using policy::Class;
  const std::string& child = req.name;
  std::vector<policy::Rule> rules;
  auto add = [&](Class c, const std::string& object, const std::string& permission) {
    rules.push_back(policy::Rule{subject, c, object, permission, 0});
  };
  std::set<std::string, std::less<>> seen;
  for (std::size_t i = 0; i < req.tools.size(); ++i) {
    const std::string& t = req.tools[i];
    std::string where = "tools[" + std::to_string(i) + "] " + printable(t);
    if (auto e = tool_name_issue(t)) return fail(invalid(child, where, *e));
    if (!seen.insert(t).second) return fail(invalid(child, where, "requested twice"));
    add(Class::tool, t, "execute");
  }
  seen.clear();
  for (std::size_t i = 0; i < req.models.size(); ++i) {
    const std::string& m = req.models[i];
    std::string where = "model[" + std::to_string(i) + "] " + printable(m);
    if (auto e = model_name_issue(m)) return fail(invalid(child, where, *e));
    if (!seen.insert(m).second) return fail(invalid(child, where, "requested twice"));
    add(Class::model, m, "use");
  }
  // shared and agents: an object with the permissions asked for it.
  auto grants = [&](Class c, std::string_view field, const auto& list,
                    std::optional<std::string> (*name_issue)(std::string_view)) -> Result<void> {
    std::set<std::string, std::less<>> objects;
    for (const auto& [object, permissions] : list) {
      std::string where = std::string(field) + " " + printable(object);
      if (auto e = name_issue(object)) return fail(invalid(child, where, *e));
      if (!objects.insert(object).second) return fail(invalid(child, where, "requested twice"));
      std::string cls(to_string(c));
      if (permissions.empty())
        return fail(invalid(child, where, "no permission requested (" + cls + " permits: " + permission_list(c) + ")"));
      std::set<std::string, std::less<>> perms;
      for (const std::string& p : permissions) {
        const auto& known = policy::permissions_of(c);
        if (std::find(known.begin(), known.end(), p) == known.end())
          return fail(
              invalid(child, where,
                      "unknown permission '" + printable(p) + "' (" + cls + " permits: " + permission_list(c) + ")"));
        if (!perms.insert(p).second) return fail(invalid(child, where, "permission " + p + " requested twice"));
        add(c, object, p);
      }
    }
    return {};
  };
  CTX_TRY(grants(Class::shared, "shared", req.shared, space_name_issue));
  CTX_TRY(grants(Class::agent, "agents", req.agents, agent_name_issue));
  if (req.network) add(Class::network, "default", "connect");
  return rules;
}

/// groups_not_subset for the first of `groups` the parent lacks.
Result<void> groups_within(const AgentSpec& parent, std::string_view child, std::string_view where,
                           const std::vector<std::uint32_t>& groups) {
  for (auto g : groups)
    if (std::find(parent.groups.begin(), parent.groups.end(), g) == parent.groups.end())
      return fail(refusal(child, where, EACCES, "groups_not_subset",
                          "group " + std::to_string(g) + " is not one of the parent's groups (" +
                              (parent.groups.empty() ? std::string("it has none") : list_of(parent.groups)) + ")"));
  return {};
}

Result<std::vector<std::uint32_t>> child_groups(const AgentSpec& parent, const ChildRequest& req) {
  std::vector<std::uint32_t> groups = req.groups.value_or(parent.groups);
  std::set<std::uint32_t> seen;
  for (auto g : groups)
    if (!seen.insert(g).second)
      return fail(invalid(req.name, "groups", "group " + std::to_string(g) + " requested twice"));
  CTX_TRY(groups_within(parent, req.name, "groups", groups));
  return groups;
}

std::string child_root(const AgentSpec& parent, std::string_view child) {
  return path_join(parent.ctx_root, "home/" + std::to_string(parent.owner) + "/agent/" + std::string(child) + "/root");
}

Result<std::string> child_cwd(const AgentSpec& parent, const ChildRequest& req, const mountspec::Table& mounts) {
  auto shown = [&](std::string_view p) {
    return std::any_of(mounts.begin(), mounts.end(), [&](const auto& e) { return path_is_at_or_under(p, e.target); });
  };
  if (!req.cwd) return shown(parent.cwd) ? parent.cwd : std::string("/");
  const std::string& c = *req.cwd;
  std::string where = "cwd " + printable(c);
  if (auto issue = abs_path_issue(c)) return fail(invalid(req.name, where, issue->what));
  if (c != "/" && !shown(c)) {
    std::string targets;
    for (const auto& e : mounts) targets += (targets.empty() ? "" : ", ") + e.target;
    return fail(invalid(req.name, where,
                        mounts.empty() ? "the child has no mounts, so its only directory is /"
                                       : "outside every mount of the child (" + targets +
                                             "); choose a directory at or below one of them, or /"));
  }
  return c;
}

// A child's policy within its parent's: every rule but its own mount
// rules the parent holds (check_subset). A mount rule of the child's type
// can only allow a line of the child's table, and the caller checks that
// every line is derived from a parent line (check_derived) which the
// parent's policy allowed; one naming no line allows nothing.
Result<void> within_parent_policy(const AgentSpec& parent, const AgentSpec& child, const std::string& file) {
  std::vector<policy::Rule> others;
  for (const auto& r : child.policy.rules())
    if (r.cls != policy::Class::mount || r.subject != child.subject() || child.subject().empty()) others.push_back(r);
  auto rest = policy::Policy::from_rules(std::move(others));
  if (!rest) return fail(rest.error().with_context(child.name + ": " + file));
  if (auto r = policy::check_subset(parent.policy, parent.subject(), *rest, child.subject()); !r)
    return fail(r.error().with_context(child.name + ": " + file));
  return {};
}

// The request's input references: strict absolute paths (no "..", no
// control byte), each in a requested mount's source (so the parent sees
// it), named as the child sees it through that mount (the deepest).
Result<std::string> child_inputs(const ChildRequest& req) {
  if (req.inputs.size() > kMaxInputs)
    return fail(invalid(req.name, "inputs", "more than " + std::to_string(kMaxInputs) + " entries"));
  std::string out;
  for (std::size_t i = 0; i < req.inputs.size(); ++i) {
    const std::string& p = req.inputs[i];
    std::string where = "inputs[" + std::to_string(i) + "] " + printable(p);
    if (auto issue = abs_path_issue(p))
      return fail(invalid(req.name, where, issue->what + "; give a strict absolute path as the parent sees it"));
    const mountspec::ChildMount* best = nullptr;
    for (const auto& m : req.mounts)
      if (path_is_at_or_under(p, m.source) && (best == nullptr || m.source.size() > best->source.size())) best = &m;
    if (best == nullptr)
      return fail(refusal(req.name, where, EACCES, "input_not_visible",
                          "is in no mount of the child's request; add a mount that shows it, or leave it out"));
    std::string inner = path_join(best->target, path_suffix(p, best->source));
    out += nlohmann::json{{"path", inner}, {"parent_path", p}}.dump(-1, ' ', true) + "\n";
  }
  return out;
}

}  // namespace

Result<ChildPlan> plan_child(const AgentSpec& parent, const ChildRequest& req, const ChildOrigin& origin,
                             const PrimaryGidLookup& primary_gid) {
  if (auto e = agent_name_issue(req.name))
    return fail(Error{EACCES, "child name '" + printable(req.name) + "': EACCES: " + *e, "invalid_name"});
  if (parent.tier_user)
    return fail(Error{ENOTSUP,
                      parent.name + ": ENOTSUP: a user agent cannot create owned children (v0: docs/abi.md \"User "
                                    "agents\"); make the parent a system agent",
                      "not_supported"});
  const std::string& name = req.name;
  const std::string parent_type = parent.subject();
  if (!parent.policy.allows(parent_type, policy::Class::agent, name, "create")) {
    std::string what =
        parent_type.empty()
            ? "the parent (" + parent.name + ") has no label, so it holds nothing, not even agent:" + name +
                  " create; give it a label and the rule 'allow <its type> agent:" + name + " create'"
            : "the parent's policy lacks " + policy::missing_rule(parent_type, policy::Class::agent, name, "create");
    return fail(refusal(name, "", EACCES, "agent_policy", what));
  }

  CTX_TRY_ASSIGN(ChildLabel label, child_label(parent, req, primary_gid));
  CTX_TRY_ASSIGN(std::vector<policy::Rule> rules, requested_rules(req, label.type));
  auto child_policy = policy::Policy::from_rules(rules);
  if (!child_policy) return fail(Error{EINVAL, name + ": " + child_policy.error().msg, "invalid_request"});
  if (auto r = policy::check_subset(parent.policy, parent_type, *child_policy, label.type); !r)
    return fail(r.error().with_context(name));

  auto mounts = mountspec::attenuate(parent.mounts, req.mounts);
  if (!mounts) {
    Error e = mounts.error().with_context(name);
    if (e.code == EINVAL) e.reason = "invalid_request";
    return fail(std::move(e));
  }
  // The mount class: the child's policy gets the rules its own table
  // needs (read each target, write a rw one). They are within the parent
  // because the table is: attenuate derived every line from a parent
  // line, which the parent's policy allows (docs/abi-policy.md).
  if (!label.type.empty())
    for (auto& r : mount_rules(*mounts, label.type)) rules.push_back(std::move(r));
  CTX_TRY_ASSIGN(std::vector<std::uint32_t> groups, child_groups(parent, req));
  CTX_TRY_ASSIGN(std::string cwd, child_cwd(parent, req, *mounts));
  CTX_TRY_ASSIGN(std::string inputs, child_inputs(req));

  // Empty lists are left out (an absent list file loads as an empty one),
  // except `path`, whose absence would mean the default CTX_PATH.
  ControlFiles f;
  f["owner"] = std::to_string(parent.owner) + "\n";
  f["uid"] = std::to_string(parent.uid) + "\n";
  f["gid"] = std::to_string(parent.gid) + "\n";
  if (!groups.empty()) {
    std::string g;
    for (auto id : groups) g += std::to_string(id) + "\n";
    f["groups"] = g;
  }
  if (label.text) f["label"] = *label.text + "\n";
  f["iso"] = std::string(to_string(parent.iso)) + "\n";
  std::string lineage = "agent:" + parent.name;
  if (!origin.session.empty()) lineage += " session:" + origin.session;
  if (!origin.run.empty()) lineage += " run:" + origin.run;
  f["parent"] = lineage + "\n";
  f["life"] = std::string(to_string(Life::owned)) + "\n";
  f["root"] = child_root(parent, name) + "\n";
  f["cwd"] = cwd + "\n";
  if (parent.path_set) f["path"] = one_per_line(parent.path);
  if (!mounts->empty()) f["mount"] = mountspec::format_table(*mounts);
  if (!req.models.empty()) f["model"] = one_per_line(req.models);
  if (!rules.empty()) {
    std::string p;
    for (const auto& r : rules) p += policy::format_rule(r) + "\n";
    f["policy"] = p;
  }

  auto spec = build_spec(name, parent.ctx_root, f, primary_gid);
  if (!spec) {
    Error e = spec.error();
    e.reason = "invalid_request";
    return fail(std::move(e));
  }
  return ChildPlan{std::move(f), std::move(*spec), std::move(inputs)};
}

Result<void> check_child(const AgentSpec& parent, const AgentSpec& child) {
  if (parent.tier_user || child.tier_user)
    return fail(
        Error{ENOTSUP, child.name + ": ENOTSUP: user agents have no owned children nor parents (v0)", "not_supported"});
  const std::string& name = child.name;
  const std::string dir = path_join(child.ctx_root, "agent/" + name + ".d");
  auto file = [&](std::string_view f) { return dir + "/" + std::string(f); };
  // A file that must say what the parent's says.
  auto same = [&](std::string_view f, const std::string& mine, const std::string& parents) -> Result<void> {
    if (mine == parents) return {};
    return fail(refusal(name, file(f), EACCES, "not_owned",
                        "is " + mine + " but the parent " + parent.name + "'s is " + parents +
                            "; a child keeps its parent's " + std::string(f) + ": remove " + name +
                            " and create it again from " + parent.name));
  };
  if (!child.parent || child.parent->agent != parent.name)
    return fail(refusal(name, file("parent"), EACCES, "not_owned",
                        (child.parent ? "names agent:" + child.parent->agent : std::string("is missing")) +
                            ", not agent:" + parent.name + ", so " + name + " is not a child of " + parent.name + "; " +
                            parent.name + " may start only the children it created"));
  CTX_TRY(same("owner", std::to_string(child.owner), std::to_string(parent.owner)));
  CTX_TRY(same("uid", std::to_string(child.uid), std::to_string(parent.uid)));
  CTX_TRY(same("gid", std::to_string(child.gid), std::to_string(parent.gid)));
  CTX_TRY(same("iso", std::string(to_string(child.iso)), std::string(to_string(parent.iso))));
  // No check of `life`: the loader refuses any value but owned, the only
  // one the enum holds, so a comparison here could never fail.
  if (std::string want = child_root(parent, name); child.root != want)
    return fail(refusal(name, file("root"), EACCES, "not_owned",
                        "is " + child.root + ", not " + want +
                            "; a child's root is its own directory in its owner's home: "
                            "remove " +
                            name + " and create it again from " + parent.name));
  CTX_TRY(groups_within(parent, name, file("groups"), child.groups));
  CTX_TRY(within_parent_policy(parent, child, file("policy")));
  for (const auto& e : child.mounts)
    if (auto r = mountspec::check_derived(parent.mounts, e); !r)
      return fail(refusal(name, file("mount") + ":" + std::to_string(e.line) + ": " + e.source + " -> " + e.target,
                          EACCES, r.error().reason,
                          r.error().msg + "; remove the line or create the child again from " + parent.name));
  return {};
}

std::string child_context_dir(const AgentSpec& parent, std::string_view session, std::string_view child) {
  return path_join(parent.ctx_root,
                   "home/" + session_rel(parent.owner, parent.name, session) + "/context/child/" + std::string(child));
}

std::vector<std::string> ancestor_types(const AgentSpec& spec,
                                        const std::function<Result<AgentSpec>(const std::string&)>& load) {
  std::vector<std::string> out;
  std::optional<Parent> next = spec.parent;
  for (int depth = 0; next; ++depth) {
    if (depth == kMaxAncestry) {
      out.emplace_back();
      break;
    }
    auto p = load(next->agent);
    if (!p) {
      out.emplace_back();
      break;
    }
    out.push_back(p->subject());
    next = p->parent;
  }
  return out;
}

}  // namespace ctx::agentdir
