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

// Sources that bring the host's processes and kernel state: /proc and /sys
// (debugfs, tracefs, securityfs and cgroup live below it), or an rbind of
// the whole tree, which carries them along.
bool pseudo_fs_source(const mountspec::Entry& m) {
  return path_is_at_or_under(m.source, "/proc") || path_is_at_or_under(m.source, "/sys") ||
         (m.source == "/" && m.kind == mountspec::Kind::rbind);
}

}  // namespace

std::vector<Grant> grants_by_risk(const agentdir::AgentSpec& spec) {
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
               (r.cls == Class::shared && r.permission == "write") ||
               (r.cls == Class::mount && r.permission == "write")) {
      g.risk = Risk::medium;
    }
    out.push_back(g);
  }
  for (const auto& m : spec.mounts) {
    bool rw = !m.attrs.rdonly;
    Grant g;
    g.what = std::string(rw ? "rw" : "ro") + " mount " + m.source + " -> " + m.target;
    g.where = spec.name + ".d/mount:" + std::to_string(m.line);
    if (pseudo_fs_source(m)) {
      g.risk = Risk::high;
      g.what += " (a pseudo file system: the host's processes and kernel state; a root launch refuses it)";
    } else if (container_socket(m.source) || (rw && sensitive_rw(m.source, spec.ctx_root))) {
      g.risk = Risk::high;
    } else if (rw) {
      g.risk = Risk::medium;
    }
    out.push_back(g);
  }
  std::stable_sort(out.begin(), out.end(), [](const Grant& a, const Grant& b) { return a.risk < b.risk; });
  return out;
}

}  // namespace ctx::helper
