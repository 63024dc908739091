// The agent's cgroup v2 subtree, checked from the host: where the sandbox
// runs, what is left afterwards, leftovers of a dead instance, limits.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cgroup/discover.hpp"
#include "cgroup/placement.hpp"
#include "sys/mountinfo.hpp"
#include "test/support/launch.hpp"

using ctx::test::CtxTree;
using ctx::test::lexists;
using ctx::test::RunResult;
using ctx::test::slurp;
using ctx::test::TestUser;
using nlohmann::json;

namespace {

std::string cgroup2() {
  auto m = ctx::test::cgroup2_mount();
  REQUIRE(m);
  return *m;
}

}  // namespace

TEST_CASE("a root launch runs in <cgroup2>/cortexfs/user-<owner>/agent-<name>[-<root hash>]/runtime and removes it",
          "[cgroup]") {
  auto owner = ctx::test::test_user();
  REQUIRE(owner);
  CtxTree t(*owner);
  t.agent("cgcoder");
  std::string agent_dir = ctx::test::agent_cgroup(t, "cgcoder").value();
  auto sp = ctx::test::spawn_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(),
                                      "--json-status-fd", "1", "cgcoder", "--", "/probe", "notify:READY=1", "sleep:30"},
                                     TestUser{0, 0, "root"});
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/cgcoder.d/status", "ready\n"));
  std::string procs = slurp(agent_dir + "/runtime/cgroup.procs");
  std::istringstream in(procs);
  int n = 0;
  for (std::string pid; in >> pid;) ++n;
  CHECK(n == 2);                                      // the sandbox's init and the probe: nothing else
  CHECK(slurp(agent_dir + "/cgroup.procs").empty());  // no process in the subtree's root
  REQUIRE(::kill(sp.pid, SIGTERM) == 0);
  RunResult r = ctx::test::wait_command(sp, 30);
  CHECK(r.exit_code == 143);
  auto nl = r.out.find('\n');
  json started = json::parse(r.out.substr(0, nl));
  CHECK(started["cgroup"] == agent_dir + "/runtime");
  CHECK_FALSE(lexists(agent_dir));
}

TEST_CASE("leftovers of a dead instance are killed and removed at the next launch", "[cgroup]") {
  auto owner = ctx::test::test_user();
  REQUIRE(owner);
  CtxTree t(*owner);
  t.agent("cgleft");
  std::string base = cgroup2() + "/cortexfs/user-" + std::to_string(owner->uid);
  std::string agent_dir = base + "/" + ctx::cgroup::agent_cgroup_name("cgleft", t.root());
  ::mkdir((cgroup2() + "/cortexfs").c_str(), 0755);
  ::mkdir(base.c_str(), 0755);
  REQUIRE(::mkdir(agent_dir.c_str(), 0755) == 0);
  REQUIRE(::mkdir((agent_dir + "/runtime").c_str(), 0755) == 0);
  // A process a crashed supervisor left behind.
  pid_t orphan = ::fork();
  REQUIRE(orphan >= 0);
  if (orphan == 0) {
    std::ofstream(agent_dir + "/runtime/cgroup.procs") << "0\n";
    ::pause();
    _exit(0);
  }
  for (int i = 0; i < 100 && slurp(agent_dir + "/runtime/cgroup.procs").empty(); ++i) ::usleep(10000);
  REQUIRE_FALSE(slurp(agent_dir + "/runtime/cgroup.procs").empty());
  RunResult r = t.launch({"cgleft", "--", "/probe", "ids"}, TestUser{0, 0, "root"});
  INFO(r.err);
  CHECK(r.exit_code == 0);
  int status = 0;
  REQUIRE(::waitpid(orphan, &status, 0) == orphan);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  CHECK(t.dir().read("ctx/agent/cgleft.d/log").find("\"type\":\"agent.reap\"") != std::string::npos);
  CHECK_FALSE(lexists(agent_dir));
}

