#include "launcher/plan/model_plan.hpp"

#include <sched.h>

#include <algorithm>

#include "base/path.hpp"

namespace ctx::launcher {

namespace {

BindStep ro_bind(const std::string& source, const std::string& target, bool recursive, bool noexec) {
  BindStep b;
  b.source = source;
  b.target = target;
  b.recursive = recursive;
  b.attrs = {.rdonly = true, .nosuid = true, .nodev = true, .noexec = noexec};
  return b;
}

}  // namespace

std::string model_inner_path(const std::string& name) { return std::string(kInnerCtxRoot) + "/model/" + name; }

LaunchPlan model_plan(const LaunchPlan& agent, const ModelEntry& m, const std::string& anchor,
                      const std::vector<std::string>& host_dirs,
                      const std::vector<std::pair<std::string, std::string>>& net_files) {
  LaunchPlan p;
  p.name = agent.name;
  p.session = agent.session;
  p.ctx_root = agent.ctx_root;
  p.owner = agent.owner;
  p.root = anchor;
  p.cwd = "/tmp";
  p.hostname = "model";
  p.ids = agent.ids;
  p.net_ns = !m.network;
  p.clone_flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP;
  if (p.net_ns) p.clone_flags |= CLONE_NEWNET;
  p.clone_flags |= agent.clone_flags & CLONE_NEWUSER;
  p.unshare_flags = agent.unshare_flags;

  RootStep root;
  root.source = anchor;
  root.fresh = true;
  root.attrs = {.nosuid = true, .nodev = true};
  p.mounts.push_back(std::move(root));
  for (const auto& d : host_dirs) p.mounts.push_back(ro_bind(d, d, true, false));
  // A model with the network resolves names as the host does (a forwarder
  // reaches api.anthropic.com by name); one without has nothing to resolve.
  if (m.network)
    for (const auto& [inside, host] : net_files) p.mounts.push_back(ro_bind(host, inside, false, true));
  for (auto [link, to] : {std::pair{"/bin", "usr/bin"}, std::pair{"/sbin", "usr/sbin"}, std::pair{"/lib", "usr/lib"},
                          std::pair{"/lib64", "usr/lib64"}}) {
    p.mounts.push_back(SymlinkStep{link, to});
  }
  // The model's own entry at its ABI path: runnable, read-only; its .d/
  // (driver, id, cap, default; env too: the model's own credentials).
  p.mounts.push_back(ro_bind(m.host_path, model_inner_path(m.name), false, false));
  if (!m.meta_dir.empty()) p.mounts.push_back(ro_bind(m.meta_dir, model_inner_path(m.name) + ".d", false, true));
  p.mounts.push_back(FsStep{"/tmp", "tmpfs", "mode=1777,size=64m", {.nosuid = true, .nodev = true}});
  p.shm_size = kDefaultShmSize;
  mountspec::append_proc_and_dev(p.mounts, p.shm_size);
  // Nothing durable to write: the root itself read-only once made.
  p.mounts.push_back(SealStep{"/", {.rdonly = true, .nosuid = true, .nodev = true}});

  p.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/tmp", "CTX_MODEL=" + m.name};
  for (const auto& kv : m.request_env) {
    const std::string& name = kv.first;
    if (std::none_of(m.env.begin(), m.env.end(), [&name](const auto& own) { return own.first == name; }))
      p.env.push_back(name + "=" + kv.second);
  }
  for (const auto& [k, v] : m.env) p.env.push_back(k + "=" + v);
  p.argv = {model_inner_path(m.name)};
  p.nproc = agent.nproc;
  p.limits = agent.limits;
  return p;
}

}  // namespace ctx::launcher
