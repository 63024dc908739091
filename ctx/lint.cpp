#include "ctx/lint.hpp"

#include <algorithm>

#include "base/path.hpp"

namespace ctx::helper {

std::string_view to_string(Risk r) {
  switch (r) {
    case Risk::high: return "high";
    case Risk::medium: return "medium";
    case Risk::low: return "low";
  }
  return "?";
}

namespace {

bool container_socket(const std::string& p) {
  for (const char* s :
       {"/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", "/var/run/podman/podman.sock",
        "/run/containerd/containerd.sock", "/var/run/crio/crio.sock", "/run/crio/crio.sock"})
    if (p == s) return true;
  return false;
}

bool sensitive_rw(const std::string& source, const std::string& ctx_root) {
  return source == ctx_root || source == "/" || source == "/home" || path_is_at_or_under(source, "/etc") ||
         source == "/root" || (path_is_at_or_under(source, "/home") && path_depth(source) == 2);
}

// A source a root launch refuses for its file system (it shows devices,
// processes or kernel state), as this machine's mount table says.
bool refused_fs_source(const mountspec::Entry& m, const SourceTypes& types) {
  auto t = types.find(m.line);
  return t != types.end() && t->second.root_refuses;
}

// A table line's risk: what it shows, and whether the agent may write it.
Risk mount_risk(const mountspec::Entry& m, const std::string& ctx_root, const SourceTypes& types) {
  bool rw = !m.attrs.rdonly;
  if (refused_fs_source(m, types) || container_socket(m.source) || (rw && sensitive_rw(m.source, ctx_root)))
    return Risk::high;
  return rw ? Risk::medium : Risk::low;
}

}  // namespace

std::vector<Grant> grants_by_risk(const agentdir::AgentSpec& spec, const SourceTypes& types) {
  std::vector<Grant> out;
  const std::string subject = spec.subject();
  for (const auto& r : spec.policy.rules()) {
    if (subject.empty() || r.subject != subject) continue;  // inert: grants nothing
    Grant g;
    g.what = std::string(policy::to_string(r.cls)) + ":" + r.object + " " + r.permission;
    g.where = spec.name + ".d/policy:" + std::to_string(r.line);
    using policy::Class;
    if ((r.cls == Class::tool && r.object == "shell.exec") || r.cls == Class::network ||
        (r.cls == Class::agent && r.permission == "create")) {
      g.risk = Risk::high;
    } else if ((r.cls == Class::tool && r.object == "fs.write") ||
               (r.cls == Class::shared && r.permission == "write")) {
      g.risk = Risk::medium;
    } else if (r.cls == Class::mount) {
      // A mount rule is as risky as what it allows of the lines ranked
      // below: write, a rw line with its target; read, such a line as if
      // it were read-only.
      for (auto m : spec.mounts) {
        if (m.target != r.object || (r.permission == "write" && m.attrs.rdonly)) continue;
        if (r.permission == "read") m.attrs.rdonly = true;
        g.risk = std::min(g.risk, mount_risk(m, spec.ctx_root, types));
      }
    }
    out.push_back(g);
  }
  for (const auto& m : spec.mounts) {
    bool rw = !m.attrs.rdonly;
    Grant g;
    g.what = std::string(rw ? "rw" : "ro") + " mount " + m.source + " -> " + m.target;
    g.where = spec.name + ".d/mount:" + std::to_string(m.line);
    g.risk = mount_risk(m, spec.ctx_root, types);
    if (auto t = types.find(m.line); t != types.end()) {
      const SourceFs& fs = t->second;
      g.what += " on " + fs.fstype + (fs.holds.empty() ? "" : ", holding " + fs.holds);
      if (fs.root_refuses) g.what += " (not a file system of plain files: a root launch refuses it)";
    }
    out.push_back(g);
  }
  std::stable_sort(out.begin(), out.end(), [](const Grant& a, const Grant& b) { return a.risk < b.risk; });
  return out;
}

}  // namespace ctx::helper