TEST_CASE("a limit whose controller is not delegated is an error, not a silent skip", "[cgroup]") {
  auto owner = ctx::test::test_user();
  REQUIRE(owner);
  std::string base = cgroup2() + "/cortexfs/user-" + std::to_string(owner->uid);
  // The base (a child of the root cgroup) has the controllers the root
  // enables for its children.
  if (slurp(cgroup2() + "/cgroup.subtree_control").find("memory") != std::string::npos) {
    // Where the controller exists (the systemd VM), the limit is applied.
    CtxTree t(*owner);
    t.agent("cglim", {{"limits", "memory.max=64M\n"}});
    auto sp = ctx::test::spawn_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "cglim",
                                        "--", "/probe", "notify:READY=1", "sleep:30"},
                                       TestUser{0, 0, "root"});
    REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/cglim.d/status", "ready\n"));
    CHECK(slurp(base + "/" + ctx::cgroup::agent_cgroup_name("cglim", t.root()) + "/memory.max") == "67108864\n");
    ::kill(sp.pid, SIGTERM);
    ctx::test::wait_command(sp, 30);
  } else {
    CtxTree t(*owner);
    t.agent("cglim", {{"limits", "memory.max=64M\npids.max=100\n"}});
    RunResult r = t.launch({"cglim", "--", "/probe", "ids"}, TestUser{0, 0, "root"});
    CHECK(r.exit_code == 125);
    std::string controllers = slurp(cgroup2() + "/cortexfs/cgroup.controllers");
    std::string avail = controllers.substr(0, controllers.find('\n'));
    // The first cgroup of the chain the launcher made itself (cortexfs) is
    // where the controller is missing.
    CHECK(r.err == "ctx-agent-run: limits: memory.max is requested but the memory controller is not available in " +
                       cgroup2() + "/cortexfs" +
                       " (cgroup.controllers: " + (avail.empty() ? std::string("none") : avail) +
                       "); delegate it (systemd: Delegate=yes) or remove the line\n");
    CHECK_FALSE(lexists(base + "/" + ctx::cgroup::agent_cgroup_name("cglim", t.root())));
  }
}

