#include "launcher/tool_gate.hpp"

#include <sys/stat.h>

#include <algorithm>

#include "agentdir/load.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "policy/policy.hpp"
#include "sys/file.hpp"
#include "sys/resolve.hpp"
#include "view/fs_tree.hpp"
#include "view/rules.hpp"

namespace ctx::launcher {

namespace {

using nlohmann::json;

std::vector<std::string> ctx_path_of(const LaunchPlan& plan) {
  std::vector<std::string> out;
  for (const auto& kv : plan.env) {
    if (kv.rfind("CTX_PATH=", 0) != 0) continue;
    std::string v = kv.substr(9);
    for (std::size_t start = 0; start <= v.size();) {
      std::size_t colon = v.find(':', start);
      std::string d = v.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!d.empty() && !abs_path_issue(d)) out.push_back(d);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  return out;
}

Error refusal(int code, std::string reason, std::string msg) {
  Error e{code, std::move(msg)};
  e.reason = std::move(reason);
  return e;
}

}  // namespace

std::vector<ToolTier> tool_tiers(const LaunchPlan& plan) {
  std::vector<ToolTier> out;
  for (const auto& inner : ctx_path_of(plan)) {
    const MountStep* s = mountspec::covering_step(plan.mounts, inner, {StepKind::view, StepKind::bind, StepKind::mask});
    if (s == nullptr || s->kind == StepKind::mask) continue;
    std::string rel;
    if (s->kind == StepKind::view) {
      rel = path_join(s->source, path_suffix(inner, s->target));
    } else if (path_is_at_or_under(s->source, plan.ctx_root)) {
      rel = path_join(std::string(path_suffix(s->source, plan.ctx_root)), path_suffix(inner, s->target));
    } else {
      continue;
    }
    if (!rel.empty() && rel.front() == '/') rel.erase(0, 1);
    bool seen = std::any_of(out.begin(), out.end(), [&](const ToolTier& t) { return t.inner == inner; });
    if (!seen) out.push_back(ToolTier{inner, rel, s->attrs.noexec});
  }
  return out;
}

ToolGate::ToolGate(const LaunchPlan& plan, UniqueFd tree, std::function<void(json)> event)
    : plan_(plan), tree_(std::move(tree)), tiers_(tool_tiers(plan)), event_(std::move(event)) {}

ToolAnswer ToolGate::refuse(const std::string& name, const Error& e, const char* status) {
  json ev{{"type", "tool.call"}, {"object", "tool/" + name}, {"status", status}, {"via", "ctx tool"}};
  if (!e.reason.empty()) ev["reason"] = e.reason;
  event_(ev);
  json a{{"ok", false}, {"op", "tool"}, {"name", name}, {"code", errno_name(e.code)}, {"message", e.msg}};
  if (!e.reason.empty()) a["reason"] = e.reason;
  return ToolAnswer{a, UniqueFd()};
}

ToolAnswer ToolGate::call(const json& req) {
  for (const auto& [k, v] : req.items())
    if (k != "op" && k != "name" && k != "dir")
      return refuse("", refusal(EINVAL, "invalid_request", "unknown key '" + k + "' in tool"), "error");
  if (!req.contains("name") || !req["name"].is_string())
    return refuse("", refusal(EINVAL, "invalid_request", "tool needs \"name\", a string"), "error");
  const std::string name = req["name"].get<std::string>();
  if (auto issue = tool_name_issue(name)) return refuse("", refusal(EINVAL, "invalid_name", *issue), "error");
  std::vector<ToolTier> tiers = tiers_;
  if (req.contains("dir")) {
    if (!req["dir"].is_string()) return refuse(name, refusal(EINVAL, "invalid_request", "\"dir\" is a string"), "error");
    std::string dir = req["dir"].get<std::string>();
    std::erase_if(tiers, [&](const ToolTier& t) { return t.inner != dir; });
    if (tiers.empty())
      return refuse(name,
                    refusal(ENOENT, "not_found", dir + " is not a tool tier of " + plan_.name + "'s CTX_PATH"),
                    "error");
  }

  // The agent's label and policy as they are now: an edit during the run
  // counts, and a policy that no longer parses grants nothing.
  view::Viewer v;
  v.agent = plan_.name;
  v.owner = plan_.owner;
  v.uid = plan_.ids.host_uid;
  v.gid = plan_.ids.host_gid;
  v.groups = plan_.ids.host_groups;
  if (auto spec = agentdir::load_subject_policy(plan_.ctx_root, plan_.name)) {
    v.subject = spec->subject();
    v.policy = std::move(spec->policy);
  }
  // 3 first: without 'allow <type> tool:<name> execute' the answer is
  // EACCES whether or not such a tool exists (seed 000).
  if (v.subject.empty())
    return refuse(name,
                  refusal(EACCES, "agent_policy", plan_.name + " has no label, so policy v0 denies everything"),
                  "denied");
  if (!v.policy.allows(v.subject, policy::Class::tool, name, "execute"))
    return refuse(name,
                  refusal(EACCES, "agent_policy",
                          "the policy of " + plan_.name + " has no " +
                              policy::missing_rule(v.subject, policy::Class::tool, name, "execute")),
                  "denied");

  // The first tier, in CTX_PATH order, whose view shows a regular file of
  // that name with an execute bit (seed 000: CTX_PATH strictly left to
  // right). Opened first and decided on what was opened.
  view::FsTree tree(tree_.get());
  for (const auto& t : tiers) {
    const std::string rel = t.rel.empty() ? name : t.rel + "/" + name;
    if (view::tool_at(v, rel) != name || !view::reachable(v, tree, t.rel)) continue;
    auto fd = sys::open_path_beneath(tree_.get(), rel, false);
    if (!fd) continue;
    auto st = sys::stat_fd(fd->get());
    if (!st || !S_ISREG(st->mode) || (st->mode & 0111) == 0) continue;
    const std::string path = t.inner + "/" + name;
    // 1-2: a mount that allows exec, and the mode bits for the runtime's
    // ids; 4: the tool's own policy.
    if (t.noexec)
      return refuse(name, refusal(EACCES, "noexec_mount", t.inner + " is on a noexec mount in this sandbox"),
                    "denied");
    switch (view::tool_verdict(v, tree, t.rel, name, view::entry_of(*st))) {
      case view::ToolVerdict::allowed: break;
      case view::ToolVerdict::mode:
        return refuse(name,
                      refusal(EACCES, "mode", path + " is not executable for uid " + std::to_string(v.uid)),
                      "denied");
      case view::ToolVerdict::tool_policy:
        return refuse(name,
                      refusal(EACCES, "tool_policy",
                              "the tool's own policy (" + name + ".d/policy) has no " +
                                  policy::missing_rule(v.subject, policy::Class::tool, name, "execute")),
                      "denied");
      case view::ToolVerdict::agent_policy:
      case view::ToolVerdict::not_a_tool: continue;
    }
    event_({{"type", "tool.call"}, {"object", "tool/" + name}, {"status", "ok"}, {"via", "ctx tool"}});
    return ToolAnswer{{{"ok", true}, {"op", "tool"}, {"name", name}, {"path", path}}, std::move(*fd)};
  }
  std::string dirs;
  for (const auto& t : tiers) dirs += (dirs.empty() ? "" : ":") + t.inner;
  return refuse(name,
                refusal(ENOENT, "not_found",
                        "no executable " + name + " in " + (dirs.empty() ? std::string("CTX_PATH (no tool tier)") : dirs) +
                            " (on the host, ctx explain " + plan_.name + " tool:" + name + " execute names the layer)"),
                "error");
}

}  // namespace ctx::launcher
