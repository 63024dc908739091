#include "sys/identity.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <net/if.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "base/unique_fd.hpp"
#include "sys/error.hpp"

namespace ctx::sys {

namespace {

std::string format_map(const std::vector<IdMapLine>& m) {
  std::string s;
  for (const auto& l : m)
    s += std::to_string(l.inner) + " " + std::to_string(l.outer) + " " + std::to_string(l.count) + "\n";
  return s;
}

Result<void> write_proc_file(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return CTX_FAIL_ERRNO("open " + path);
  UniqueFd guard(fd);
  // An id map must be written with a single write(2).
  ssize_t n = ::write(fd, data.data(), data.size());
  if (n < 0) return CTX_FAIL_ERRNO("write " + path);
  if (static_cast<std::size_t>(n) != data.size()) return fail(Error{EIO, "write " + path + ": short write"});
  return {};
}

Result<void> run_helper(const char* helper, pid_t pid, const std::vector<IdMapLine>& m) {
  std::vector<std::string> args{helper, std::to_string(pid)};
  for (const auto& l : m) {
    args.push_back(std::to_string(l.inner));
    args.push_back(std::to_string(l.outer));
    args.push_back(std::to_string(l.count));
  }
  pid_t child = ::fork();
  if (child < 0) return CTX_FAIL_ERRNO("fork");
  if (child == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    char* envp[] = {nullptr};
    ::execve((std::string("/usr/bin/") + helper).c_str(), argv.data(), envp);
    _exit(errno == ENOENT ? 127 : 126);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0)
    if (errno != EINTR) return CTX_FAIL_ERRNO("waitpid");
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return {};
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
    return fail(Error{ENOENT, std::string(helper) + ": ENOENT: not installed (apt-get install uidmap)"});
  return fail(Error{EPERM, std::string(helper) + ": EPERM: refused the map (is the range delegated in /etc/sub" +
                               (std::strcmp(helper, "newuidmap") == 0 ? "uid" : "gid") + "?)"});
}

}  // namespace

Result<void> write_id_maps(pid_t pid, const std::vector<IdMapLine>& uid_map, const std::vector<IdMapLine>& gid_map,
                           bool deny_setgroups) {
  std::string base = pid == 0 ? std::string("/proc/self/") : "/proc/" + std::to_string(pid) + "/";
  // setgroups must be "deny" before an unprivileged gid_map write
  // (user_namespaces(7), since Linux 3.19).
  if (deny_setgroups) CTX_TRY(write_proc_file(base + "setgroups", "deny\n"));
  CTX_TRY(write_proc_file(base + "uid_map", format_map(uid_map)));
  CTX_TRY(write_proc_file(base + "gid_map", format_map(gid_map)));
  return {};
}

Result<void> run_id_map_helpers(pid_t pid, const std::vector<IdMapLine>& uid_map,
                                const std::vector<IdMapLine>& gid_map) {
  CTX_TRY(run_helper("newuidmap", pid, uid_map));
  CTX_TRY(run_helper("newgidmap", pid, gid_map));
  return {};
}

Result<void> set_ids(std::uint32_t uid, std::uint32_t gid, const std::vector<std::uint32_t>& groups) {
  std::vector<gid_t> g(groups.begin(), groups.end());
  if (::setgroups(g.size(), g.data()) < 0) return CTX_FAIL_ERRNO("setgroups");
  if (::setresgid(gid, gid, gid) < 0) return CTX_FAIL_ERRNO("setresgid");
  if (::setresuid(uid, uid, uid) < 0) return CTX_FAIL_ERRNO("setresuid");
  return {};
}

Result<void> set_fs_ids(std::uint32_t uid, std::uint32_t gid, const std::vector<std::uint32_t>& groups) {
  std::vector<gid_t> g(groups.begin(), groups.end());
  if (::setgroups(g.size(), g.data()) < 0) return CTX_FAIL_ERRNO("setgroups");
  // setfsuid/setfsgid report no error; verify by reading back.
  ::setfsgid(gid);
  if (static_cast<std::uint32_t>(::setfsgid(static_cast<gid_t>(-1))) != gid)
    return fail(Error{EPERM, "setfsgid: EPERM"});
  ::setfsuid(uid);
  if (static_cast<std::uint32_t>(::setfsuid(static_cast<uid_t>(-1))) != uid)
    return fail(Error{EPERM, "setfsuid: EPERM"});
  return {};
}

Result<Creds> current_creds() {
  Creds c;
  c.uid = ::geteuid();
  c.gid = ::getegid();
  // Usually one call: a buffer that holds most lists, sized only when
  // it does not (EINVAL).
  std::vector<gid_t> g(64);
  int n = ::getgroups(static_cast<int>(g.size()), g.data());
  while (n < 0 && errno == EINVAL) {
    n = ::getgroups(0, nullptr);
    if (n < 0) break;
    g.resize(static_cast<std::size_t>(n));
    n = ::getgroups(n, g.data());
  }
  if (n < 0) return CTX_FAIL_ERRNO("getgroups");
  c.groups.assign(g.begin(), g.begin() + n);
  return c;
}

Result<Creds> current_fs_ids() {
  CTX_TRY_ASSIGN(Creds c, current_creds());
  // (uid_t)-1 changes nothing and returns the current value.
  c.uid = static_cast<std::uint32_t>(::setfsuid(static_cast<uid_t>(-1)));
  c.gid = static_cast<std::uint32_t>(::setfsgid(static_cast<gid_t>(-1)));
  return c;
}

Result<FsIdScope> FsIdScope::enter(const std::optional<Creds>& as) {
  if (!as) return FsIdScope(std::nullopt);
  CTX_TRY_ASSIGN(Creds saved, current_fs_ids());
  // Already those ids (an unprivileged caller naming its own, a nested
  // scope): nothing to change, and setgroups would need CAP_SETGID.
  if (saved.uid == as->uid && saved.gid == as->gid && saved.groups == as->groups) return FsIdScope(std::nullopt);
  // Held before the change, so a change that fails half-way (groups set,
  // setfsgid refused) is undone by the destructor.
  FsIdScope scope(std::move(saved));
  if (::prctl(PR_GET_PDEATHSIG, &scope.death_signal_) < 0) return CTX_FAIL_ERRNO("prctl PR_GET_PDEATHSIG");
  scope.parent_ = ::getppid();
  CTX_TRY_CTX(set_fs_ids(as->uid, as->gid, as->groups), "taking the owner's file-system ids");
  return scope;
}

FsIdScope::~FsIdScope() {
  if (!saved_) return;
  // Failing to take the previous ids again would leave a root process
  // unable to do its own work (cgroups, its records), or with rights it
  // should no longer have: stop rather than go on.
  if (!set_fs_ids(saved_->uid, saved_->gid, saved_->groups)) std::abort();
  // Why: commit_creds() clears PR_SET_PDEATHSIG whenever the fsuid or
  // fsgid changes, so a child supervisor that wrote one record as its
  // owner would no longer learn of its parent's death. Armed again, and
  // raised here when the parent died while it was cleared.
  if (death_signal_ != 0) {
    if (::prctl(PR_SET_PDEATHSIG, death_signal_) < 0) std::abort();
    if (::getppid() != parent_) (void)::kill(::getpid(), death_signal_);
  }
}

Result<std::optional<UserEntry>> lookup_user(std::uint32_t uid) {
  struct passwd pw {};
  struct passwd* res = nullptr;
  std::vector<char> buf(16384);
  int rc = ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &res);
  if (rc != 0) return fail(sys_error("getpwuid_r", rc));
  if (res == nullptr) return std::optional<UserEntry>();
  return std::optional<UserEntry>(UserEntry{pw.pw_name, pw.pw_uid, pw.pw_gid});
}

