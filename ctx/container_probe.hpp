// `ctx check --env` inside a container: which engine runs it and what the
// engine refuses, decided from the contents of a few files (pure: the
// caller reads them), each blocker with the Docker/Podman option and the
// Kubernetes securityContext field that lifts it (docs/containers.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ctx/check.hpp"
#include "sys/mountinfo.hpp"

namespace ctx::helper {

/// What the caller read, as it was. Missing files are empty strings.
struct ContainerFacts {
  std::optional<std::string> containerenv;  ///< /run/.containerenv (Podman, CRI-O), when it exists
  bool dockerenv = false;                   ///< /.dockerenv exists (Docker)
  std::string container_var;                ///< `container=` of PID 1's environment (systemd's convention)
  std::string kubernetes_host;              ///< KUBERNETES_SERVICE_HOST (set in every Kubernetes pod)
  std::string pid1_cgroup;                  ///< /proc/1/cgroup
  std::string self_cgroup;                  ///< /proc/self/cgroup
  std::string uid_map;                      ///< /proc/self/uid_map
  std::string status;                       ///< /proc/self/status
  std::string apparmor;                     ///< /proc/self/attr/apparmor/current, else /proc/self/attr/current
  std::vector<sys::MountEntry> mounts;      ///< the mount table (sys::mount_table())
};

/// The container engine, as far as the files tell.
enum class Engine { none, docker, podman, cri_o, kubernetes, containerd, lxc, other };

/// "none", "docker", "podman", "cri-o", "kubernetes", "containerd", "lxc", "a container".
const char* to_string(Engine e);

/// What read_container() made of the facts.
struct ContainerView {
  Engine engine = Engine::none;
  std::string evidence;                 ///< the file or value that told, "" for none
  bool own_userns = false;              ///< uid_map is not the whole identity map of the initial namespace
  std::string uid_map;                  ///< its first line, spaces squeezed ("0 1000 1")
  int seccomp = -1;                     ///< Seccomp: of /proc/self/status (0 off, 1 strict, 2 filter), -1 unknown
  std::string apparmor;                 ///< the confining profile with its mode, "" when unconfined or none
  std::vector<std::string> proc_masks;  ///< mount points below /proc that cover part of it, in table order
  std::optional<std::string> cgroup;    ///< the own cgroup v2 path, when /proc/self/cgroup has one
};

/// Reads the facts. Pure.
ContainerView read_container(const ContainerFacts& f);

/// The sysctls a user namespace depends on, as read ("" when absent).
struct UsernsSysctls {
  std::string max_user_namespaces;        ///< user.max_user_namespaces
  std::string unprivileged_userns_clone;  ///< kernel.unprivileged_userns_clone (Debian's, older kernels)
  std::string restrict_unprivileged;      ///< kernel.apparmor_restrict_unprivileged_userns (Ubuntu's)
};

/// Why a user namespace probe failed at `step` ("unshare", "id_map",
/// "mount") with `code`, and what to change: the real cause, never the
/// sysctl that is already at its limit. Pure.
std::string userns_remedy(const std::string& step, int code, const UsernsSysctls& s, const ContainerView& c, bool root);

/// A probe's result: the step that failed and its errno, or code 0.
struct ProbeOutcome {
  std::string step;
  int code = 0;
};

/// What every launch does that a container may refuse, probed for real
/// (nullopt: not probed, for want of a user namespace).
struct LaunchProbes {
  std::optional<ProbeOutcome> procfs;    ///< a fresh /proc in a new pid namespace
  std::optional<ProbeOutcome> hostname;  ///< sethostname in a new UTS namespace
};

/// The findings of `ctx check --env` about the container (one note saying
/// what was seen, "none seen" outside one), then one per probe: ok, or an
/// error naming the blocker and the option that lifts it (every launch is
/// refused there). Pure.
std::vector<Finding> container_findings(const ContainerView& c, const LaunchProbes& probes);

}  // namespace ctx::helper
