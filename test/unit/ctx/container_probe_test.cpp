// `ctx check --env` in a container: the engine and its blockers read from
// file contents as a container shows them, each with its exact remedy.
#include <catch2/catch.hpp>

#include <cerrno>
#include <string>

#include "ctx/container_probe.hpp"

using ctx::helper::ContainerFacts;
using ctx::helper::ContainerView;
using ctx::helper::Engine;
using ctx::helper::Finding;
using ctx::helper::LaunchProbes;
using ctx::helper::ProbeOutcome;
using ctx::helper::UsernsSysctls;

namespace {

const char* const kHostMap = "         0          0 4294967295\n";

// What rootful Podman shows with its defaults (runc, cgroup v1 host).
ContainerFacts podman_defaults() {
  ContainerFacts f;
  f.containerenv = "";
  f.pid1_cgroup = "0::/libpod_parent/libpod-2e20\n";
  f.self_cgroup = "1:cpu:/libpod_parent/libpod-2e20\n0::/libpod_parent/libpod-2e20\n";
  f.uid_map = kHostMap;
  f.status = "Name:\tcat\nSeccomp:\t2\nSeccomp_filters:\t1\n";
  f.mounts = {{"/", "overlay", "/"},
              {"/proc", "proc", "/"},
              {"/proc/bus", "proc", "/bus"},
              {"/proc/fs", "proc", "/fs"},
              {"/proc/irq", "proc", "/irq"},
              {"/proc/sys", "proc", "/sys"},
              {"/proc/acpi", "tmpfs", "/"},
              {"/proc/keys", "tmpfs", "/null"},
              {"/proc/timer_list", "tmpfs", "/null"},
              {"/proc/sys/fs/binfmt_misc", "binfmt_misc", "/"}};
  return f;
}

}  // namespace

TEST_CASE("container: the engine is read from its files, first the pod's, then the engine's own", "[unit]") {
  ContainerFacts f;
  f.uid_map = kHostMap;
  CHECK(read_container(f).engine == Engine::none);
  f.pid1_cgroup = "0::/system.slice/docker-4f1e.scope\n";
  ContainerView v = read_container(f);
  CHECK(v.engine == Engine::docker);
  CHECK(v.evidence == "/proc/1/cgroup /system.slice/docker-4f1e.scope");
  f.container_var = "podman";
  CHECK(read_container(f).evidence == "container=podman");
  f.dockerenv = true;
  CHECK(read_container(f).evidence == "/.dockerenv");
  f.containerenv = "engine=\"cri-o\"\n";
  CHECK(read_container(f).engine == Engine::cri_o);
  f.containerenv = "engine=\"podman-4.3.1\"\n";
  CHECK(read_container(f).engine == Engine::podman);
  f.kubernetes_host = "10.96.0.1";
  v = read_container(f);
  CHECK(v.engine == Engine::kubernetes);
  CHECK(v.evidence == "KUBERNETES_SERVICE_HOST");
  f = {};
  f.pid1_cgroup = "0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-9a.scope\n";
  CHECK(read_container(f).engine == Engine::kubernetes);
}

TEST_CASE("container: user namespace, seccomp, AppArmor, masked /proc and cgroup", "[unit]") {
  ContainerView v = read_container(podman_defaults());
  CHECK(v.engine == Engine::podman);
  CHECK_FALSE(v.own_userns);
  CHECK(v.seccomp == 2);
  CHECK(v.apparmor.empty());
  CHECK(v.proc_masks == std::vector<std::string>{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/acpi",
                                                 "/proc/keys", "/proc/timer_list"});
  CHECK(v.cgroup == "/libpod_parent/libpod-2e20");

  ContainerFacts f;
  f.uid_map = "         0       1000          1\n         1     100000      65536\n";
  f.status = "Seccomp:\t0\n";
  f.apparmor = "containers-default-0.50.0 (enforce)\n";
  f.self_cgroup = "0::/\n";
  v = read_container(f);
  CHECK(v.own_userns);
  CHECK(v.uid_map == "0 1000 1");
  CHECK(v.seccomp == 0);
  CHECK(v.apparmor == "containers-default-0.50.0 (enforce)");
  CHECK(v.proc_masks.empty());
  CHECK(v.cgroup == "/");
  f.apparmor = "unconfined\n";
  f.status = "Name:\tx\n";
  v = read_container(f);
  CHECK(v.apparmor.empty());
  CHECK(v.seccomp == -1);
}

