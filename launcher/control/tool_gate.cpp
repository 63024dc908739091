#include "launcher/control/tool_gate.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "agentdir/load.hpp"
#include "base/names.hpp"
#include "base/path.hpp"
#include "base/text.hpp"
#include "base/timestamp.hpp"
#include "launcher/records/agent_files.hpp"
#include "launcher/records/as_owner.hpp"
#include "launcher/records/dot_log.hpp"
#include "launcher/sandbox/static_view.hpp"
#include "mountspec/geometry.hpp"
#include "policy/policy.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"
#include "access/fs_tree.hpp"
#include "access/rules.hpp"
#include "view/server.hpp"

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

std::optional<ToolTier> tier_at(const LaunchPlan& plan, const std::string& inner) {
  const MountStep* s = mountspec::covering_step(plan.mounts, inner);
  const mountspec::Attrs* attrs = nullptr;
  if (const auto* v = s != nullptr ? std::get_if<ViewStep>(s) : nullptr) attrs = &v->attrs;
  if (const auto* b = s != nullptr ? std::get_if<BindStep>(s) : nullptr) attrs = &b->attrs;
  const auto host = mountspec::host_path_of(plan.mounts, plan.ctx_root, inner);
  if (attrs == nullptr || !host || !path_is_at_or_under(*host, plan.ctx_root)) return std::nullopt;
  return ToolTier{*mountspec::plain_path(inner), std::string(path_suffix(*host, plan.ctx_root)), attrs->noexec};
}

std::vector<ToolTier> tool_tiers(const LaunchPlan& plan) {
  std::vector<ToolTier> out;
  for (const auto& inner : ctx_path_of(plan)) {
    auto t = tier_at(plan, inner);
    bool seen = std::any_of(out.begin(), out.end(), [&](const ToolTier& o) { return o.inner == inner; });
    if (t && !seen) out.push_back(std::move(*t));
  }
  return out;
}

ToolGate::ToolGate(const LaunchPlan& plan, UniqueFd tree, RecordSink& records)
    : plan_(plan),
      tree_(std::move(tree)),
      tiers_(tool_tiers(plan)),
      records_(records),
      live_(plan.ctx_root, runtime_viewer(plan)) {}

namespace {

Event call_event(const std::string& name, EventStatus status, bool direct) {
  return Event{"tool.call", name.empty() ? "tool" : "tool/" + name, status, {{"via", direct ? "exec" : "ctx tool"}}};
}

}  // namespace

// The events.jsonl record is the seed's; the agent can write its home, so
// the same facts go to <name>.d/log too, which it cannot. A call that
// reached a tool (`reached`: the tool below the CTX root) also goes to
// the tool's own files.
void ToolGate::record(const Event& ev, const std::string& reached) {
  records_.event(ev);
  records_.log(ev);
  if (!reached.empty()) log_tool(reached, ev);
}

// <tool>.d/log (one line a call: append_dot_log, opt_in) and
// <tool>.d/status (the last call), the same stamped facts, only when the
// tool's owner made them: nothing is ever created, renamed or removed in a
// tool's directory, which may be root's or another user's (docs/abi.md,
// "Tool logs"). status is written like the log: with the owner's
// file-system ids, the .d/ opened beneath the CTX root without a symlink
// on the way, never through one.
namespace {

Result<void> write_tool_status(const LaunchPlan& plan, const std::string& rel, const std::string& line) {
  CTX_TRY_ASSIGN(AsOwner as_owner, AsOwner::enter(plan.ids));
  CTX_TRY_ASSIGN(UniqueFd root, sys::open(sys::at_cwd, plan.ctx_root, sys::Open::directory));
  auto d = sys::open(root.get(), rel + ".d", sys::Open::directory | sys::Open::beneath | sys::Open::no_symlinks);
  if (!d) return fail(Error{ENOENT, rel + ".d: ENOENT: " + d.error().msg});
  return sys::overwrite_existing(d->get(), "status", line);
}

}  // namespace

void ToolGate::log_tool(const std::string& rel, const Event& ev) {
  const std::string line = stamp_event(ev, {timestamp_now(), plan_.name, plan_.session}).dump(-1, ' ', true) + "\n";
  const std::pair<const char*, Result<void>> written[] = {{"log", append_dot_log(plan_, rel, line, DotLogRule::opt_in)},
                                                          {"status", write_tool_status(plan_, rel, line)}};
  for (const auto& [file, r] : written) {
    // Absent: the tool's owner did not ask for it. Anything else is said
    // once per file and errno.
    if (r || r.error().code == ENOENT) continue;
    const std::string path = plan_.ctx_root + "/" + rel + ".d/" + file;
    if (warned_.insert({path, r.error().code}).second)
      std::fprintf(stderr, "ctx-agent-run: warning: %s: %s (said once)\n", printable(path).c_str(),
                   printable(r.error().msg).c_str());
  }
}

ToolAnswer ToolGate::refuse(const std::string& name, const Error& e, EventStatus status, bool direct,
                            const std::string& reached) {
  Event ev = call_event(name, status, direct);
  if (!e.reason.empty()) ev.facts["reason"] = e.reason;
  record(ev, reached);
  json a{{"ok", false}, {"op", "tool"}, {"name", name}, {"code", errno_name(e.code)}, {"message", e.msg}};
  if (!e.reason.empty()) a["reason"] = e.reason;
  return ToolAnswer{a, UniqueFd()};
}

