#include "ctx/container_probe.hpp"

#include <cerrno>
#include <sstream>

#include "base/path.hpp"
#include "base/result.hpp"
#include "cgroup/discover.hpp"

namespace ctx::helper {

namespace {

// The options that lift each blocker, Docker/Podman first, then the pod's
// securityContext (docs/containers.md explains each).
const char* const kSeccompFix =
    "Docker/Podman: --security-opt seccomp=/usr/share/ctx-agent-run/seccomp/ctx-agent-run.json (the package's "
    "profile, on the host); Kubernetes: securityContext.seccompProfile: {type: Localhost, localhostProfile: "
    "ctx-agent-run.json} (the file in /var/lib/kubelet/seccomp on the node)";
const char* const kAppArmorFix =
    "Docker/Podman: --security-opt apparmor=ctx-agent-run-container (the package's profile for containers, loaded "
    "on the host from /usr/share/ctx-agent-run/apparmor) or apparmor=unconfined; Kubernetes: "
    "securityContext.appArmorProfile: {type: Localhost, localhostProfile: ctx-agent-run-container} or {type: "
    "Unconfined} (docs/containers.md, AppArmor)";
const char* const kProcFix =
    "Podman: --security-opt unmask=ALL; Docker: --security-opt systempaths=unconfined; Kubernetes: "
    "securityContext.procMount: Unmasked (with hostUsers: false)";

std::string squeeze(const std::string& line) {
  std::istringstream in(line);
  std::string out, w;
  while (in >> w) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The value of `key:` in /proc/self/status, "" when absent.
std::string status_field(const std::string& status, const std::string& key) {
  std::istringstream in(status);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return squeeze(line.substr(key.size() + 1));
  return {};
}

// The engine a cgroup path of PID 1 names ("/docker/<id>",
// "/system.slice/docker-<id>.scope", "/kubepods/...", "/libpod_parent/...").
Engine engine_of_cgroup(const std::string& cgroup) {
  if (cgroup.find("kubepods") != std::string::npos) return Engine::kubernetes;
  if (cgroup.find("libpod") != std::string::npos) return Engine::podman;
  if (cgroup.find("docker") != std::string::npos) return Engine::docker;
  if (cgroup.find("crio") != std::string::npos) return Engine::cri_o;
  if (cgroup.find("containerd") != std::string::npos) return Engine::containerd;
  if (cgroup.find("/lxc") != std::string::npos) return Engine::lxc;
  return Engine::none;
}

Engine engine_of_var(const std::string& v) {
  if (v.empty()) return Engine::none;
  if (v == "podman") return Engine::podman;
  if (v == "docker") return Engine::docker;
  if (v == "lxc" || v == "lxc-libvirt") return Engine::lxc;
  if (v == "crio" || v == "cri-o") return Engine::cri_o;
  return Engine::other;
}

void find_engine(const ContainerFacts& f, ContainerView& v) {
  // A pod of any runtime has the service variables; its files say less.
  auto set = [&](Engine e, std::string why) {
    if (v.engine == Engine::none) {
      v.engine = e;
      v.evidence = std::move(why);
    }
  };
  if (!f.kubernetes_host.empty()) set(Engine::kubernetes, "KUBERNETES_SERVICE_HOST");
  if (f.containerenv) {
    bool crio = f.containerenv->find("cri-o") != std::string::npos;
    set(crio ? Engine::cri_o : Engine::podman, "/run/.containerenv");
  }
  if (f.dockerenv) set(Engine::docker, "/.dockerenv");
  if (Engine e = engine_of_var(f.container_var); e != Engine::none) set(e, "container=" + f.container_var);
  std::istringstream in(f.pid1_cgroup);
  for (std::string line; std::getline(in, line);)
    if (Engine e = engine_of_cgroup(line.substr(line.rfind(':') + 1)); e != Engine::none)
      set(e, "/proc/1/cgroup " + line.substr(line.rfind(':') + 1));
}

// The whole identity map ("0 0 4294967295") is the initial user namespace.
bool own_user_namespace(const std::string& uid_map) { return !uid_map.empty() && squeeze(uid_map) != "0 0 4294967295"; }

std::string join(const std::vector<std::string>& v, std::size_t most) {
  std::string out;
  for (std::size_t i = 0; i < v.size() && i < most; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > most) out += ", ... (" + std::to_string(v.size()) + " in all)";
  return out;
}

bool in_container(const ContainerView& c) { return c.engine != Engine::none; }

std::string userns_unshare_eperm(const UsernsSysctls& s, const ContainerView& c, bool root) {
  if (!root && s.unprivileged_userns_clone == "0")
    return "unprivileged user namespaces are disabled: sysctl -w kernel.unprivileged_userns_clone=1 (Debian)";
  if (c.seccomp == 2) {
    if (in_container(c))
      return std::string(
                 "the container's seccomp profile refuses unshare(CLONE_NEWUSER) (Seccomp: 2; the engine's "
                 "default allows it only with CAP_SYS_ADMIN): ") +
             kSeccompFix;
    return "a seccomp filter refuses unshare(CLONE_NEWUSER) (Seccomp: 2 in /proc/self/status; set by what started "
           "this shell): run outside that filter";
  }
  if (!c.apparmor.empty())
    return "the AppArmor profile " + c.apparmor + " refuses a new user namespace: " +
           (in_container(c) ? std::string(kAppArmorFix) : "load the package's profile (apparmor_parser -r /etc/apparmor.d/ctx-agent-run)");
  return "a new user namespace is refused (EPERM) though no seccomp filter or AppArmor profile confines this "
         "process: a security module (SELinux) or kernel.unprivileged_userns_clone=0";
}

}  // namespace

const char* to_string(Engine e) {
  switch (e) {
    case Engine::none: return "none";
    case Engine::docker: return "docker";
    case Engine::podman: return "podman";
    case Engine::cri_o: return "cri-o";
    case Engine::kubernetes: return "kubernetes";
    case Engine::containerd: return "containerd";
    case Engine::lxc: return "lxc";
    case Engine::other: return "a container";
  }
  return "?";
}

ContainerView read_container(const ContainerFacts& f) {
  ContainerView v;
  find_engine(f, v);
  v.own_userns = own_user_namespace(f.uid_map);
  v.uid_map = squeeze(first_line(f.uid_map));
  std::string sc = status_field(f.status, "Seccomp");
  if (sc == "0" || sc == "1" || sc == "2") v.seccomp = sc[0] - '0';
  std::string aa = squeeze(first_line(f.apparmor));
  if (!aa.empty() && aa != "unconfined") v.apparmor = aa;
  for (const auto& m : f.mounts) {
    // binfmt_misc sits on an empty directory, which the kernel's check
    // (fs/namespace.c, mnt_already_visible) lets through.
    if (path_is_at_or_under(m.target, "/proc") && m.target != "/proc" && m.fstype != "binfmt_misc")
      v.proc_masks.push_back(m.target);
  }
  v.cgroup = cgroup::v2_path(f.self_cgroup);
  return v;
}

std::string userns_remedy(const std::string& step, int code, const UsernsSysctls& s, const ContainerView& c,
                          bool root) {
  const std::string& max = s.max_user_namespaces;
  if (step == "unshare" && (code == ENOSPC || code == EUSERS)) {
    long n = max.empty() ? -1 : std::strtol(max.c_str(), nullptr, 10);
    if (n >= 0 && n < 1024) return "user.max_user_namespaces is " + max + ": sysctl -w user.max_user_namespaces=15000";
    // The limit is per user namespace and counted in every ancestor, and
    // nesting stops at 32 (kernel/user_namespace.c).
    return "user.max_user_namespaces is already " + max + " here: the limit reached is an outer one (" +
           (in_container(c) ? std::string("the host's or the node's: raise it there") : "a parent namespace's") +
           ") or the nesting depth of 32";
  }
  if (step == "unshare" && code == EPERM) return userns_unshare_eperm(s, c, root);
  if (step == "mount" && (code == EPERM || code == EACCES)) {
    if (s.restrict_unprivileged == "1")
      return "a new user namespace gets no capabilities (Ubuntu's kernel.apparmor_restrict_unprivileged_userns=1): "
             "load the package's profile (apparmor_parser -r /etc/apparmor.d/ctx-agent-run) or set the sysctl to 0";
    if (!c.apparmor.empty())
      return "the AppArmor profile " + c.apparmor + " refuses mount(2) even in a new user namespace: " +
             (in_container(c) ? std::string(kAppArmorFix) : "load the package's profile (apparmor_parser -r /etc/apparmor.d/ctx-agent-run)");
    if (c.seccomp == 2 && in_container(c))
      return std::string("the container's seccomp profile refuses mount(2): ") + kSeccompFix;
    return "a new user namespace cannot mount here: a security module or seccomp filter refuses it";
  }
  return "a new user namespace cannot be used here (" + step + " failed): see docs/containers.md";
}

std::vector<Finding> container_findings(const ContainerView& c, const LaunchProbes& probes) {
  std::vector<Finding> out;
  if (!in_container(c)) {
    out.push_back({Finding::Level::note,
                   "env ok      container: none seen (/run/.containerenv, /.dockerenv, container=, /proc/1/cgroup)"});
  } else {
    std::string t = std::string("env ok      container: ") + to_string(c.engine) + " (" + c.evidence + "); ";
    t += c.own_userns ? "its own user namespace (uid_map " + c.uid_map + ")" : "the host's user namespace";
    t += c.seccomp == 2 ? "; seccomp filter on" : c.seccomp == 0 ? "; seccomp off" : "; seccomp unknown";
    t += c.apparmor.empty() ? "; AppArmor unconfined or absent" : "; AppArmor " + c.apparmor;
    t += c.proc_masks.empty() ? "; /proc not masked" : "; /proc masked (" + join(c.proc_masks, 3) + ")";
    if (c.cgroup) t += *c.cgroup == "/" ? "; cgroup namespace of its own" : "; own cgroup " + *c.cgroup;
    out.push_back({Finding::Level::note, t});
  }
  const std::string skip = ": not probed: it needs a user namespace (see above)";
  const std::string what = "a fresh /proc in a new pid namespace";
  const auto& procfs = probes.procfs;
  if (!procfs) {
    out.push_back({Finding::Level::note, "env skip    " + what + skip});
  } else if (procfs->code == 0) {
    out.push_back({Finding::Level::note, "env ok      " + what});
  } else {
    std::string t = "env missing " + what + ": " + procfs->step + ": " + errno_name(procfs->code) + ": ";
    if (procfs->step == "mount proc" && !c.proc_masks.empty())
      t += "/proc is masked here (" + join(c.proc_masks, 3) +
           "), and the kernel mounts a new procfs in a user namespace only where one is fully visible: ";
    t += "every launch is refused (an agent never runs without its own /proc)";
    if (procfs->step == "mount proc") t += ": " + std::string(kProcFix);
    out.push_back({Finding::Level::error, t});
  }
  const std::string host = "a hostname of its own (a new UTS namespace)";
  const auto& hn = probes.hostname;
  if (!hn) {
    out.push_back({Finding::Level::note, "env skip    " + host + skip});
  } else if (hn->code == 0) {
    out.push_back({Finding::Level::note, "env ok      " + host});
  } else {
    std::string t = "env missing " + host + ": " + hn->step + ": " + errno_name(hn->code) + ": every launch is refused";
    if (hn->step == "sethostname" && hn->code == EPERM && c.seccomp == 2)
      t += std::string(
               ": the seccomp profile refuses sethostname (the engines' default allows it only with "
               "CAP_SYS_ADMIN): ") +
           (in_container(c) ? kSeccompFix : "run outside that filter");
    out.push_back({Finding::Level::error, t});
  }
  return out;
}

}  // namespace ctx::helper
