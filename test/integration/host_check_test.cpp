// What the host lacks, said with the remedy: by a launch without user
// namespaces, and by `ctx check --env` for every kernel facility.
#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ctx/kernel_probe.hpp"
#include "test/support/launch.hpp"
#include "test/support/namespaces.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::enter_own_userns;
using ctx::test::probe;
using ctx::test::RunResult;
using ctx::test::write_file;
using nlohmann::json;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

}  // namespace

TEST_CASE("without user namespaces an unprivileged launch fails with the remedy", "[userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  // The launcher runs in a user namespace of its own whose limit on
  // nested user namespaces is 0: the machine's setting stays untouched.
  auto no_userns = [&]() { return enter_own_userns(m.owner) && write_file("/proc/sys/user/max_user_namespaces", "0"); };
  RunResult r = ctx::test::run_command(
      {ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder", "--", "/probe", "ids"}, m.as, 60,
      {}, no_userns);
  CHECK(r.exit_code == 125);
  CHECK(
      r.err ==
      "ctx-agent-run: creating namespaces: clone3: ENOSPC (unprivileged user namespaces are unavailable to uid " +
          std::to_string(m.owner.uid) +
          ": raise user.max_user_namespaces, set kernel.unprivileged_userns_clone=1, on Ubuntu load "
          "its profile (apparmor_parser -r /etc/apparmor.d/ctx-agent-run) or set kernel.apparmor_restrict_unprivileged_userns=0, or launch as "
          "root from a systemd unit)\n");
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
  // A failed clone3 leaves no agent socket behind.
  CHECK_FALSE(std::filesystem::exists(t.root() + "/agent/coder.sock"));
}

TEST_CASE("ctx check --env names the remedy when user namespaces are unavailable", "[userns]") {
  Mode m = mode();
  std::vector<std::string> argv{ctx::test::built("ctx/ctx"), "check", "--env"};
  RunResult fine = ctx::test::run_command(argv, m.as);
  CHECK(fine.out.find("env ok      user namespaces for unprivileged users (Linux 3.8; user.max_user_namespaces ") == 0);
  auto no_userns = [&]() { return enter_own_userns(m.owner) && write_file("/proc/sys/user/max_user_namespaces", "0"); };
  RunResult r = ctx::test::run_command(argv, m.as, 60, {}, no_userns);
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("env missing user namespaces for unprivileged users (Linux 3.8): unshare: ENOSPC: "
                   "user.max_user_namespaces is 0: sysctl -w user.max_user_namespaces=15000; "
                   "without them only root (a systemd unit) can launch agents\n") == 0);
  // Without a user namespace the mount API cannot be tried: said, not
  // reported missing.
  CHECK(r.out.find("env skip    open_tree, move_mount (Linux 5.2): not probed: it needs a user namespace (see "
                   "above)\n") != std::string::npos);
}

// Every facility of docs/launcher.md's minimum-kernel table works on the
// machines that run this suite; as root each is probed (the cgroup ones
// in a temporary cgroup), in text and in --json.
TEST_CASE("ctx check --env probes every kernel facility and finds it", "[root]") {
  RunResult r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--env"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  for (const auto& f : ctx::helper::kernel_facilities())
    CHECK(("\n" + r.out).find("\nenv ok      " + f.name + " (Linux " + f.since) != std::string::npos);
  CHECK(r.out.find("env missing") == std::string::npos);
  CHECK(r.out.find("env skip") == std::string::npos);
  RunResult j = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--env", "--json"});
  json doc = json::parse(j.out);
  const json& fac = doc["env"]["facilities"];
  REQUIRE(fac.size() == ctx::helper::kernel_facilities().size());
  for (std::size_t i = 0; i < fac.size(); ++i) {
    CHECK(fac[i]["facility"] == ctx::helper::kernel_facilities()[i].name);
    CHECK(fac[i]["since"] == ctx::helper::kernel_facilities()[i].since);
    CHECK(fac[i]["state"] == "ok");
    CHECK(fac[i]["remedy"] == "");
  }
  // The temporary cgroup of the clone3 probe is gone.
  CHECK(ctx::test::processes_mentioning("ctx-check-").empty());
}

// /dev/fuse as the unprivileged user: the remedy when it cannot open it.
// The machine's own mode decides what the user sees (checked by opening it
// as that user); a root-owned 0600 file bound over /dev/fuse in the
// user's own namespaces gives the EACCES case on every machine.
TEST_CASE("ctx check --env names the /dev/fuse remedy for a user who cannot open it", "[fuse]") {
  Mode m = mode();
  std::vector<std::string> argv{ctx::test::built("ctx/ctx"), "check", "--env"};
  const std::string fix =
      "mode 0666 is Debian's default: chmod 0666 /dev/fuse, and to keep it across boots a udev "
      "rule (KERNEL==\"fuse\", MODE=\"0666\" in /etc/udev/rules.d/60-fuse.rules)";
  RunResult can = ctx::test::run_command({"/bin/sh", "-c", "exec 3<>/dev/fuse"}, m.as);
  RunResult r = ctx::test::run_command(argv, m.as);
  INFO(r.out);
  if (can.exit_code == 0) {
    CHECK(r.out.find("\nenv ok      /dev/fuse read-write (Linux 2.6.14; the agent view is served live over FUSE)\n") !=
          std::string::npos);
  } else {
    CHECK(r.out.find("warning: env missing /dev/fuse read-write (Linux 2.6.14): open /dev/fuse: EACCES: launches "
                     "build the agent view once at launch instead") != std::string::npos);
    CHECK(r.out.find(fix + "\n") != std::string::npos);
  }
  ctx::test::TempDir d;
  ::chmod(d.path().c_str(), 0755);
  d.write("fuse", "", 0600);  // root's, as the runner is root
  auto covered = [&]() {
    return enter_own_userns(m.owner, CLONE_NEWNS) &&
           ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
           ::mount((d / "fuse").c_str(), "/dev/fuse", nullptr, MS_BIND, nullptr) == 0;
  };
  RunResult denied = ctx::test::run_command(argv, m.as, 60, {}, covered);
  INFO(denied.out << denied.err);
  CHECK(denied.exit_code == 0);  // a warning: launches go on, with the static view
  CHECK(denied.out.find("warning: env missing /dev/fuse read-write (Linux 2.6.14): open /dev/fuse: EACCES: launches "
                        "build the agent view once at launch instead (static: it does not follow policy or tree "
                        "changes; --require-view refuses); for the live view, /dev/fuse must be read-write for you: "
                        "it is mode 0600; " +
                        fix + "\n") != std::string::npos);
}
