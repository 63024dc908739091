#include "ctx/lint.hpp"

#include <algorithm>

#include "base/path.hpp"

namespace ctx::helper {

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_d = 3;
  for (const auto& c : candidates) {
    std::size_t d = edit_distance(word, c);
    if (d < best_d) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

std::string_view to_string(Risk r) {
  switch (r) {
    case Risk::high:
      return "high";
    case Risk::medium:
      return "medium";
    case Risk::low:
      return "low";
  }
  return "?";
}

namespace {

bool container_socket(const std::string& p) {
  for (const char* s : {"/var/run/docker.sock", "/run/docker.sock", "/run/podman/podman.sock", "/var/run/podman/podman.sock",
                        "/run/containerd/containerd.sock", "/var/run/crio/crio.sock", "/run/crio/crio.sock"})
    if (p == s) return true;
  return false;
}

bool sensitive_rw(const std::string& source, const std::string& ctx_root) {
  return source == ctx_root || source == "/" || source == "/home" || path_is_at_or_under(source, "/etc") ||
         source == "/root" || (path_is_at_or_under(source, "/home") && path_depth(source) == 2);
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
    } else if ((r.cls == Class::tool && r.object == "fs.write") || (r.cls == Class::shared && r.permission == "write") ||
               (r.cls == Class::mount && r.permission == "write")) {
      g.risk = Risk::medium;
    }
    out.push_back(g);
  }
  for (const auto& m : spec.mounts) {
    bool rw = m.mode == mountspec::Mode::rw;
    Grant g;
    g.what = std::string(rw ? "rw" : "ro") + " mount " + m.source + " -> " + m.target;
    g.where = spec.name + ".d/mount:" + std::to_string(m.line);
    if (container_socket(m.source) || (rw && sensitive_rw(m.source, spec.ctx_root))) {
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
