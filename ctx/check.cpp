#include "ctx/check.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>

#include "access/fs_tree.hpp"
#include "access/rules.hpp"
#include "agentdir/entitlement.hpp"
#include "agentdir/load.hpp"
#include "agentdir/mount_rules.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "base/similar.hpp"
#include "ctx/lint.hpp"
#include "launcher/plan/ancestry.hpp"
#include "launcher/plan/caller.hpp"
#include "launcher/plan/plan.hpp"
#include "launcher/sandbox/preflight.hpp"
#include "mountspec/source_fs.hpp"
#include "sys/file.hpp"
#include "sys/mountinfo.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"

namespace ctx::helper {

namespace {

// Names below a host directory that satisfy `keep`.
std::vector<std::string> entries(const std::string& dir, bool (*keep)(const sys::FileStat&)) {
  std::vector<std::string> out;
  auto d = sys::open(sys::at_cwd, dir, sys::Open::directory);
  if (!d) return out;
  auto names = sys::list_dir(d->get());
  if (!names) return out;
  for (const auto& n : *names) {
    auto st = sys::stat_at(d->get(), n);
    if (st && *st && keep(**st)) out.push_back(n);
  }
  return out;
}

bool is_tool(const sys::FileStat& st) { return S_ISREG(st.mode) && (st.mode & 0111) != 0; }
bool is_dir(const sys::FileStat& st) { return S_ISDIR(st.mode); }
bool is_entry(const sys::FileStat& st) { return !S_ISDIR(st.mode); }

// The agent's tool directories as host paths: CTX_PATH entries under /ctx
// map into the CTX root; others cannot be seen from outside the sandbox.
std::vector<std::string> tool_dirs(const agentdir::AgentSpec& s) {
  std::vector<std::string> inner = s.path;
  if (!s.path_set) inner = {"/ctx/tool", "/ctx/home/" + std::to_string(s.owner) + "/tool"};
  std::vector<std::string> out;
  for (const auto& d : inner)
    if (path_is_at_or_under(d, "/ctx")) out.push_back(path_join(s.ctx_root, path_suffix(d, "/ctx")));
  return out;
}

// The model names of both tiers the agent's calls look in (the user
// tier home/<owner>/model first), for "did you mean".
std::vector<std::string> model_names(const agentdir::AgentSpec& s) {
  std::vector<std::string> out;
  const std::string tiers[] = {s.ctx_root + "/home/" + std::to_string(s.owner) + "/model", s.ctx_root + "/model"};
  for (const auto& tier : tiers)
    for (const auto& provider : entries(tier, is_dir))
      for (const auto& m : entries(tier + "/" + provider, is_entry))
        if (!model_name_issue(provider + "/" + m)) out.push_back(provider + "/" + m);
  return out;
}

// Whether a call of the model `name` would find one: the model gate's own
// lookup (user tier first, aliases followed), so the check and the call
// never disagree.
bool model_exists(const agentdir::AgentSpec& s, const std::string& name) {
  auto root = sys::open(sys::at_cwd, s.ctx_root, sys::Open::directory);
  if (!root) return false;
  access::FsTree tree(root->get());
  access::ModelCall c = access::model_call(access::viewer_for(s), tree, name);
  return c.verdict != access::ModelVerdict::not_found && c.verdict != access::ModelVerdict::agent_policy;
}

// Policy objects that do not exist grant nothing; say so, with the
// closest existing name.
void lint_objects(const agentdir::AgentSpec& s, const std::function<void(const std::string&)>& warn) {
  std::vector<std::string> tools;
  for (const auto& d : tool_dirs(s))
    for (const auto& t : entries(d, is_tool))
      if (!tool_name_issue(t)) tools.push_back(t);
  std::vector<std::string> models = model_names(s);
  std::vector<std::string> spaces = entries(s.ctx_root + "/shared", is_dir);
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  for (const auto& r : s.policy.rules()) {
    if (r.subject != s.subject()) continue;  // inert already, said once
    const std::vector<std::string>* pool = nullptr;
    std::string kind;
    switch (r.cls) {
      case policy::Class::tool:
        pool = &tools;
        kind = "no such tool in the agent's CTX_PATH";
        break;
      case policy::Class::model:
        if (model_exists(s, r.object)) break;
        pool = &models;
        kind = "no such model in " + s.ctx_root + "/home/" + std::to_string(s.owner) + "/model or " + s.ctx_root +
               "/model";
        break;
      case policy::Class::shared:
        pool = &spaces;
        kind = "no such shared space in " + s.ctx_root + "/shared";
        break;
      case policy::Class::mount: {
        // A mount rule allows a line of the table whose target it names
        // (write: a rw line); any other grants nothing.
        bool used = std::any_of(s.mounts.begin(), s.mounts.end(), [&](const mountspec::Entry& e) {
          return e.target == r.object && (r.permission == "read" || !e.attrs.rdonly);
        });
        if (!used)
          warn(s.name + ".d/policy:" + std::to_string(r.line) + ": mount:" + r.object + " " + r.permission + ": no " +
               (r.permission == "read" ? "" : "rw ") + "line of " + s.name + ".d/mount has target " + r.object +
               " (the rule is inert)");
        break;
      }
      case policy::Class::agent:
        if (r.permission == "write")
          warn(s.name + ".d/policy:" + std::to_string(r.line) + ": agent:" + r.object +
               " write: " + std::string(policy::enforcement_note(r.cls, r.permission)));
        break;
      case policy::Class::session:
      case policy::Class::network: break;
    }
    if (pool == nullptr || has(*pool, r.object)) continue;
    std::string hint = closest(r.object, *pool);
    warn(s.name + ".d/policy:" + std::to_string(r.line) + ": " + std::string(policy::to_string(r.cls)) + ":" +
         r.object + ": " + kind +
         (hint.empty() ? std::string(" (the rule is inert)") : "; did you mean " + hint + "?"));
  }
}

// Mounts that contradict each other (what cannot work at all is the
// launch's own preflight, check_launch).
void lint_mounts(const agentdir::AgentSpec& s, const std::function<void(const std::string&)>& warn) {
  for (const auto& m : s.mounts) {
    std::string where = s.name + ".d/mount:" + std::to_string(m.line) + ": ";
    for (const auto& p : s.mounts) {
      if (&p == &m || !path_is_at_or_under(m.target, p.target) || m.target == p.target) continue;
      std::string point = path_join(p.source, path_suffix(m.target, p.target));
      if (!m.attrs.rdonly && p.attrs.rdonly && !sys::open(sys::at_cwd, point, sys::Open::path_only))
        warn(where + "rw mount " + m.target + " lies under the read-only " + p.target + " (line " +
             std::to_string(p.line) + ") and its mount point " + point + " does not exist; create it there");
    }
  }
}

// The variables the launch sets to the model endpoint's token, where SDKs
// look for their key (docs/models.md, "The HTTP endpoint"): one in the
// agent's env is a real key the agent can read.
void lint_env(const agentdir::AgentSpec& s, const std::function<void(const std::string&)>& warn) {
  for (const auto& [k, v] : s.env)
    if (k == "ANTHROPIC_API_KEY" || k == "OPENAI_API_KEY")
      warn(s.name + ".d/env: " + k +
           ": a key here is readable by the agent (its environment, /proc); remove it and "
           "give the key to the model's own <m>.d/env: the launch sets " +
           k + " to the model endpoint's token");
}

// The file system each mount line's source lies on in this mount
// namespace, and whether a root launch refuses it, by the sandbox's own
// rule (mountspec/source_fs.hpp). The CTX root itself is shown as the
// agent view, never bound. A source that does not resolve is left out
// (check_launch reports it).
SourceTypes source_types(const agentdir::AgentSpec& s) {
  SourceTypes out;
  auto table = sys::mount_table();
  if (!table) return out;
  for (const auto& m : s.mounts) {
    auto real = sys::real_path(m.source);
    if (!real) continue;
    const sys::MountEntry* on = mountspec::mount_holding(*real, *table);
    if (on == nullptr) continue;
    SourceFs fs{on->fstype, !mountspec::root_source_fs_allowed(on->fstype), ""};
    if (m.kind == mountspec::Kind::rbind)
      if (const sys::MountEntry* below = mountspec::refused_submount(*real, *table)) {
        fs.root_refuses = true;
        fs.holds = below->target + " on " + below->fstype;
      }
    if (*real == s.ctx_root) fs = {on->fstype, false, ""};
    out[m.line] = fs;
  }
  return out;
}

// What a launch would refuse, from the launcher's own code: the caller
// against the owner, the plan (make_plan: reserved targets, the root's
// place, the policy's mounts, ...), then the plan against this host
// (launcher/sandbox/preflight.hpp: the root, the sources, the cwd, the runtime
// and its interpreter), as the launch would read them.
void check_launch(agentdir::AgentSpec spec, const std::function<void(const Error&)>& error) {
  auto caller = launcher::probe_caller(spec);
  if (!caller) return error(caller.error());
  launcher::PlanOptions po;
  po.shared_spaces = launcher::list_shared_spaces(spec.ctx_root);
  po.view = true;
  if (spec.parent)
    if (auto r =
            launcher::plan_ancestry(spec, po, [&](const std::string& n) { return agentdir::load(spec.ctx_root, n); });
        !r)
      return error(r.error());
  auto plan = launcher::make_plan(spec, *caller, po);
  // Mount lines the policy lacks are all reported by check_agent; the
  // rest of the launch is still checked, as if the policy had them.
  if (!plan && plan.error().reason == "mount_policy" && !spec.subject().empty()) {
    auto rules = spec.policy.rules();
    for (auto& r : agentdir::mount_rules(spec.mounts, spec.subject())) rules.push_back(std::move(r));
    if (auto p = policy::Policy::from_rules(std::move(rules))) {
      spec.policy = std::move(*p);
      plan = launcher::make_plan(spec, *caller, po);
    }
  }
  if (!plan && plan.error().reason == "mount_policy") return;
  if (!plan) return error(plan.error());
  for (const auto& e : launcher::preflight(*plan)) error(e);
}

}  // namespace

std::vector<Finding> check_agent(const std::string& given_root, const std::string& name,
                                 std::optional<std::uint32_t> user) {
  std::vector<Finding> out;
  // By its real path, as the launcher takes it.
  const std::string ctx_root = sys::real_path(given_root).value_or(given_root);
  // A refusal found by this check and again by the launch's own code
  // (check_launch names the first entitlement refusal) is said once.
  auto error = [&](const Error& e) {
    auto same = [&](const Finding& f) { return f.level == Finding::Level::error && f.text == e.msg; };
    if (std::none_of(out.begin(), out.end(), same)) out.push_back({Finding::Level::error, e.msg});
  };
  auto warn = [&](const std::string& s) { out.push_back({Finding::Level::warning, s}); };
  std::vector<Error> errors;
  auto listing = agentdir::read_control_files(ctx_root, name, &errors, user);
  for (const auto& e : errors) error(e);
  if (!listing) return out;
  for (const auto& u : listing->unknown)
    warn(name + ".d/" + u + ": not a control file of the ABI; it is ignored (remove or rename it)");
  errors.clear();
  auto spec = agentdir::build_spec(name, ctx_root, listing->files, agentdir::passwd_primary_gid(), &errors);
  if (user) {
    std::optional<std::uint32_t> owner;
    if (spec) owner = spec->owner;
    for (const auto& e : agentdir::user_tier_errors(name, *user, owner, listing->files.count("parent") != 0)) error(e);
  }
  for (const auto& e : errors) error(e);
  if (!spec) return out;
  spec->tier_user = user;
  // Run as root, the check refuses what a root launch refuses: files it
  // does not trust, and ids the owner is not entitled to.
  if (::geteuid() == 0) {
    for (const auto& e : agentdir::trust_errors(name, *listing, user.value_or(spec->owner))) error(e);
    spec->id_source = agentdir::identity_source(*listing);
    if (auto owner = agentdir::read_owner_ids(spec->owner); !owner) {
      error(owner.error());
    } else {
      for (const auto& e : agentdir::entitlement_errors(*spec, *owner)) error(e);
    }
  }
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
  lint_objects(*spec, warn);
  lint_mounts(*spec, warn);
  lint_env(*spec, warn);
  // Every mount line the policy does not allow (a launch names the first).
  for (const auto& e : agentdir::mount_policy_errors(name, spec->mounts, spec->policy, subject)) error(e);
  check_launch(*spec, error);
  // Every grant with its risk tier, highest first.
  for (const auto& g : grants_by_risk(*spec, source_types(*spec))) {
    char line[512];
    std::snprintf(line, sizeof line, "risk %-6s %-44s %s", std::string(to_string(g.risk)).c_str(), g.what.c_str(),
                  g.where.c_str());
    out.push_back({Finding::Level::note, line, std::string(to_string(g.risk)), g.what, g.where});
  }
  return out;
}

std::vector<std::string> agent_names(const std::string& ctx_root) {
  std::vector<std::string> out;
  auto d = sys::open(sys::at_cwd, ctx_root + "/agent", sys::Open::directory);
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

std::vector<std::pair<std::uint32_t, std::string>> user_agent_names(const std::string& ctx_root) {
  std::vector<std::pair<std::uint32_t, std::string>> out;
  auto home = sys::open(sys::at_cwd, ctx_root + "/home", sys::Open::directory);
  if (!home) return out;
  auto users = sys::list_dir(home->get());
  if (!users) return out;
  for (const auto& u : *users) {
    if (u.empty() || u.size() > 10 || u.find_first_not_of("0123456789") != std::string::npos) continue;
    auto agents = sys::open(sys::at_cwd, ctx_root + "/home/" + u + "/agent", sys::Open::directory);
    if (!agents) continue;
    auto names = sys::list_dir(agents->get());
    if (!names) continue;
    for (const auto& n : *names) {
      if (n.size() <= 2 || n.substr(n.size() - 2) != ".d") continue;
      auto st = sys::stat_at(agents->get(), n);
      if (st && *st && S_ISDIR((*st)->mode))
        out.emplace_back(static_cast<std::uint32_t>(std::stoul(u)), n.substr(0, n.size() - 2));
    }
  }
  return out;
}

}  // namespace ctx::helper