Result<std::optional<UserEntry>> lookup_user_name(const std::string& name) {
  struct passwd pw {};
  struct passwd* res = nullptr;
  std::vector<char> buf(16384);
  int rc = ::getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &res);
  if (rc != 0) return fail(sys_error("getpwnam_r", rc));
  if (res == nullptr) return std::optional<UserEntry>();
  return std::optional<UserEntry>(UserEntry{pw.pw_name, pw.pw_uid, pw.pw_gid});
}

Result<std::vector<std::uint32_t>> user_groups(std::uint32_t uid, std::uint32_t primary_gid) {
  CTX_TRY_ASSIGN(std::optional<UserEntry> user, lookup_user(uid));
  if (!user) return std::vector<std::uint32_t>{primary_gid};
  int n = 64;
  std::vector<gid_t> g(static_cast<std::size_t>(n));
  while (::getgrouplist(user->name.c_str(), primary_gid, g.data(), &n) < 0) g.resize(static_cast<std::size_t>(n));
  g.resize(static_cast<std::size_t>(n));
  return std::vector<std::uint32_t>(g.begin(), g.end());
}

Result<void> drop_bounding_set() {
  // Dropped without reading first (one prctl a capability, not two): a
  // capability already gone drops again without error.
  for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
    if (::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0) continue;
    int err = errno;
    if (err == EINVAL) return {};  // unknown to this kernel, as are the ones above it
    // Without CAP_SETPCAP only a capability still present is a failure.
    if (err == EPERM && ::prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 0) continue;
    return fail(sys_error("prctl PR_CAPBSET_DROP", err));
  }
  return {};
}

Result<void> drop_all_capabilities() {
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
    return CTX_FAIL_ERRNO("prctl PR_CAP_AMBIENT_CLEAR_ALL");
  // Effective, permitted and inheritable sets all empty: one capset(2).
  // (A library for it cost every process of the launcher eight system
  // calls at its start, reading what it never needed.)
  __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {};
  if (::syscall(SYS_capset, &head, none) < 0) return CTX_FAIL_ERRNO("capset");
  return {};
}

}  // namespace ctx::sys
