// An owned child's place in its ancestry, for its plan.
#pragma once

#include <functional>
#include <string>

#include "agentdir/agent_spec.hpp"
#include "base/result.hpp"
#include "launcher/plan/plan.hpp"

namespace ctx::launcher {

/// Reads an agent of the same CTX root by name (agentdir::load).
using AgentLoader = std::function<Result<agentdir::AgentSpec>(const std::string& name)>;

/// For an agent with a parent: the parent's mount table (its binds derive
/// from them) and the coordination directory in the parent's session when
/// it exists (po.parent_mounts, po.handoff_dir), and every ancestor's
/// session tree, which the child must not see (po.hidden_dirs). The
/// child's identity files count as root's decision only where every
/// ancestor's do too (spec.id_source): a root supervisor writes its
/// children's files, but from ids an owner may have chosen; an ancestor
/// that cannot be read, or a chain longer than 16, decided nothing.
/// Fails closed when the parent itself cannot be read: a child's mounts
/// are checked against its parent's. Fills spec.ancestor_types
/// (agentdir::ancestor_types), which the tool, model and view decisions
/// apply.
Result<void> plan_ancestry(agentdir::AgentSpec& spec, PlanOptions& po, const AgentLoader& load);

/// Seed 003 rule 5: an agent whose `parent` file names an agent is owned
/// by it (`life owned`, the only life there is) and runs only under its
/// parent's supervisor, so that it is cancelled with the parent. Such a
/// launch must carry --owned-by with the pid of the process that started
/// it (`parent_pid`, getppid()) and that pid must be the one the parent's
/// `<p>.d/pid` names (its live supervisor). EPERM otherwise, naming the
/// parent file and what to do. Agents without a parent file pass.
Result<void> check_owned_launch(const agentdir::AgentSpec& spec, pid_t owned_by, pid_t parent_pid);

}  // namespace ctx::launcher
