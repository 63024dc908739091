#include "ctx/explain.hpp"

#include <sys/stat.h>

#include <algorithm>

#include "base/path.hpp"
#include "base/text.hpp"
#include "sys/file.hpp"
#include "access/rules.hpp"

namespace ctx::helper {

namespace {

// The mount-table entry through which the sandbox sees `inner`: the
// deepest target at or above it.
const mountspec::Entry* covering(const agentdir::AgentSpec& s, const std::string& inner) {
  const mountspec::Entry* best = nullptr;
  for (const auto& m : s.mounts)
    if (path_is_at_or_under(inner, m.target) && (best == nullptr || path_depth(m.target) > path_depth(best->target)))
      best = &m;
  return best;
}

std::string mode_text(mode_t m) {
  char b[8];
  std::snprintf(b, sizeof b, "%04o", static_cast<unsigned>(m & 07777));
  return b;
}

}  // namespace

std::vector<Layer> explain_layers(const agentdir::AgentSpec& spec, const policy::Request& req) {
  std::vector<Layer> out;
  auto agent_policy = [&] {
    auto e = policy::explain(spec.policy, spec.subject(), req);
    out.push_back({"agent policy", e.allowed, e.text});
  };
  if (req.cls == policy::Class::session) {
    agent_policy();
    // Where the launcher asks this permission (docs/abi-policy.md, "session").
    const std::string& p = req.permission;
    std::string where = p == "write"
                            ? "ctx-agent-run --session " + req.object + " refuses to make the session without it"
                        : p == "resume" ? "ctx-agent-run --session " + req.object +
                                              " refuses to launch into the existing session without it (and write)"
                                        : "without it the launch masks session/" + req.object +
                                              " wherever the agent's mounts show its own session directory";
    out.push_back({"enforced at launch", out.back().allows, where});
    return out;
  }
  if (req.cls != policy::Class::tool) {
    agent_policy();
    return out;
  }
  const std::string& name = req.object;
  std::vector<std::string> dirs = spec.path;
  if (!spec.path_set) dirs = {"/ctx/tool", "/ctx/home/" + std::to_string(spec.owner) + "/tool"};
  std::string inner_dir, host_dir;
  sys::FileStat st;
  for (const auto& d : dirs) {
    const mountspec::Entry* m = covering(spec, d);
    if (m == nullptr) continue;
    std::string host = path_join(m->source, path_suffix(d, m->target));
    auto dfd = sys::open(sys::at_cwd, host, sys::Open::directory);
    if (!dfd) continue;
    auto s = sys::stat_at(dfd->get(), name);
    if (!s || !*s || !S_ISREG((*s)->mode) || ((*s)->mode & 0111) == 0) continue;
    inner_dir = d;
    host_dir = host;
    st = **s;
    break;
  }
  if (inner_dir.empty()) {
    out.push_back({"lookup", false, "no executable " + name + " in CTX_PATH as the sandbox sees it"});
    agent_policy();
    return out;
  }
  out.push_back({"lookup", true, inner_dir + "/" + name + " (host " + host_dir + "/" + name + ")"});

  const mountspec::Entry* m = covering(spec, inner_dir);
  out.push_back({"mount", !m->attrs.noexec,
                 std::string(m->attrs.noexec ? "noexec" : "exec allowed") + ": " + m->source + " -> " + m->target +
                     " (" + spec.name + ".d/mount:" + std::to_string(m->line) + ")"});

  // The agent's host ids: its own for iso uid, else the owner's.
  std::uint32_t uid = spec.iso == agentdir::Iso::uid ? spec.uid : spec.owner;
  bool in_group = st.gid == spec.gid || std::find(spec.groups.begin(), spec.groups.end(), st.gid) != spec.groups.end();
  mode_t bit = st.uid == uid ? S_IXUSR : in_group ? S_IXGRP : S_IXOTH;
  bool exec = (st.mode & bit) != 0;
  out.push_back({"mode bits", exec,
                 std::string(exec ? "executable" : "not executable") + " for uid " + std::to_string(uid) + " (mode " +
                     mode_text(st.mode) + ", owner " + std::to_string(st.uid) + ":" + std::to_string(st.gid) + ")"});
  agent_policy();

  auto dfd = sys::open(sys::at_cwd, host_dir, sys::Open::directory);
  auto td = dfd ? sys::open(dfd->get(), name + ".d", sys::Open::directory | sys::Open::no_follow)
                : Result<UniqueFd>(fail(ENOENT, ""));
  auto pf = td ? sys::read_small_file(td->get(), "policy", kMaxControlFileSize)
               : Result<std::optional<sys::FileContent>>(std::nullopt);
  if (!pf) {
    out.push_back({"tool policy", false, name + ".d/policy: " + pf.error().msg});
  } else if (!*pf) {
    out.push_back({"tool policy", true, "none (the tool adds no restriction)"});
  } else {
    auto tp = policy::Policy::parse(name + ".d/policy", (*pf)->data);
    if (!tp) {
      out.push_back({"tool policy", false, tp.error().msg});
    } else {
      // The agent's type and, for an owned child, every ancestor's
      // (docs/abi.md "Attenuation (children)"), as a call decides it.
      access::Viewer v = access::viewer_for(spec);
      auto refused = access::own_policy_refuses(v, *tp, policy::Class::tool, name, "execute");
      auto e = policy::explain(*tp, spec.subject(), req);
      std::string also;
      for (const auto& a : spec.ancestor_types) also += (also.empty() ? "" : ", ") + a;
      if (!also.empty()) also = " (and the ancestors' types: " + also + ")";
      out.push_back({"tool policy", !refused,
                     !refused ? "allowed by " + name + ".d/policy line " + std::to_string(e.rule->line) + also
                              : "no " + access::own_policy_gap(v, *refused, policy::Class::tool, name, "execute") +
                                    " in " + name + ".d/policy"});
    }
  }
  return out;
}

}  // namespace ctx::helper
