// Where each class's verdict takes effect (docs/abi-policy.md, "What each
// class gates"): one table, read by `ctx explain` and the docs' test.
#include "policy/policy.hpp"

namespace ctx::policy {

std::string_view enforcement_note(Class c, std::string_view perm) {
  switch (c) {
    case Class::tool:
      if (perm == "execute")
        return "enforced by the supervisor at every call (ctx tool and direct calls through the view) and by the "
               "agent view, which shows only the tools the agent may run";
      break;
    case Class::model:
      if (perm == "use")
        return "enforced by the supervisor at every model call and by the agent view, which shows only the models "
               "the agent may use";
      break;
    case Class::shared:
      if (perm == "read" || perm == "write")
        return "enforced by the launcher at plan time (a mount of the space needs read, a rw one write; a mount of "
               "<ctx>/shared hides spaces without read and shows those without write read-only) and by the agent "
               "view, which shows a space only with read";
      break;
    case Class::session:
      if (perm == "write")
        return "enforced by the launcher at launch: a session that does not exist yet is made only with this rule "
               "(EACCES otherwise, nothing made)";
      if (perm == "resume")
        return "enforced by the launcher at launch: launching into a session that exists needs this rule and write";
      if (perm == "read")
        return "enforced by the launcher's mount plan: the agent's other sessions are masked in the sandbox unless "
               "this rule names them, where its mounts show its own session directory";
      break;
    case Class::mount:
      if (perm == "read" || perm == "write")
        return "enforced by the launcher at plan time: each line of <name>.d/mount needs read on its target, a rw "
               "line write as well (EACCES, reason mount_policy); an owned child's rules are derived from its "
               "table at create, and its launch checks them like any other";
      break;
    case Class::agent:
      if (perm == "create" || perm == "start" || perm == "stop")
        return "enforced by the agent's supervisor when the agent asks it to create, start or stop that child "
               "(ctx agent)";
      if (perm == "read")
        return "enforced by the agent view (FUSE and static): /ctx/agent shows another agent and its .d only with "
               "this rule or when the agent owns it; the launcher puts the view wherever the mount table shows the "
               "CTX tree";
      if (perm == "write")
        return "no enforcement point in v0: nothing grants it; the agent view is read-only and never shows a "
               "socket, and the supervisor takes only the agent's own calls and requests about its own children, so "
               "no agent writes another's control files or connects to its socket, with or without this rule";
      break;
    case Class::network:
      if (perm == "connect")
        return "enforced by the launcher at plan time: without it the sandbox gets a network namespace of its own "
               "with loopback only";
      break;
  }
  return {};
}

}  // namespace ctx::policy