// The first tier, in CTX_PATH order, whose view shows a regular file of
// that name with an execute bit (seed 000: CTX_PATH strictly left to
// right), opened first and decided on what was opened: the tool, a
// refusal naming the layer, or nullopt when no tier has it. In a root
// launch the tree is read with the owner's file-system ids, as the view
// reads it: nothing the owner could not reach is decided on or handed over.
Result<std::optional<ToolAnswer>> ToolGate::find(const std::vector<ToolTier>& tiers, const std::string& name,
                                                 const access::Viewer& v, std::string& reached) {
  auto as_owner = AsOwner::enter(plan_.ids);
  if (!as_owner) return fail(refusal(as_owner.error().code, "error", as_owner.error().msg));
  access::FsTree tree(tree_.get());
  for (const auto& t : tiers) {
    const std::string rel = t.rel.empty() ? name : t.rel + "/" + name;
    if (access::tool_at(v, rel) != name || !access::reachable(v, tree, t.rel)) continue;
    auto fd = sys::open(tree_.get(), rel, sys::Open::path_only | sys::Open::beneath | sys::Open::no_symlinks);
    if (!fd) continue;
    auto st = sys::stat_fd(fd->get());
    if (!st || !S_ISREG(st->mode) || (st->mode & 0111) == 0) continue;
    const std::string path = t.inner + "/" + name;
    reached = rel;
    // 1-2: a mount that allows exec, and the mode bits for the runtime's
    // ids; 4: the tool's own policy.
    if (t.noexec) return fail(refusal(EACCES, "noexec_mount", t.inner + " is on a noexec mount in this sandbox"));
    std::string refused = v.subject;
    switch (access::tool_verdict(v, tree, t.rel, name, access::entry_of(*st), &refused)) {
      case access::ToolVerdict::allowed:
        return std::optional<ToolAnswer>(
            ToolAnswer{{{"ok", true}, {"op", "tool"}, {"name", name}, {"path", path}}, std::move(*fd)});
      case access::ToolVerdict::mode:
        return fail(refusal(EACCES, "mode", path + " is not executable for uid " + std::to_string(v.uid)));
      case access::ToolVerdict::tool_policy:
        return fail(refusal(EACCES, "tool_policy",
                            "the tool's own policy (" + name + ".d/policy) has no " +
                                access::own_policy_gap(v, refused, policy::Class::tool, name, "execute")));
      case access::ToolVerdict::agent_policy:
      case access::ToolVerdict::not_a_tool: continue;
    }
  }
  return std::optional<ToolAnswer>();
}

ToolAnswer ToolGate::refuse_request(const Error& e) { return refuse("", e, EventStatus::error); }

ToolAnswer ToolGate::call(const ToolRequest& req) {
  const std::string& name = req.name;
  // A direct call of the static view's tool names its tier: an exec, as
  // the FUSE view records one.
  const bool direct = req.direct;
  if (auto issue = tool_name_issue(name))
    return refuse("", refusal(EINVAL, "invalid_name", *issue), EventStatus::error, direct);
  std::vector<ToolTier> tiers = tiers_;
  if (direct) {
    // Any tier the plan shows (a shared space's tool/ too), not only
    // CTX_PATH's: the view shows an allowed tool wherever its tier is.
    std::optional<ToolTier> t;
    if (!abs_path_issue(req.dir)) t = tier_at(plan_, req.dir);
    if (!t)
      return refuse(name, refusal(ENOENT, "not_found", "the call names no tool tier of " + plan_.name + "'s mounts"),
                    EventStatus::error, direct);
    tiers = {std::move(*t)};
  }

  const access::Viewer& v = live_.get();
  // 3 first: without 'allow <type> tool:<name> execute' the answer is
  // EACCES whether or not such a tool exists (seed 000).
  if (v.subject.empty())
    return refuse(name, refusal(EACCES, "agent_policy", plan_.name + " has no label, so policy v0 denies everything"),
                  EventStatus::denied, direct);
  if (!v.policy.allows(v.subject, policy::Class::tool, name, "execute"))
    return refuse(name,
                  refusal(EACCES, "agent_policy",
                          "the policy of " + plan_.name + " has no " +
                              policy::missing_rule(v.subject, policy::Class::tool, name, "execute")),
                  EventStatus::denied, direct);

  std::string reached;
  auto found = find(tiers, name, v, reached);
  if (!found)
    return refuse(name, found.error(), found.error().reason == "error" ? EventStatus::error : EventStatus::denied,
                  direct, reached);
  if (*found) {
    record(call_event(name, EventStatus::ok, direct), reached);
    return std::move(**found);
  }
  std::string dirs;
  for (const auto& t : tiers) dirs += (dirs.empty() ? "" : ":") + t.inner;
  return refuse(
      name,
      refusal(ENOENT, "not_found",
              "no executable " + name + " in " + (dirs.empty() ? std::string("CTX_PATH (no tool tier)") : dirs) +
                  " (on the host, ctx explain " + plan_.name + " tool:" + name + " execute names the layer)"),
      EventStatus::error, direct);
}

}  // namespace ctx::launcher
