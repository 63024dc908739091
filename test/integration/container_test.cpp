// A container engine's masked /proc, reproduced on the host: a mount over
// a file of /proc (what Podman, Docker and Kubernetes do by default) in a
// user and mount namespace of the test's own. The kernel then refuses the
// sandbox a fresh procfs (fs/namespace.c, mnt_already_visible); the
// launch is refused with the reason, and `ctx check --env` names the
// engine options that lift it.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <string>

#include "test/support/launch.hpp"
#include "test/support/namespaces.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;
using ctx::test::TestUser;

namespace {

// In the child about to exec: a user and mount namespace of its own (the
// owner's ids mapped to themselves) with /dev/null bound over
// /proc/version, as an engine masks /proc/kcore.
bool enter_masked_proc(const TestUser& u) {
  if (!ctx::test::enter_own_userns(u, CLONE_NEWNS)) return false;
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) return false;
  return ::mount("/dev/null", "/proc/version", nullptr, MS_BIND, nullptr) == 0;
}

// In the child about to exec: no_new_privs and a filter that refuses
// sethostname with EPERM, as the engines' default profiles do for a
// container without CAP_SYS_ADMIN.
bool refuse_sethostname() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return false;
  scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
  if (f == nullptr) return false;
  bool ok = seccomp_rule_add(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(sethostname), 0) == 0 && seccomp_load(f) == 0;
  seccomp_release(f);
  return ok;
}

// In the child about to exec: no_new_privs and a filter that refuses
// unshare(CLONE_NEWUSER) with EPERM, as Docker's default profile does for
// a container without CAP_SYS_ADMIN.
bool refuse_new_userns() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) return false;
  scmp_filter_ctx f = seccomp_init(SCMP_ACT_ALLOW);
  if (f == nullptr) return false;
  // The argument test spelled out: SCMP_A0 is a compound literal, which
  // C++ does not have (clang refuses it).
  const scmp_arg_cmp newuser{0, SCMP_CMP_MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER};
  bool ok =
      seccomp_rule_add_array(f, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1, &newuser) == 0 && seccomp_load(f) == 0;
  seccomp_release(f);
  return ok;
}

}  // namespace

// The doctor used to answer any EPERM with "raise user.max_user_namespaces"
// (already 2147483647 on most machines): it names the filter instead.
TEST_CASE("ctx check --env blames the seccomp filter that refuses user namespaces, not the sysctl", "[userns]") {
  auto m = ctx::test::launch_mode();
  RunResult r =
      ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--env"}, m.as, 60, {}, refuse_new_userns);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  // This machine may itself be a container (CI runs in one): the remedy
  // then names the engine's options.
  const bool contained = r.out.find("\nenv ok      container: none seen") == std::string::npos;
  const std::string cause =
      contained ? "the container's seccomp profile refuses unshare(CLONE_NEWUSER) (Seccomp: 2; the engine's default "
                  "allows it only with CAP_SYS_ADMIN): Docker/Podman: --security-opt "
                  "seccomp=/usr/share/ctx-agent-run/seccomp/ctx-agent-run.json (the package's profile, on the host); "
                  "Kubernetes: securityContext.seccompProfile: {type: Localhost, localhostProfile: "
                  "ctx-agent-run.json} (the file in /var/lib/kubelet/seccomp on the node)"
                : "a seccomp filter refuses unshare(CLONE_NEWUSER) (Seccomp: 2 in /proc/self/status; set by what "
                  "started this shell): run outside that filter";
  CHECK(r.out.find("env missing user namespaces for unprivileged users (Linux 3.8): unshare: EPERM: " + cause +
                   "; without them only root (a systemd unit) can launch agents\n") == 0);
  CHECK(r.out.find("max_user_namespaces=") == std::string::npos);
}

TEST_CASE("a seccomp profile that refuses sethostname refuses the launch with the reason", "[userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  RunResult r = ctx::test::run_command(
      {ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder", "--", "/probe", "ids"}, m.as, 60,
      {}, refuse_sethostname);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 125);
  CHECK(r.out.empty());
  CHECK(r.err.find("ctx-agent-run: sethostname: EPERM: a seccomp filter refuses it (a container engine's default "
                   "profile does): the launch is refused; `ctx check --env` names the profile to run with\n") !=
        std::string::npos);
  RunResult c =
      ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--env"}, m.as, 60, {}, refuse_sethostname);
  CHECK(c.exit_code == 1);
  CHECK(("\n" + c.out)
            .find("\nenv missing a hostname of its own (a new UTS namespace): sethostname: EPERM: every launch is "
                  "refused: the seccomp profile refuses sethostname (the engines' default allows it only with "
                  "CAP_SYS_ADMIN): ") != std::string::npos);
}

TEST_CASE("a masked /proc refuses the launch with the reason, never a sandbox without its own /proc", "[userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  auto masked = [&]() { return enter_masked_proc(m.owner); };
  RunResult r = ctx::test::run_command(
      {ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder", "--", "/probe", "ids"}, m.as, 60,
      {}, masked);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 125);
  CHECK(r.out.empty());
  CHECK(r.err.find("ctx-agent-run: /proc: mount proc: EPERM: the kernel mounts a new procfs in a user namespace "
                   "only where /proc is fully visible, and here part of it is covered (a container engine masks "
                   "it by default): the launch is refused rather than run without the sandbox's own /proc; "
                   "`ctx check --env` names the engine option that unmasks it\n") != std::string::npos);
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
}

TEST_CASE("ctx check --env names a masked /proc and the options that unmask it", "[userns]") {
  auto m = ctx::test::launch_mode();
  auto masked = [&]() { return enter_masked_proc(m.owner); };
  RunResult r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--env"}, m.as, 60, {}, masked);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK(("\n" + r.out)
            .find("\nenv missing a fresh /proc in a new pid namespace: mount proc: EPERM: /proc is masked here "
                  "(/proc/version), and the kernel mounts a new procfs in a user namespace only where one is fully "
                  "visible: every launch is refused (an agent never runs without its own /proc): Podman: "
                  "--security-opt unmask=ALL; Docker: --security-opt systempaths=unconfined; Kubernetes: "
                  "securityContext.procMount: Unmasked (with hostUsers: false)\n") != std::string::npos);
  RunResult fine = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--env"}, m.as);
  CHECK(("\n" + fine.out).find("\nenv ok      a fresh /proc in a new pid namespace\n") != std::string::npos);
}
