#include "cgroup/placement.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <vector>

#include "base/names.hpp"
#include "base/path.hpp"
#include "sys/file.hpp"
#include "sys/mountinfo.hpp"
#include "sys/process.hpp"
#include "sys/resolve.hpp"
#include "sys/socket.hpp"

namespace ctx::cgroup {

BaseChoice choose_base(const BaseInputs& in) {
  if (!in.mount) return {"", false, "no cgroup2 file system is mounted (see /proc/self/mountinfo)"};
  if (!in.explicit_base.empty()) return {in.explicit_base, false, ""};
  auto own = dir_of(*in.mount, in.own_path);
  // Root in the root cgroup is outside any delegation (no systemd): use a
  // subtree of our own rather than filling the root cgroup.
  if (in.privileged && in.own_path == "/")
    return {path_join(in.mount->mount_point, "cortexfs/user-" + std::to_string(in.owner)), true, ""};
  if (own && in.own_writable) return {*own, false, ""};
  if (in.privileged) return {path_join(in.mount->mount_point, "cortexfs/user-" + std::to_string(in.owner)), true, ""};
  // The remedy where there is one to give: systemd delegates on request;
  // elsewhere whoever manages the cgroup tree does (--cgroup-base).
  return {"", false,
          "the launcher's own cgroup " + in.own_path + " is not writable by this user and no --cgroup-base was given" +
              (in.systemd ? " (systemd-run --user --scope -p Delegate=yes gives one)" : "")};
}

std::string agent_cgroup_name(const std::string& agent, const std::string& ctx_root) {
  return "agent-" + instance_name(agent, ctx_root);
}

namespace {

Result<std::string> read_proc(const std::string& name) {
  // One open of the whole path ("self" is a plain link of procfs).
  CTX_TRY_ASSIGN(auto f, sys::read_small_file(sys::at_cwd, "/proc/self/" + name, 16u << 20));
  if (!f) return fail(ENOENT, "/proc/self/" + name + ": ENOENT");
  return std::move(f->data);
}

void pause_ms(int ms) {
  std::vector<struct pollfd> none;
  (void)sys::poll_fds(none, ms);
}

// Empties a cgroup subtree: SIGKILL to every process in it (cgroup.kill,
// Linux 5.14), then waits until cgroup.events says it is unpopulated.
Result<void> kill_and_wait(int dirfd, const std::string& what) {
  CTX_TRY_CTX(sys::write_existing_at(dirfd, "cgroup.kill", "1"), what);
  for (int waited = 0; waited < 5000; waited += 5) {
    CTX_TRY_ASSIGN(auto ev, sys::read_small_file(dirfd, "cgroup.events", 4096));
    if (ev && (*ev).data.find("populated 0") != std::string::npos) return {};
    pause_ms(5);
  }
  return fail(EBUSY, what + ": EBUSY: still populated 5 s after cgroup.kill");
}

// rmdir of a cgroup and every cgroup below it, children first. Owned
// children remove their own subtrees at the same time: what is already
// gone is not an error.
Result<void> remove_tree(int parentfd, const std::string& name) {
  {
    auto dir = sys::open(parentfd, name, sys::Open::directory | sys::Open::no_follow);
    if (!dir && dir.error().code == ENOENT) return {};
    if (!dir) return fail(dir.error());
    UniqueFd d = std::move(*dir);
    CTX_TRY_ASSIGN(auto names, sys::list_dir(d.get()));
    for (const auto& n : names) {
      auto st = sys::stat_at(d.get(), n);
      if (st && *st && S_ISDIR((*st)->mode)) CTX_TRY(remove_tree(d.get(), n));
    }
  }
  return sys::remove_at(parentfd, name, true);
}

Result<void> enable_controllers(int basefd, const std::string& base, const Limits& l) {
  CTX_TRY_ASSIGN(auto have, sys::read_small_file(basefd, "cgroup.controllers", 4096));
  std::string available = have ? have->data : std::string();
  while (!available.empty() && available.back() == '\n') available.pop_back();
  std::vector<std::pair<std::string, std::string>> want;  // controller, the limit that needs it
  if (l.memory_max) want.emplace_back("memory", "memory.max");
  if (l.pids_max) want.emplace_back("pids", "pids.max");
  if (l.cpu_max) want.emplace_back("cpu", "cpu.max");
  for (const auto& [ctrl, limit] : want) {
    bool ok = (" " + available + " ").find(" " + ctrl + " ") != std::string::npos;
    if (!ok)
      return fail(EOPNOTSUPP, "limits: " + limit + " is requested but the " + ctrl +
                                  " controller is not available in " + base +
                                  " (cgroup.controllers: " + (available.empty() ? "none" : available) +
                                  "); delegate it (systemd: Delegate=yes) or remove the line");
    auto r = sys::write_existing_at(basefd, "cgroup.subtree_control", "+" + ctrl);
    if (!r)
      return fail(r.error().code, "limits: enabling " + ctrl + " in " + base +
                                      "/cgroup.subtree_control: " + errno_name(r.error().code) +
                                      (r.error().code == EBUSY ? " (the cgroup holds processes; give the launcher a "
                                                                 "--cgroup-base without them)"
                                                               : ""));
  }
  return {};
}

}  // namespace

Result<std::optional<Placement>> Placement::create(const PlacementOptions& o, std::string& why_not,
                                                   bool& reaped_leftovers) {
  reaped_leftovers = false;
  BaseInputs in;
  CTX_TRY_ASSIGN(in.mount, find_cgroup2_mount());
  if (in.mount) {
    CTX_TRY_ASSIGN(std::string self, read_proc("cgroup"));
    in.own_path = v2_path(self).value_or("");
    if (auto own = dir_of(*in.mount, in.own_path)) {
      if (auto fd = sys::open(sys::at_cwd, *own, sys::Open::directory))
        in.own_writable = sys::writable_at(fd->get(), "") && sys::writable_at(fd->get(), "cgroup.procs");
    }
  }
  in.privileged = o.privileged;
  in.owner = o.owner;
  in.explicit_base = o.explicit_base;
  // sd_booted()'s test.
  in.systemd =
      static_cast<bool>(sys::open(sys::at_cwd, "/run/systemd/system", sys::Open::directory | sys::Open::no_follow));
  BaseChoice base = choose_base(in);
  if (base.dir.empty()) {
    why_not = base.why_not;
    return std::optional<Placement>();
  }

  Placement p;
  p.agent_name_ = o.leaf.empty() ? agent_cgroup_name(o.agent, o.ctx_root) : o.leaf;
  if (base.create) {
    CTX_TRY_ASSIGN(UniqueFd root, sys::open(sys::at_cwd, in.mount->mount_point, sys::Open::directory));
    CTX_TRY_ASSIGN(p.base_,
                   sys::open_or_make_dirs(root.get(), std::string(path_suffix(base.dir, in.mount->mount_point)), 0755));
  } else {
    auto b = sys::open(sys::at_cwd, base.dir, sys::Open::directory);
    if (!b) return fail(b.error().with_context("cgroup base " + base.dir));
    p.base_ = std::move(*b);
  }
  auto procs = sys::stat_at(p.base_.get(), "cgroup.procs");
  if (!procs || !*procs) return fail(EINVAL, "cgroup base " + base.dir + ": EINVAL: not a cgroup v2 directory");
  if (!sys::writable_at(p.base_.get(), ""))
    return fail(EACCES, "cgroup base " + base.dir + ": EACCES: not writable by this user");

  // Leftovers of a dead instance (the caller holds the lock of the
  // instance this subtree is named for).
  if (auto st = sys::stat_at(p.base_.get(), p.agent_name_); st && *st) {
    CTX_TRY_ASSIGN(UniqueFd old, sys::open(p.base_.get(), p.agent_name_, sys::Open::directory | sys::Open::no_follow));
    CTX_TRY(kill_and_wait(old.get(), base.dir + "/" + p.agent_name_));
    CTX_TRY_CTX(remove_tree(p.base_.get(), p.agent_name_), "removing the leftover " + base.dir + "/" + p.agent_name_);
    reaped_leftovers = true;
  }
  bool any_limit = o.limits && (o.limits->memory_max || o.limits->pids_max || o.limits->cpu_max);
  if (any_limit && base.create) {
    // Our own chain below the cgroup2 root (cortexfs/user-<uid>): the
    // controllers must be enabled in cortexfs too, or user-<uid> has none.
    CTX_TRY_ASSIGN(UniqueFd root, sys::open(sys::at_cwd, in.mount->mount_point, sys::Open::directory));
    CTX_TRY_ASSIGN(UniqueFd chain, sys::open(root.get(), "cortexfs", sys::Open::directory | sys::Open::no_follow));
    CTX_TRY(enable_controllers(chain.get(), path_join(in.mount->mount_point, "cortexfs"), *o.limits));
  }
  if (any_limit) CTX_TRY(enable_controllers(p.base_.get(), base.dir, *o.limits));

  p.agent_path_ = base.dir + "/" + p.agent_name_;
  CTX_TRY_CTX(sys::make_dir_at(p.base_.get(), p.agent_name_, 0755), "creating " + p.agent_path_);
  CTX_TRY_ASSIGN(p.agent_, sys::open(p.base_.get(), p.agent_name_, sys::Open::directory | sys::Open::no_follow));
  if (any_limit) {
    const std::pair<const char*, const std::optional<std::string>*> files[] = {
        {"memory.max", &o.limits->memory_max}, {"pids.max", &o.limits->pids_max}, {"cpu.max", &o.limits->cpu_max}};
    for (const auto& [file, value] : files)
      if (*value) CTX_TRY_CTX(sys::write_existing_at(p.agent_.get(), file, **value), "limits: " + p.agent_path_);
  }
  CTX_TRY_CTX(sys::make_dir_at(p.agent_.get(), "runtime", 0755), "creating " + p.agent_path_ + "/runtime");
  CTX_TRY_ASSIGN(p.runtime_, sys::open(p.agent_.get(), "runtime", sys::Open::directory | sys::Open::no_follow));
  CTX_TRY_CTX(sys::make_dir_at(p.agent_.get(), "view", 0755), "creating " + p.agent_path_ + "/view");
  CTX_TRY_ASSIGN(p.view_, sys::open(p.agent_.get(), "view", sys::Open::directory | sys::Open::no_follow));
  return std::optional<Placement>(std::move(p));
}

std::pair<std::string, std::vector<int>> Placement::handover() const {
  return {agent_name_ + "\n" + agent_path_, {base_.get(), agent_.get()}};
}

Result<Placement> Placement::adopt(std::string_view bytes, std::vector<UniqueFd> fds) {
  auto nl = bytes.find('\n');
  if (nl == std::string_view::npos || fds.size() != 2)
    return fail(Error{EPROTO, "EPROTO: a cgroup handover is a name, a path and two descriptors"});
  Placement p;
  p.agent_name_ = std::string(bytes.substr(0, nl));
  p.agent_path_ = std::string(bytes.substr(nl + 1));
  p.base_ = std::move(fds[0]);
  p.agent_ = std::move(fds[1]);
  return p;
}

Result<void> Placement::remove() {
  if (!agent_.valid()) return {};
  Result<void> r = kill_and_wait(agent_.get(), agent_path_);
  runtime_.reset();
  view_.reset();
  agent_.reset();
  if (r) r = remove_tree(base_.get(), agent_name_);
  base_.reset();
  return r;
}

Result<void> Placement::kill_runtime() {
  if (!runtime_.valid()) return {};
  return sys::write_existing_at(runtime_.get(), "cgroup.kill", "1");
}

Result<void> Placement::kill_subtree() {
  if (!agent_.valid()) return {};
  return sys::write_existing_at(agent_.get(), "cgroup.kill", "1");
}

bool Placement::wait_children_gone(int timeout_ms) {
  if (!agent_.valid()) return true;
  for (int waited = 0;; waited += 5) {
    auto d = sys::open(agent_.get(), "child", sys::Open::directory | sys::Open::no_follow);
    if (!d) return true;
    auto names = sys::list_dir(d->get());
    bool any = false;
    if (names)
      for (const auto& n : *names) {
        auto st = sys::stat_at(d->get(), n);
        if (st && *st && S_ISDIR((*st)->mode)) any = true;
      }
    if (!any) return true;
    if (waited >= timeout_ms) return false;
    pause_ms(5);
  }
}

Placement::~Placement() { (void)remove(); }

}  // namespace ctx::cgroup
