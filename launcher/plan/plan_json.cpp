#include "launcher/plan/plan_json.hpp"

#include <sched.h>

#include "mountspec/table.hpp"

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
      {CLONE_NEWUSER, "user"}, {CLONE_NEWNS, "mnt"},  {CLONE_NEWPID, "pid"},       {CLONE_NEWNET, "net"},
      {CLONE_NEWIPC, "ipc"},   {CLONE_NEWUTS, "uts"}, {CLONE_NEWCGROUP, "cgroup"},
  };
  for (auto [bit, name] : names)
    if (flags & bit) a.push_back(name);
  return a;
}

nlohmann::json attrs_json(const mountspec::Attrs& a) {
  auto flags = nlohmann::json::array();
  flags.push_back(mountspec::mode_name(a));
  if (a.nosuid) flags.push_back("nosuid");
  if (a.nodev) flags.push_back("nodev");
  if (a.noexec) flags.push_back("noexec");
  return flags;
}

nlohmann::json beneath_json(const std::string& dir, bool no_xdev) {
  return {{"dir", dir}, {"no_symlinks", true}, {"no_xdev", no_xdev}};
}

// What a static view's step makes: its tmpfs, and each kind of bind it
// may make at launch with its flags.
nlohmann::json static_json(const mountspec::StaticBuild& b) {
  using mountspec::StaticBindKind;
  auto binds = nlohmann::json::object();
  for (auto k : {StaticBindKind::file, StaticBindKind::file_no_exec, StaticBindKind::directory, StaticBindKind::tool,
                 StaticBindKind::tool_bytes})
    binds[std::string(mountspec::to_string(k))] = attrs_json(mountspec::attrs_of(b, k));
  return {{"tmpfs", {{"options", b.tmpfs_options}, {"flags", attrs_json(b.tmpfs)}, {"sealed", attrs_json(b.sealed)}}},
          {"binds", binds}};
}

// One step of the mount plan, with the fields its kind has.
struct StepJson {
  nlohmann::json& j;
  void operator()(const RootStep& s) const {
    j["source"] = s.source;
    j["flags"] = attrs_json(s.attrs);
    if (!s.beneath.empty()) j["beneath"] = beneath_json(s.beneath, false);
  }
  void operator()(const BindStep& s) const {
    j["source"] = s.source;
    j["flags"] = attrs_json(s.attrs);
    j["type"] = s.recursive ? "rbind" : "bind";
    if (s.line > 0) j["line"] = s.line;
    if (!s.beneath.empty()) j["beneath"] = beneath_json(s.beneath, s.beneath_no_xdev);
  }
  void operator()(const MaskStep& s) const {
    j["flags"] = attrs_json(s.attrs);
    j["why"] = s.why;
    if (s.keep.empty()) return;
    auto& keep = j["keep"] = nlohmann::json::array();
    for (const auto& k : s.keep)
      keep.push_back({{"name", k.name}, {"flags", k.rw ? "as shown" : "ro"}, {"required", k.required}});
  }
  void operator()(const ViewStep& s) const {
    j["source"] = s.source.empty() ? "." : s.source;
    j["backend"] = s.built ? "static" : "fuse";
    j["flags"] = attrs_json(s.attrs);
    if (!s.why.empty()) j["why"] = s.why;
    if (s.line > 0) j["line"] = s.line;
    if (s.built) j["static"] = static_json(*s.built);
  }
  void operator()(const FsStep& s) const {
    j["fstype"] = s.fstype;
    j["options"] = s.options;
    j["flags"] = attrs_json(s.attrs);
  }
  void operator()(const DevNodeStep& s) const {
    j["source"] = s.source;
    j["flags"] = attrs_json(s.attrs);
  }
  void operator()(const SymlinkStep& s) const { j["link"] = s.link; }
  void operator()(const SocketStep& s) const { j["socket"] = s.datagram ? "datagram" : "stream, listening"; }
  void operator()(const SealStep& s) const { j["flags"] = attrs_json(s.attrs); }
};

nlohmann::json step_json(const MountStep& m) {
  nlohmann::json j{{"step", mountspec::to_string(mountspec::kind_of(m))}, {"target", mountspec::target_of(m)}};
  std::visit(StepJson{j}, m);
  return j;
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
  for (const auto& m : p.mounts) mounts.push_back(step_json(m));
  return json{
      {"agent", p.name},
      {"tier", p.tier_user ? "user:" + std::to_string(*p.tier_user) : std::string("system")},
      {"session", p.session},
      {"ctx_root", p.ctx_root},
      {"ids", ids},
      {"namespaces", ns_names(p.clone_flags)},
      {"namespaces_after_mounts", ns_names(static_cast<std::uint64_t>(p.unshare_flags))},
      {"network", p.net_ns ? "loopback" : "host"},
      {"hostname", p.hostname},
      {"root", p.root},
      {"mounts", mounts},
      {"mount_points", mountspec::mount_points(p.mounts)},
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
      {"model_endpoint",
       p.endpoint ? json{{"program", "ctx-model-endpoint"},
                         {"listen", p.endpoint->port != 0 ? "127.0.0.1:" + std::to_string(p.endpoint->port)
                                                          : std::string("127.0.0.1, a port the kernel picks")},
                         {"started", "at the first connection"},
                         {"models", !p.endpoint->token.empty()},
                         {"proxy", p.endpoint->refusal.empty() ? json(nullptr) : json(p.endpoint->refusal)}}
                  : json(nullptr)},
      {"hardening",
       {"capabilities dropped", "no_new_privs", "setsid", "fds 0-2 + LISTEN_FDS only", "pivot_root + detach",
        "seccomp deny-list (docs/seccomp.md)", "Landlock scope: abstract unix sockets and signals"}},
  };
}

}  // namespace ctx::launcher
