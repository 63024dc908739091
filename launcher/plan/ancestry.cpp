#include "launcher/plan/ancestry.hpp"

#include <fcntl.h>

#include <optional>

#include "agentdir/child.hpp"
#include "base/names.hpp"
#include "sys/file.hpp"

namespace ctx::launcher {

namespace {

constexpr int kMaxDepth = agentdir::kMaxAncestry;

void keep_only_shared(agentdir::IdentitySource& mine, const agentdir::IdentitySource& theirs) {
  mine.uid_by_root = mine.uid_by_root && theirs.uid_by_root;
  mine.gid_by_root = mine.gid_by_root && theirs.gid_by_root;
  mine.groups_by_root = mine.groups_by_root && theirs.groups_by_root;
}

}  // namespace

Result<void> plan_ancestry(agentdir::AgentSpec& spec, PlanOptions& po, const AgentLoader& load) {
  const agentdir::AgentSpec* cur = &spec;
  std::optional<agentdir::AgentSpec> anc;
  for (int depth = 0; depth < kMaxDepth && cur->parent; ++depth) {
    auto p = load(cur->parent->agent);
    if (!p && depth == 0)
      return fail(p.error().code, spec.name + ": its parent " + cur->parent->agent + " cannot be read (" +
                                      p.error().msg +
                                      "): a child runs only while its parent's files say what it may see; remove " +
                                      spec.name + ".d/parent to run it as an agent of its own");
    if (!p) {
      spec.id_source = {};  // an ancestor nobody can vouch for decided nothing
      break;
    }
    keep_only_shared(spec.id_source, p->id_source);
    std::string session = cur->parent->session.empty() ? "default" : cur->parent->session;
    if (depth == 0) {
      po.parent_mounts = p->mounts;
      std::string dir = agentdir::child_context_dir(*p, session, spec.name);
      if (auto st = sys::stat_at(AT_FDCWD, dir); st && *st) po.handoff_dir = dir;
    }
    po.hidden_dirs.push_back(spec.ctx_root + "/home/" + sessions_rel(p->owner, p->name));
    anc = std::move(*p);
    cur = &*anc;
  }
  if (cur->parent) spec.id_source = {};
  spec.ancestor_types = agentdir::ancestor_types(spec, load);
  return {};
}

Result<void> check_owned_launch(const agentdir::AgentSpec& spec, pid_t owned_by, pid_t parent_pid) {
  if (!spec.parent || spec.life != agentdir::Life::owned) return {};
  const std::string& p = spec.parent->agent;
  auto refuse = [&](const std::string& why) -> Result<void> {
    return fail(EPERM, spec.ctx_root + "/agent/" + spec.name + ".d/parent:1: EPERM: " + spec.name +
                           " is owned by agent " + p + " (life owned): start it from " + p + " (ctx agent start " +
                           spec.name + "), so that it is cancelled with its parent; " + why + "; or remove " +
                           spec.name + ".d/parent to run it as an agent of its own");
  };
  if (owned_by <= 0) return refuse("it was launched directly");
  if (owned_by != parent_pid)
    return refuse("--owned-by " + std::to_string(owned_by) + " is not the process that started it");
  std::string pid = sys::read_or_empty(spec.ctx_root + "/agent/" + p + ".d", "pid");
  if (pid != std::to_string(owned_by) + "\n")
    return refuse("--owned-by " + std::to_string(owned_by) + " is not the supervisor " + p + ".d/pid names");
  return {};
}

}  // namespace ctx::launcher
