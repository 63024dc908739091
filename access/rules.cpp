#include "access/rules.hpp"

#include <algorithm>

#include "agentdir/load.hpp"
#include "base/names.hpp"

namespace ctx::access {

namespace {

using Type = HostEntry::Type;

std::vector<std::string> split(const std::string& rel) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= rel.size()) {
    std::size_t slash = rel.find('/', start);
    out.push_back(rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return out;
}

std::string join(const std::vector<std::string>& c, std::size_t from, std::size_t to) {
  std::string s;
  for (std::size_t i = from; i < to; ++i) s += (i == from ? "" : "/") + c[i];
  return s;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "x.d" -> "x"; "" when the name is not a .d directory's.
std::string meta_of(std::string_view name) {
  return ends_with(name, ".d") && name.size() > 2 ? std::string(name.substr(0, name.size() - 2)) : std::string();
}

template <std::size_t N>
bool one_of(std::string_view name, const std::string_view (&set)[N]) {
  return std::find(std::begin(set), std::end(set), name) != std::end(set);
}

bool grants(const Viewer& v, policy::Class c, std::string_view object, std::string_view perm) {
  return !v.subject.empty() && v.policy.allows(v.subject, c, object, perm);
}

// The execute bit that applies to the viewer's ids (root: any).
bool executable_for(const Viewer& v, const HostEntry& e) {
  if (v.uid == 0) return (e.mode & 0111) != 0;
  if (e.uid == v.uid) return (e.mode & 0100) != 0;
  bool group = e.gid == v.gid || std::find(v.groups.begin(), v.groups.end(), e.gid) != v.groups.end();
  return (e.mode & (group ? 010 : 001)) != 0;
}

std::optional<Shown> as_is(const std::string& rel, const HostEntry& e) { return Shown{rel, e}; }

std::optional<Shown> if_type(const std::string& rel, const HostEntry& e, Type t) {
  return e.type == t ? as_is(rel, e) : std::nullopt;
}

std::optional<Shown> if_plain(const std::string& rel, const HostEntry& e) {
  return e.type == Type::directory || e.type == Type::regular ? as_is(rel, e) : std::nullopt;
}

bool model_allowed(const Viewer& v, const std::string& name) {
  return !model_name_issue(name) && grants(v, policy::Class::model, name, "use");
}

// A provider directory ("openai") is shown when it holds a model the
// agent may use; the policy names every one (no globs).
bool model_prefix_allowed(const Viewer& v, const std::string& prefix) {
  if (v.subject.empty()) return false;
  for (const auto& r : v.policy.rules())
    if (r.subject == v.subject && r.cls == policy::Class::model && r.permission == "use" &&
        r.object.size() > prefix.size() && r.object.compare(0, prefix.size(), prefix) == 0 &&
        r.object[prefix.size()] == '/')
      return true;
  return false;
}

// What an alias in a model tier names: its target must be an ABI path of
// a model tier (/ctx/model/<m> or /ctx/home/<owner>/model/<m>); the
// target's path below the CTX root and the model's name.
std::optional<std::pair<std::string, std::string>> alias_target(const Viewer& v, const HostTree& t,
                                                                const std::string& rel) {
  auto target = t.read_link(rel);
  if (!target || target->size() <= kAbiRoot.size() + 1 || target->compare(0, kAbiRoot.size(), kAbiRoot) != 0 ||
      (*target)[kAbiRoot.size()] != '/')
    return std::nullopt;
  std::string trel = target->substr(kAbiRoot.size() + 1);
  std::string user_tier = "home/" + std::to_string(v.owner) + "/model/";
  if (trel.compare(0, 6, "model/") == 0) return std::pair(trel, trel.substr(6));
  if (trel.compare(0, user_tier.size(), user_tier) == 0) return std::pair(trel, trel.substr(user_tier.size()));
  return std::nullopt;
}

// An alias in a model tier, shown as the model it names when that model
// is shown: a regular file the agent may use.
std::optional<Shown> alias(const Viewer& v, const HostTree& t, const std::string& rel) {
  auto to = alias_target(v, t, rel);
  if (!to || !model_allowed(v, to->second)) return std::nullopt;
  auto e = t.stat(to->first);
  return e && e->type == Type::regular ? Shown{to->first, *e} : std::optional<Shown>();
}

// A model tier's files are shown, never runnable from the view.
std::optional<Shown> not_runnable(std::optional<Shown> s) {
  if (s && s->entry.type == Type::regular) {
    s->entry.mode &= ~0111u;
    s->no_exec = true;
  }
  return s;
}

// An entry of a model tier; segs are the components below the tier.
std::optional<Shown> model_entry(const Viewer& v, const HostTree& t, const std::string& rel, const HostEntry& e,
                                 const std::vector<std::string>& c, std::size_t first) {
  const std::string& last = c.back();
  if (e.type == Type::symlink) return alias(v, t, rel);
  // Inside <m>.d/: only the listed files of an allowed model.
  if (c.size() - first >= 2) {
    std::string meta = meta_of(c[c.size() - 2]);
    if (!meta.empty()) {
      std::string model = join(c, first, c.size() - 2);
      model = model.empty() ? meta : model + "/" + meta;
      return model_allowed(v, model) && one_of(last, kModelMetaFiles) ? if_type(rel, e, Type::regular) : std::nullopt;
    }
  }
  std::string name = join(c, first, c.size());
  if (e.type == Type::regular) return model_allowed(v, name) ? as_is(rel, e) : std::nullopt;
  if (e.type != Type::directory) return std::nullopt;
  if (std::string meta = meta_of(last); !meta.empty())
    return model_allowed(v, name.substr(0, name.size() - 2)) ? as_is(rel, e) : std::nullopt;
  return model_prefix_allowed(v, name) ? as_is(rel, e) : std::nullopt;
}

// An entry of a tool tier at `tier`; c[first..] are the components below it.
std::optional<Shown> tool_entry(const Viewer& v, const HostTree& t, const std::string& tier, const std::string& rel,
                                const HostEntry& e, const std::vector<std::string>& c, std::size_t first) {
  auto shown_tool = [&](const std::string& name) {
    auto te = t.stat(tier + "/" + name);
    return te && te->type == Type::regular && tool_allowed(v, t, tier, name, *te);
  };
  std::size_t depth = c.size() - first;
  if (depth == 1) {
    if (e.type == Type::regular) return tool_allowed(v, t, tier, c.back(), e) ? as_is(rel, e) : std::nullopt;
    std::string tool = meta_of(c.back());
    return e.type == Type::directory && !tool.empty() && shown_tool(tool) ? as_is(rel, e) : std::nullopt;
  }
  if (depth == 2) {
    std::string tool = meta_of(c[first]);
    return !tool.empty() && one_of(c.back(), kToolMetaFiles) && shown_tool(tool) ? if_type(rel, e, Type::regular)
                                                                                 : std::nullopt;
  }
  return std::nullopt;
}

bool agent_visible(const Viewer& v, const HostTree& t, const std::string& a) {
  if (agent_name_issue(a)) return false;
  if ((a == v.agent && !v.user_tier) || grants(v, policy::Class::agent, a, "read")) return true;
  if (v.user_tier) return false;  // a system agent's parent is a system agent
  auto text = t.read("agent/" + a + ".d/parent");
  if (!text) return false;
  auto p = agentdir::parse_parent(a, *text);
  return p && p->agent == v.agent;
}

std::optional<Shown> agent_entry(const Viewer& v, const HostTree& t, const std::string& rel, const HostEntry& e,
                                 const std::vector<std::string>& c) {
  if (c.size() == 2) {
    std::string meta = meta_of(c[1]);
    if (!meta.empty()) return agent_visible(v, t, meta) ? if_type(rel, e, Type::directory) : std::nullopt;
    return agent_visible(v, t, c[1]) ? if_type(rel, e, Type::regular) : std::nullopt;
  }
  if (c.size() == 3) {
    std::string meta = meta_of(c[1]);
    return !meta.empty() && agent_visible(v, t, meta) ? if_type(rel, e, Type::regular) : std::nullopt;
  }
  return std::nullopt;
}

// An entry of the agent's own session/: the current session, the index,
// and another session only with `session:<name> read`.
bool session_shown(const Viewer& v, const std::string& name) {
  return name == "index" || (!v.session.empty() && name == v.session) ||
         (!session_name_issue(name) && grants(v, policy::Class::session, name, "read"));
}

std::optional<Shown> home_entry(const Viewer& v, const HostTree& t, const std::string& rel, const HostEntry& e,
                                const std::vector<std::string>& c) {
  if (c[1] != std::to_string(v.owner)) return std::nullopt;
  if (c.size() == 2) return if_type(rel, e, Type::directory);
  const std::string& tier = c[2];
  if (c.size() == 3)
    return tier == "tool" || tier == "model" || tier == "agent" ? if_type(rel, e, Type::directory) : std::nullopt;
  if (tier == "tool") return tool_entry(v, t, join(c, 0, 3), rel, e, c, 3);
  if (tier == "model") return not_runnable(model_entry(v, t, rel, e, c, 3));
  if (tier == "agent" && (c[3] == v.agent || (v.user_tier && c[3] == v.agent + ".d"))) {
    if (c.size() == 4) return if_type(rel, e, Type::directory);
    if (c[3] == v.agent && c.size() >= 6 && c[4] == "session" && !session_shown(v, c[5])) return std::nullopt;
    return if_plain(rel, e);
  }
  return std::nullopt;
}

std::optional<Shown> shared_entry(const Viewer& v, const HostTree& t, const std::string& rel, const HostEntry& e,
                                  const std::vector<std::string>& c) {
  if (space_name_issue(c[1]) || !grants(v, policy::Class::shared, c[1], "read")) return std::nullopt;
  if (c.size() == 2) return if_type(rel, e, Type::directory);
  if (c[2] != "tool") return if_plain(rel, e);
  if (c.size() == 3) return if_type(rel, e, Type::directory);
  return tool_entry(v, t, join(c, 0, 3), rel, e, c, 3);
}

}  // namespace

Viewer viewer_for(const agentdir::AgentSpec& spec) {
  Viewer v;
  v.agent = spec.name;
  v.owner = spec.owner;
  v.user_tier = spec.tier_user.has_value();
  v.subject = spec.subject();
  v.policy = spec.policy;
  v.ancestors = spec.ancestor_types;
  v.uid = spec.iso == agentdir::Iso::uid ? spec.uid : spec.owner;
  v.gid = spec.gid;
  v.groups = spec.groups;
  return v;
}

std::optional<std::string> own_policy_refuses(const Viewer& v, const policy::Policy& own, policy::Class c,
                                              std::string_view object, std::string_view perm) {
  if (v.subject.empty() || !own.allows(v.subject, c, object, perm)) return v.subject;
  for (const auto& a : v.ancestors)
    if (a.empty() || !own.allows(a, c, object, perm)) return a;
  return std::nullopt;
}

std::string own_policy_gap(const Viewer& v, const std::string& refused, policy::Class c, std::string_view object,
                           std::string_view perm) {
  std::string rule = policy::missing_rule(refused, c, object, perm);
  if (refused == v.subject && !refused.empty()) return rule;
  if (refused.empty() && !v.subject.empty())
    return rule + " for an ancestor of " + v.agent +
           " that has no label or cannot be read (ancestor_policy: a child never holds more than its ancestors)";
  if (refused.empty()) return rule;
  return rule + " for " + v.agent + "'s ancestor type " + refused +
         " (ancestor_policy: a child never holds more than its ancestors)";
}

ToolVerdict tool_verdict(const Viewer& v, const HostTree& t, const std::string& tier, const std::string& name,
                         const HostEntry& e, std::string* refused_type) {
  if (e.type != Type::regular || tool_name_issue(name)) return ToolVerdict::not_a_tool;
  if (!grants(v, policy::Class::tool, name, "execute")) return ToolVerdict::agent_policy;
  if (!executable_for(v, e)) return ToolVerdict::mode;
  // No .d/ or no policy in it: nothing more to ask. A .d/ or policy that
  // is there but is not a plain directory and file, or cannot be read,
  // refuses (it is not "absent").
  auto meta = t.stat(tier + "/" + name + ".d");
  if (!meta) return ToolVerdict::allowed;
  if (meta->type != Type::directory) return ToolVerdict::tool_policy;
  const std::string own = tier + "/" + name + ".d/policy";
  auto pe = t.stat(own);
  if (!pe) return ToolVerdict::allowed;
  if (pe->type != Type::regular) return ToolVerdict::tool_policy;
  auto text = t.read(own);
  if (!text) return ToolVerdict::tool_policy;
  auto p = policy::Policy::parse(name + ".d/policy", *text);
  if (!p) return ToolVerdict::tool_policy;
  auto refused = own_policy_refuses(v, *p, policy::Class::tool, name, "execute");
  if (!refused) return ToolVerdict::allowed;
  if (refused_type != nullptr) *refused_type = *refused;
  return ToolVerdict::tool_policy;
}

bool tool_allowed(const Viewer& v, const HostTree& t, const std::string& tier, const std::string& name,
                  const HostEntry& e) {
  return tool_verdict(v, t, tier, name, e) == ToolVerdict::allowed;
}

ModelCall model_call(const Viewer& v, const HostTree& t, const std::string& name) {
  ModelCall out;
  out.name = name;
  // provider/model, or an alias's plain name.
  if (name.find('/') != std::string::npos ? model_name_issue(name).has_value() : space_name_issue(name).has_value())
    return out;
  const std::string tiers[] = {"home/" + std::to_string(v.owner) + "/model", "model"};
  for (const auto& tier : tiers) {
    const std::string rel = tier + "/" + name;
    auto e = t.stat(rel);
    if (!e) continue;
    if (e->type == Type::symlink) {
      auto to = alias_target(v, t, rel);
      if (!to) return out;  // an alias to no model tier: nothing to call
      out.alias = rel;
      out.name = to->second;
      out.rel = to->first;
      e = t.stat(out.rel);
      if (!e) return out;
    } else {
      out.rel = rel;
    }
    if (e->type != Type::regular) {
      out.rel.clear();
      continue;  // a provider directory, or something that is no model
    }
    if (!model_allowed(v, out.name)) {
      out.verdict = ModelVerdict::agent_policy;
    } else if (!executable_for(v, *e)) {
      out.verdict = ModelVerdict::mode;
    } else if (auto own = t.stat(out.rel + ".d/policy"); own) {
      auto text = own->type == Type::regular ? t.read(out.rel + ".d/policy") : std::nullopt;
      auto p =
          text ? policy::Policy::parse(out.name + ".d/policy", *text) : Result<policy::Policy>(fail(Error{EINVAL, ""}));
      auto refused =
          p ? own_policy_refuses(v, *p, policy::Class::model, out.name, "use") : std::optional<std::string>(v.subject);
      out.verdict = refused ? ModelVerdict::model_policy : ModelVerdict::allowed;
      if (refused) out.refused_type = *refused;
    } else {
      out.verdict = ModelVerdict::allowed;
    }
    return out;
  }
  // Without the grant the answer is EACCES whether or not the model exists
  // (as for tools: docs/abi.md "Tools as files").
  if (!model_allowed(v, name)) out.verdict = ModelVerdict::agent_policy;
  return out;
}

bool reachable(const Viewer& v, const HostTree& t, const std::string& rel) {
  const auto c = rel.empty() ? std::vector<std::string>() : split(rel);
  for (std::size_t i = 0; i <= c.size(); ++i) {
    std::string at = join(c, 0, i);
    auto e = i == 0 ? t.stat("") : std::optional<HostEntry>();
    if (i > 0) {
      auto s = decide(v, t, at);
      if (!s) return false;
      e = s->entry;
    }
    if (!e) return false;
    if (i < c.size() && (e->type != Type::directory || !executable_for(v, *e))) return false;
  }
  return true;
}

std::optional<Shown> decide(const Viewer& v, const HostTree& t, const std::string& rel) {
  if (rel.empty()) return std::nullopt;
  auto e = t.stat(rel);
  if (!e) return std::nullopt;
  const auto c = split(rel);
  const std::string& top = c[0];
  if (c.size() == 1) {
    if (top == "status") return if_type(rel, *e, Type::regular);
    for (const char* d : {"bin", "tool", "model", "agent", "home", "shared"})
      if (top == d) return if_type(rel, *e, Type::directory);
    return std::nullopt;
  }
  if (top == "bin") return if_plain(rel, *e);
  if (top == "tool") return tool_entry(v, t, "tool", rel, *e, c, 1);
  if (top == "model") return not_runnable(model_entry(v, t, rel, *e, c, 1));
  if (top == "agent") return agent_entry(v, t, rel, *e, c);
  if (top == "home") return home_entry(v, t, rel, *e, c);
  if (top == "shared") return shared_entry(v, t, rel, *e, c);
  return std::nullopt;
}

std::vector<std::string> list(const Viewer& v, const HostTree& t, const std::string& rel) {
  std::vector<std::string> out;
  for (const auto& name : t.list(rel))
    if (name != "." && name != ".." && decide(v, t, rel.empty() ? name : rel + "/" + name)) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

std::string tool_at(const Viewer& v, const std::string& rel) {
  const auto c = split(rel);
  bool tier = (c.size() == 2 && c[0] == "tool") ||
              (c.size() == 4 && c[0] == "home" && c[1] == std::to_string(v.owner) && c[2] == "tool") ||
              (c.size() == 4 && c[0] == "shared" && c[2] == "tool");
  return tier ? c.back() : std::string();
}

bool plain(const Viewer& v, const std::string& rel) {
  const auto c = split(rel);
  if (c.size() >= 4 && c[0] == "home" && c[1] == std::to_string(v.owner) && c[2] == "agent" &&
      (c[3] == v.agent || (v.user_tier && c[3] == v.agent + ".d")))
    return true;
  return c[0] == "shared" && (c.size() == 1 || c.size() == 2 || c[2] != "tool");
}

bool holds_sessions(const Viewer& v, const std::string& rel) {
  const auto c = split(rel);
  return (c.size() == 4 || (c.size() == 5 && c[4] == "session")) && c[0] == "home" && c[1] == std::to_string(v.owner) &&
         c[2] == "agent" && c[3] == v.agent;
}

std::vector<std::string> tool_tiers_under(const std::string& rel, const std::vector<std::string>& spaces) {
  const auto c = split(rel);
  if (c.size() == 2 && c[0] == "shared") return {rel + "/tool"};
  std::vector<std::string> out;
  if (c.size() == 1 && c[0] == "shared")
    for (const auto& p : spaces) out.push_back("shared/" + p + "/tool");
  return out;
}

}  // namespace ctx::access
