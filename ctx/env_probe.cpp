#include "ctx/env_probe.hpp"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "cgroup/discover.hpp"
#include "ctx/container_probe.hpp"
#include "ctx/kernel_probe.hpp"
#include "sys/file.hpp"
#include "sys/identity.hpp"
#include "sys/mountinfo.hpp"
#include "sys/probe.hpp"

namespace ctx::helper {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// `container=` of a NUL-separated environment, "" when absent.
std::string container_var(const std::string& environ) {
  for (std::size_t at = 0; at < environ.size();) {
    std::size_t end = environ.find('\0', at);
    if (end == std::string::npos) end = environ.size();
    if (environ.compare(at, 10, "container=") == 0) return environ.substr(at + 10, end - at - 10);
    at = end + 1;
  }
  return {};
}

ContainerFacts read_container_facts() {
  ContainerFacts f;
  if (sys::open(sys::at_cwd, "/run/.containerenv", sys::Open::path_only))
    f.containerenv = sys::read_or_empty("/run", ".containerenv");
  f.dockerenv = static_cast<bool>(sys::open(sys::at_cwd, "/.dockerenv", sys::Open::path_only));
  f.container_var = container_var(sys::read_or_empty("/proc/1", "environ"));
  if (const char* v = std::getenv("container"); f.container_var.empty() && v) f.container_var = v;
  if (const char* k = std::getenv("KUBERNETES_SERVICE_HOST")) f.kubernetes_host = k;
  f.pid1_cgroup = sys::read_or_empty("/proc/1", "cgroup");
  f.self_cgroup = sys::read_or_empty("/proc/self", "cgroup");
  f.uid_map = sys::read_or_empty("/proc/self", "uid_map");
  f.status = sys::read_or_empty("/proc/self", "status");
  f.apparmor = sys::read_or_empty("/proc/self/attr/apparmor", "current");
  if (f.apparmor.empty()) f.apparmor = sys::read_or_empty("/proc/self/attr", "current");
  if (auto t = sys::mount_table()) f.mounts = std::move(*t);
  return f;
}

}  // namespace

std::vector<Finding> probe_environment() {
  std::vector<Finding> out;
  auto ok = [&](const std::string& s) { out.push_back({Finding::Level::note, "env ok      " + s}); };
  auto warn = [&](const std::string& s) { out.push_back({Finding::Level::warning, "env: " + s}); };
  const bool root = ::geteuid() == 0;
  const std::string uid = std::to_string(::geteuid());

  const ContainerView where = read_container(read_container_facts());
  const auto facilities = probe_kernel_facilities(where);
  for (const auto& r : facilities) out.push_back(facility_finding(r));
  LaunchProbes probes;
  if (root || facilities.front().state == FacilityResult::State::ok) {
    auto outcome = [](const Result<void>& r) {
      return r ? ProbeOutcome{} : ProbeOutcome{r.error().reason, r.error().code};
    };
    probes.procfs = outcome(sys::probe_fresh_procfs());
    probes.hostname = outcome(sys::probe_own_hostname());
  }
  for (auto& f : container_findings(where, probes)) out.push_back(std::move(f));

  auto table = sys::mount_table_of(sys::kCgroup2);
  auto mount = table ? cgroup::find_cgroup2(*table) : std::nullopt;
  if (!table) {
    warn(table.error().msg + ": the cgroup2 mount cannot be found: agents run without a cgroup");
  } else if (!mount) {
    warn("no cgroup2 file system is mounted: agents run without a cgroup (mount cgroup2, or boot with systemd)");
  } else {
    std::string own = cgroup::v2_path(sys::read_or_empty("/proc/self", "cgroup")).value_or("/");
    auto dir = cgroup::dir_of(*mount, own);
    auto fd = dir ? sys::open(sys::at_cwd, *dir, sys::Open::directory) : Result<UniqueFd>(fail(ENOENT, "no dir"));
    bool writable = fd && sys::writable_at(fd->get(), "") && sys::writable_at(fd->get(), "cgroup.procs");
    if (root) {
      ok("cgroup v2 at " + mount->mount_point + " (root: agents go to cortexfs/user-<uid>)");
    } else if (writable) {
      ok("cgroup v2 at " + mount->mount_point + ", own cgroup " + own + " delegated");
    } else {
      warn(
          "cgroup v2 at " + mount->mount_point + " but the own cgroup " + own + " is not delegated to uid " + uid +
          ": run under systemd-run --user --scope -p Delegate=yes (or a unit with Delegate=yes), or pass --cgroup-base");
    }
    std::string ctrl =
        trim(sys::read_or_empty(*dir == mount->mount_point ? mount->mount_point : *dir, "cgroup.controllers"));
    if (ctrl.find("memory") == std::string::npos || ctrl.find("pids") == std::string::npos)
      warn("cgroup controllers here: " + (ctrl.empty() ? std::string("none") : ctrl) +
           "; limits need memory, pids and cpu (enabled by systemd with Delegate=yes, or by cgroup.subtree_control)");
  }

  if (!root) {
    auto bin = sys::open(sys::at_cwd, "/usr/bin", sys::Open::directory);
    auto helper = bin ? sys::stat_at(bin->get(), "newuidmap") : Result<std::optional<sys::FileStat>>(std::nullopt);
    std::string name;
    if (auto me = sys::lookup_user(::geteuid()); me && *me) name = (*me)->name;
    std::string subuid = sys::read_or_empty("/etc", "subuid");
    bool delegated =
        (!name.empty() && subuid.find(name + ":") != std::string::npos) || subuid.find(uid + ":") != std::string::npos;
    if (!helper || !*helper) {
      warn("newuidmap is missing: iso uid needs it for unprivileged users: apt-get install uidmap");
    } else if (!delegated) {
      warn("no /etc/subuid range for " + (name.empty() ? uid : name) +
           ": iso uid needs one: usermod --add-subuids "
           "100000-165535 --add-subgids 100000-165535 " +
           (name.empty() ? uid : name));
    } else {
      ok("newuidmap and a /etc/subuid range (iso uid)");
    }
  }
  return out;
}

}  // namespace ctx::helper