TEST_CASE("container: the findings say what was seen and refuse a launch without a fresh /proc", "[unit]") {
  ContainerView v = read_container(podman_defaults());
  auto out = container_findings(v, LaunchProbes{ProbeOutcome{"mount proc", EPERM}, ProbeOutcome{}});
  REQUIRE(out.size() == 3);
  CHECK(out[0].level == Finding::Level::note);
  CHECK(out[0].text ==
        "env ok      container: podman (/run/.containerenv); the host's user namespace; seccomp filter on; AppArmor "
        "unconfined or absent; /proc masked (/proc/bus, /proc/fs, /proc/irq, ... (7 in all)); own cgroup "
        "/libpod_parent/libpod-2e20");
  CHECK(out[1].level == Finding::Level::error);
  CHECK(out[1].text ==
        "env missing a fresh /proc in a new pid namespace: mount proc: EPERM: /proc is masked here (/proc/bus, "
        "/proc/fs, /proc/irq, ... (7 in all)), and the kernel mounts a new procfs in a user namespace only where one "
        "is fully visible: every launch is refused (an agent never runs without its own /proc): Podman: "
        "--security-opt unmask=ALL; Docker: --security-opt systempaths=unconfined; Kubernetes: "
        "securityContext.procMount: Unmasked (with hostUsers: false)");

  CHECK(out[2].text == "env ok      a hostname of its own (a new UTS namespace)");

  out = container_findings(v, LaunchProbes{ProbeOutcome{}, ProbeOutcome{"sethostname", EPERM}});
  REQUIRE(out.size() == 3);
  CHECK(out[1].text == "env ok      a fresh /proc in a new pid namespace");
  CHECK(out[1].level == Finding::Level::note);
  CHECK(out[2].level == Finding::Level::error);
  CHECK(out[2].text ==
        "env missing a hostname of its own (a new UTS namespace): sethostname: EPERM: every launch is refused: the "
        "seccomp profile refuses sethostname (the engines' default allows it only with CAP_SYS_ADMIN): "
        "Docker/Podman: --security-opt seccomp=/usr/share/ctx-agent-run/seccomp/ctx-agent-run.json (the package's "
        "profile, on the host); Kubernetes: securityContext.seccompProfile: {type: Localhost, localhostProfile: "
        "ctx-agent-run.json} (the file in /var/lib/kubelet/seccomp on the node)");
  out = container_findings(v, LaunchProbes{});
  CHECK(out[1].text ==
        "env skip    a fresh /proc in a new pid namespace: not probed: it needs a user namespace (see "
        "above)");
  CHECK(out[2].text ==
        "env skip    a hostname of its own (a new UTS namespace): not probed: it needs a user "
        "namespace (see above)");

  ContainerFacts none;
  none.uid_map = kHostMap;
  out = container_findings(read_container(none), LaunchProbes{ProbeOutcome{"unshare", EPERM}, ProbeOutcome{}});
  CHECK(out[0].text ==
        "env ok      container: none seen (/run/.containerenv, /.dockerenv, container=, /proc/1/cgroup)");
  CHECK(out[1].text ==
        "env missing a fresh /proc in a new pid namespace: unshare: EPERM: every launch is refused (an agent never "
        "runs without its own /proc)");
}

TEST_CASE("container: a refused user namespace names the real cause, not a sysctl already at its limit", "[unit]") {
  ContainerFacts docker;
  docker.dockerenv = true;
  docker.uid_map = kHostMap;
  docker.status = "Seccomp:\t2\n";
  ContainerView d = read_container(docker);
  UsernsSysctls at_max{"2147483647", "", ""};
  CHECK(userns_remedy("unshare", EPERM, at_max, d, false) ==
        "the container's seccomp profile refuses unshare(CLONE_NEWUSER) (Seccomp: 2; the engine's default allows it "
        "only with CAP_SYS_ADMIN): Docker/Podman: --security-opt "
        "seccomp=/usr/share/ctx-agent-run/seccomp/ctx-agent-run.json (the package's profile, on the host); "
        "Kubernetes: securityContext.seccompProfile: {type: Localhost, localhostProfile: ctx-agent-run.json} (the "
        "file in /var/lib/kubelet/seccomp on the node)");
  CHECK(userns_remedy("unshare", ENOSPC, at_max, d, false) ==
        "user.max_user_namespaces is already 2147483647 here: the limit reached is an outer one (the host's or the "
        "node's: raise it there) or the nesting depth of 32");
  CHECK(userns_remedy("unshare", ENOSPC, {"0", "", ""}, d, false) ==
        "user.max_user_namespaces is 0: sysctl -w user.max_user_namespaces=15000");

  ContainerFacts host;
  host.uid_map = kHostMap;
  host.status = "Seccomp:\t0\n";
  ContainerView h = read_container(host);
  CHECK(userns_remedy("unshare", EPERM, {"2147483647", "0", ""}, h, false) ==
        "unprivileged user namespaces are disabled: sysctl -w kernel.unprivileged_userns_clone=1 (Debian)");
  CHECK(userns_remedy("unshare", EPERM, at_max, h, false) ==
        "a new user namespace is refused (EPERM) though no seccomp filter or AppArmor profile confines this process: "
        "a security module (SELinux) or kernel.unprivileged_userns_clone=0");
  CHECK(userns_remedy("mount", EACCES, {"2147483647", "", "1"}, h, false) ==
        "a new user namespace gets no capabilities (Ubuntu's kernel.apparmor_restrict_unprivileged_userns=1): load "
        "the package's profile (apparmor_parser -r /etc/apparmor.d/ctx-agent-run) or set the sysctl to 0");

  docker.status = "Seccomp:\t0\n";
  docker.apparmor = "docker-default (enforce)\n";
  CHECK(userns_remedy("mount", EACCES, {"2147483647", "", "0"}, read_container(docker), false) ==
        "the AppArmor profile docker-default (enforce) refuses mount(2) even in a new user namespace: Docker/Podman: "
        "--security-opt apparmor=ctx-agent-run-container (the package's profile for containers, loaded on the host "
        "from /usr/share/ctx-agent-run/apparmor) or apparmor=unconfined; Kubernetes: securityContext.appArmorProfile: "
        "{type: Localhost, localhostProfile: ctx-agent-run-container} or {type: Unconfined} (docs/containers.md, "
        "AppArmor)");
}
