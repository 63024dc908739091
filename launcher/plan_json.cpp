#include "launcher/plan_json.hpp"

#include <sched.h>

namespace ctx::launcher {

namespace {

nlohmann::json map_json(const std::vector<sys::IdMapLine>& m) {
  auto a = nlohmann::json::array();
  for (const auto& l : m) a.push_back({{"inner", l.inner}, {"outer", l.outer}, {"count", l.count}});
  return a;
}

nlohmann::json ns_names(std::uint64_t flags) {
  auto a = nlohmann::json::array();
  const std::pair<std::uint64_t, const char*> names[] = {
      {CLONE_NEWUSER, "user"}, {CLONE_NEWNS, "mnt"}, {CLONE_NEWPID, "pid"},      {CLONE_NEWNET, "net"},
      {CLONE_NEWIPC, "ipc"},   {CLONE_NEWUTS, "uts"}, {CLONE_NEWCGROUP, "cgroup"},
  };
  for (auto [bit, name] : names)
    if (flags & bit) a.push_back(name);
  return a;
}

}  // namespace

nlohmann::json plan_to_json(const LaunchPlan& p) {
  using nlohmann::json;
  const IdPlan& i = p.ids;
  json ids{
      {"privileged_caller", i.privileged},
      {"user_namespace", i.user_ns},
      {"user_namespace_after_mounts", i.user_ns_after_mounts},
      {"maps_via_newuidmap", i.map_via_helpers},
      {"setgroups", i.deny_setgroups ? "deny" : "allow"},
      {"uid_map", map_json(i.uid_map)},
      {"gid_map", map_json(i.gid_map)},
      {"inside", {{"uid", i.uid}, {"gid", i.gid}, {"groups", i.groups}}},
      {"outside", {{"uid", i.host_uid}, {"gid", i.host_gid}, {"groups", i.host_groups}}},
      {"mount_sources_opened_as", {{"uid", i.fs.uid}, {"gid", i.fs.gid}, {"groups", i.fs.groups}}},
  };
  auto mounts = json::array();
  for (const auto& b : p.binds) {
    auto flags = json::array();
    flags.push_back(b.rdonly ? "ro" : "rw");
    if (b.nosuid) flags.push_back("nosuid");
    if (b.nodev) flags.push_back("nodev");
    if (b.noexec) flags.push_back("noexec");
    json m{{"type", b.recursive ? "rbind" : "bind"}, {"source", b.source}, {"target", b.target}, {"flags", flags},
           {"line", b.line}};
    if (!b.beneath.empty()) m["beneath"] = {{"dir", b.beneath}, {"no_symlinks", true}, {"no_xdev", b.beneath_no_xdev}};
    mounts.push_back(std::move(m));
  }
  for (const auto& m : p.masks)
    mounts.push_back({{"type", "mask"}, {"source", "tmpfs"}, {"target", m.target}, {"flags", {"ro", "nosuid", "nodev", "noexec"}}, {"why", m.why}});
  for (const auto& v : p.tool_views) {
    mounts.push_back({{"type", "tool_view"}, {"source", v.host_dir}, {"target", v.target}, {"show", v.show},
                      {"flags", {"ro", "nosuid", "nodev", "noexec"}}});
  }
  mounts.push_back({{"type", "proc"}, {"target", "/proc"}, {"flags", {"rw", "nosuid", "nodev", "noexec"}}});
  mounts.push_back({{"type", "dev"}, {"target", "/dev"},
                    {"nodes", {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm"}},
                    {"flags", {"ro", "nosuid", "noexec"}}});
  mounts.push_back({{"type", "notify"}, {"target", kNotifyDir}, {"flags", {"ro", "nosuid", "nodev", "noexec"}}});
  return json{
      {"agent", p.name},
      {"session", p.session},
      {"ctx_root", p.ctx_root},
      {"ids", ids},
      {"namespaces", ns_names(p.clone_flags)},
      {"namespaces_after_mounts", ns_names(static_cast<std::uint64_t>(p.unshare_flags))},
      {"network", p.net_ns ? "loopback" : "host"},
      {"hostname", p.hostname},
      {"root", p.root},
      {"mounts", mounts},
      {"cwd", p.cwd},
      {"env", p.env},
      {"argv", p.argv},
      {"notify_socket", p.notify_target},
      {"terminal", p.terminal ? json("a pty of the sandbox's own devpts, relayed by the supervisor") : json(nullptr)},
      {"limits", p.limits ? json{{"memory.max", p.limits->memory_max.value_or("")},
                                 {"pids.max", p.limits->pids_max.value_or("")},
                                 {"cpu.max", p.limits->cpu_max.value_or("")}}
                          : json(nullptr)},
      {"bounds", {{"dev_shm_size", p.shm_size}, {"rlimit_nproc", p.nproc}}},
      {"hardening", {"capabilities dropped", "no_new_privs", "setsid", "fds 0-2 + LISTEN_FDS only", "pivot_root + detach",
                     "seccomp deny-list (docs/seccomp.md)", "Landlock scope: abstract unix sockets and signals"}},
  };
}

}  // namespace ctx::launcher