// Run by root for the unprivileged test user, whose cgroup (the root
// cgroup here) is not delegated to it.
TEST_CASE("without a writable cgroup: a warning once, or an error with --require-cgroup", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  CtxTree t(*u);
  t.agent("coder");
  t.mkdir("xdg", 0700);
  std::vector<std::string> env{"XDG_RUNTIME_DIR=" + t.dir().path() + "/xdg"};
  std::vector<std::string> argv{
      ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder", "--", "/probe", "ids"};
  RunResult first = ctx::test::run_command(argv, *u, 60, env);
  CHECK(first.exit_code == 0);
  // One line; systemd's remedy only where systemd is PID 1.
  const bool systemd = std::filesystem::is_directory("/run/systemd/system");
  CHECK(first.warnings ==
        std::string("ctx-agent-run: warning: no writable cgroup v2 (the launcher's own cgroup / is not writable by "
                    "this user and no --cgroup-base was given") +
            (systemd ? " (systemd-run --user --scope -p Delegate=yes gives one)" : "") +
            "): supervising by pidfd instead\n");
  RunResult second = ctx::test::run_command(argv, *u, 60, env);
  CHECK(second.exit_code == 0);
  CHECK(second.warnings.empty());
  CHECK(t.dir().read("ctx/agent/coder.d/log").find("\"type\":\"agent.cgroup\"") != std::string::npos);
  argv.insert(argv.begin() + 3, "--require-cgroup");
  RunResult req = ctx::test::run_command(argv, *u, 60, env);
  CHECK(req.exit_code == 125);
  CHECK(req.err.rfind("ctx-agent-run: --require-cgroup: EOPNOTSUPP: no writable cgroup v2: the launcher's own cgroup",
                      0) == 0);
}

// [limits] needs cgroup2 with the memory, pids and cpu controllers; on a
// machine whose controllers belong to cgroup v1 the runner skips it with
// that reason (exit 77).
TEST_CASE("limits are applied to the agent's subtree and hold for its runtime and its children", "[limits]") {
  auto owner = ctx::test::test_user();
  REQUIRE(owner);
  CtxTree t(*owner);
  t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
  std::string uid = std::to_string(owner->uid);
  t.agent("cglim", {{"limits", "memory.max=64M\npids.max=20\ncpu.max=50000 100000\n"},
                    {"iso", "shared\n"},
                    {"policy", "allow cglim_t agent:kid create\nallow cglim_t agent:kid start\n"},
                    {"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.root() + "/home/" +
                                  uid + "/agent/cglim\t/ctx/home/" + uid + "/agent/cglim\trw\tbind,nosuid,nodev\n"}});
  std::string dir = ctx::test::agent_cgroup(t, "cglim").value();
  // 30 sleepers under pids.max=20: the forks fail part of the way. They are
  // started by a subshell because a POSIX shell exits when a fork fails
  // ("sh: Cannot fork"); the runtime itself then execs the probe, which
  // needs no fork.
  auto sp = ctx::test::spawn_command(
      {ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "cglim", "--", "/bin/sh", "-c",
       "/ctx/bin/ctx agent create '{\"name\":\"kid\",\"mount\":[[\"/usr\",\"/usr\",\"ro\"],[\"/probe\",\"/probe\",\"ro\"]]}' "
       ">/dev/null; /ctx/bin/ctx agent start kid -- /probe notify:READY=1 sleep:30 >/dev/null; "
       "(for i in $(seq 30); do sleep 30 & done) 2>/dev/null; exec /probe notify:READY=1 sleep:30"},
      TestUser{0, 0, "root"});
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/cglim.d/status", "ready\n", 20000));
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/kid.d/status", "ready\n", 20000));
  CHECK(slurp(dir + "/memory.max") == "67108864\n");
  CHECK(slurp(dir + "/pids.max") == "20\n");
  CHECK(slurp(dir + "/cpu.max") == "50000 100000\n");
  CHECK(std::stoi(slurp(dir + "/pids.current")) <= 20);
  CHECK(std::stoi(slurp(dir + "/pids.events").substr(slurp(dir + "/pids.events").find(' ') + 1)) > 0);  // forks refused
  CHECK_FALSE(slurp(dir + "/child/kid/runtime/cgroup.procs").empty());  // the child counts against the parent's limits
  ::kill(sp.pid, SIGTERM);
  ctx::test::wait_command(sp, 30);
  CHECK_FALSE(lexists(dir));
}

// The agent view's server is in the agent's subtree (its limits cover what
// an agent makes the view hold), in a leaf of its own beside runtime/.
// Needs the live (FUSE) view: tagged [fuse] too (test/main.cpp).
TEST_CASE("the agent view's server runs in <agent>/view, under the agent's limits", "[cgroup][fuse]") {
  auto owner = ctx::test::test_user();
  REQUIRE(owner);
  CtxTree t(*owner);
  t.agent("cgview", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"}});
  std::string agent_dir = ctx::test::agent_cgroup(t, "cgview").value();
  auto sp = ctx::test::spawn_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "cgview",
                                      "--", "/probe", "notify:READY=1", "sleep:30"},
                                     TestUser{0, 0, "root"});
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/cgview.d/status", "ready\n"));
  std::istringstream in(slurp(agent_dir + "/view/cgroup.procs"));
  std::vector<std::string> pids;
  for (std::string pid; in >> pid;) pids.push_back(pid);
  REQUIRE(pids.size() == 1);
  std::string comm = slurp("/proc/" + pids[0] + "/comm");
  CHECK(comm == "ctx-view\n");
  REQUIRE(::kill(sp.pid, SIGTERM) == 0);
  RunResult r = ctx::test::wait_command(sp, 30);
  INFO(r.err);
  CHECK(r.exit_code == 143);
  CHECK(r.err.find("view") == std::string::npos);  // the view ended with its mount, not as a death
  CHECK_FALSE(lexists(agent_dir));
}
