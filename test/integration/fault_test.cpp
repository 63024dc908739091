// A fault at every step (issue #14, docs/reliability.md): in a build with
// -Dfault_injection=true, $CTX_FAULT makes one named point of a launch, of
// a child's create/start/stop or of the cancellation sequence fail or
// SIGKILL its process (sys/fault.hpp). For every point of
// sys::fault_points() and each of its actions, launched by root for the
// test user and by the test user itself: the exit status is the
// documented one, the agent is `dead` with the error, nothing of the
// launch is left (process, mount, cgroup, socket, temporary file), and the
// next launch, or create of the same child, succeeds.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "sys/fault.hpp"
#include "test/support/launch.hpp"
#include "test/support/pty.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::agent_cgroup;
using ctx::test::CtxTree;
using ctx::test::LaunchMode;
using ctx::test::RunResult;
using ctx::test::TestUser;
using ctx::test::wait_gone;

namespace {

std::vector<LaunchMode> modes() {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  return {LaunchMode{true, TestUser{0, 0, "root"}, *u}, LaunchMode{false, *u, *u}};
}

std::string file(const CtxTree& t, const std::string& rel) { return ctx::test::slurp(t.root() + "/" + rel); }

// Everything of the tree's launches that is still there once they ended:
// processes, mounts, sockets, cgroups, temporary files, a status other
// than dead. Empty when nothing is. `temporary`: whether temporary files
// count (a create killed half-way leaves its own, which the next create of
// that name removes).
std::vector<std::string> leftovers(const CtxTree& t, const std::vector<std::string>& agents, bool temporary = true) {
  std::vector<std::string> out;
  if (!wait_gone(t.root())) out.push_back("a process still names " + t.root());
  std::ifstream mi("/proc/self/mountinfo");
  for (std::string line; std::getline(mi, line);)
    if (line.find(t.root()) != std::string::npos) out.push_back("mount: " + line);
  for (const auto& a : agents) {
    if (std::filesystem::exists(t.root() + "/agent/" + a + ".sock")) out.push_back(a + ".sock");
    if (std::string s = file(t, "agent/" + a + ".d/status"); !s.empty() && s != "dead\n")
      out.push_back(a + ".d/status is " + s);
    if (auto cg = agent_cgroup(t, a); cg && std::filesystem::exists(*cg)) out.push_back("cgroup " + *cg);
  }
  for (const auto& e : std::filesystem::recursive_directory_iterator(t.root() + "/agent"))
    if (temporary && e.path().filename().string().find(".tmp") != std::string::npos)
      out.push_back("temporary " + e.path().string());
  return out;
}

RunResult launch(const CtxTree& t, const LaunchMode& m, const std::vector<std::string>& args,
                 const std::string& fault) {
  std::vector<std::string> argv{ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "--cancel-grace-ms",
                                "300"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env;
  if (!fault.empty()) env.push_back("CTX_FAULT=" + fault);
  ctx::test::Spawned s = ctx::test::spawn_command(argv, m.as, env);
  return ctx::test::wait_command(s, 60);
}

// Whether the sandbox has handed the supervisor its sockets when `p` is
// reached (the end of its mounts, docs/launcher.md step 10).
bool after_sockets(const ctx::sys::FaultPoint& p) {
  for (const char* before : {"sandbox.private_mounts", "sandbox.owner_ids", "sandbox.root", "sandbox.binds",
                             "sandbox.masks", "sandbox.proc", "sandbox.dev", "sandbox.run_ctx"})
    if (p.name == before) return false;
  return true;
}

// The exit status documented for a fault (docs/reliability.md): a failed
// step is a failed launch (125); a killed supervisor is the launch's own
// death (128+9); a sandbox killed before it handed over its sockets fails
// the launch (125); after that the supervisor cannot tell it from a
// runtime killed right after its exec: the agent ends with 128+9.
bool documented_exit(const ctx::sys::FaultPoint& p, const std::string& action, int code) {
  if (action == "fail") return code == 125;
  if (p.process == "supervisor" || after_sockets(p)) return code == 128 + SIGKILL;
  return code == 125;
}

// The supervisor's points before the session's start files.
bool before_session_start(const ctx::sys::FaultPoint& p) {
  static const std::set<std::string_view> before{"supervisor.open_agent", "supervisor.watchdog", "supervisor.place",
                                                 "supervisor.listen",     "supervisor.clone",    "supervisor.id_maps"};
  return before.count(p.name) == 1;
}

std::vector<std::string> actions(const ctx::sys::FaultPoint& p) {
  if (p.can_fail) return {"fail", "kill"};
  return {"kill"};
}

// The end of the agent's log says why it ended: the injected error, or the
// watchdog's "supervisor_killed" (a supervisor killed before it started
// its watchdog has made nothing yet).
void check_log(const CtxTree& t, const std::string& agent, const ctx::sys::FaultPoint& p, const std::string& action,
               const std::string& log_before) {
  std::string log = file(t, "agent/" + agent + ".d/log").substr(log_before.size());
  if (action == "fail") {
    CHECK(log.find("injected fault at " + std::string(p.name)) != std::string::npos);
  } else if (p.process == "supervisor" && p.name != "supervisor.open_agent") {
    CHECK(log.find("\"reason\":\"supervisor_killed\"") != std::string::npos);
  } else if (p.name == "supervisor.open_agent") {
    CHECK(log.find("agent.start") == std::string::npos);
  } else if (after_sockets(p)) {
    // {"agent":...,"exit_status":137,...,"type":"agent.stop"} (keys sorted).
    CHECK(log.find("\"exit_status\":137,\"object\":\"agent/" + agent +
                   "\",\"session\":\"default\",\"status\":"
                   "\"error\",\"ts\":") != std::string::npos);
    CHECK(log.find("\"type\":\"agent.stop\"") != std::string::npos);
  } else {
    CHECK(log.find("the sandbox ended during its setup, before it handed over its sockets (its exit status: 137)") !=
          std::string::npos);
  }
}

// A parent "coder" that sees the CTX root (with /ctx/bin/ctx) and may
// create, start and stop "rev".
void write_family(CtxTree& t, const LaunchMode& m) {
  const std::string uid = std::to_string(m.owner.uid);
  t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
  std::string policy;
  for (const char* perm : {"create", "start", "stop"}) policy += std::string("allow coder_t agent:rev ") + perm + "\n";
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.root() + "/home/" +
                                  uid + "/agent/coder\t/ctx/home/" + uid + "/agent/coder\trw\tbind,nosuid,nodev\n"},
                    {"policy", policy},
                    {"iso", m.privileged ? "shared\n" : "userns\n"}});
}

const std::string kCreateRev =
    "/ctx/bin/ctx agent create "
    "'{\"name\":\"rev\",\"label\":\"rev_t\",\"mount\":[[\"/usr\",\"/usr\",\"ro\"],[\"/probe\",\"/probe\",\"ro\"]]}' "
    ">/dev/null";

// coder's script for a child point, and the one that must succeed after it.
std::string child_script(const std::string& point) {
  if (point == "child.stop")
    return "set -e; " + kCreateRev +
           "; /ctx/bin/ctx agent start rev -- /probe notify:READY=1 sleep:30 >/dev/null; /ctx/bin/ctx agent stop rev; "
           "/ctx/bin/ctx agent wait rev";
  return "set -e; " + kCreateRev + "; /ctx/bin/ctx agent start rev -- /probe >/dev/null; /ctx/bin/ctx agent wait rev";
}

std::string retry_script(const std::string& point) {
  // A create that reached its commit (the rename of rev.d) made the child;
  // one that did not is rolled back, or cleaned up by this create.
  bool created = point != "child.create.context" && point != "child.create.files" && point != "child.create.rename";
  std::string create = created ? std::string() : kCreateRev + "; ";
  return "set -e; " + create + "/ctx/bin/ctx agent start rev -- /probe >/dev/null; /ctx/bin/ctx agent wait rev";
}

}  // namespace

TEST_CASE("the fault points are named once each, by the process that runs them", "[fault]") {
  std::set<std::string_view> names;
  for (const auto& p : ctx::sys::fault_points()) {
    CHECK(names.insert(p.name).second);
    CHECK((p.process == "supervisor" || p.process == "sandbox" || p.process == "runtime"));
  }
  // docs/reliability.md says what each does.
  std::string doc = ctx::test::read_file(std::string(std::getenv("CTX_SOURCE_ROOT")) + "/docs/reliability.md");
  for (const auto& p : ctx::sys::fault_points()) {
    INFO(p.name);
    CHECK(doc.find("`" + std::string(p.name) + "`") != std::string::npos);
  }
  // Every step of the sandbox's setup has one.
  for (const char* step : {"private_mounts", "owner_ids", "root", "binds", "proc", "dev", "run_ctx", "network",
                           "pivot_root", "cwd", "identity", "terminal"})
    CHECK(names.count("sandbox." + std::string(step)) == 1);
}

TEST_CASE("a fault at every step of a launch: documented exit, dead with the error, nothing left, next launch runs",
          "[fault]") {
  for (const LaunchMode& m : modes()) {
    DYNAMIC_SECTION((m.privileged ? "root launches" : "the test user launches")) {
      CtxTree t(m.owner);
      // masks: the agent sees shared/ with one space its policy hides.
      t.mkdir("ctx/shared/open");
      t.mkdir("ctx/shared/hidden");
      t.agent("a", {{"mount", t.base_mounts() + t.root() + "/shared\t/ctx/shared\tro\trbind,nosuid,nodev\n"},
                    {"policy", "allow a_t shared:open read\n"}});
      REQUIRE(launch(t, m, {"a", "--", "/probe"}, "").exit_code == 0);
      const std::string session = "home/" + std::to_string(m.owner.uid) + "/agent/a/session/default/";
      const std::string state = session + "state", events = session + "events.jsonl";
      int walked = 0;
      for (const auto& p : ctx::sys::fault_points()) {
        if (!p.needs.empty() && p.needs != "masks") continue;
        for (const std::string& action : actions(p)) {
          INFO(p.name << ":" << action);
          std::string log_before = file(t, "agent/a.d/log");
          // A session's end is written only once its start files are
          // (supervisor.records comes right after them): before that the
          // session is left as it was, by the supervisor and its watchdog.
          const bool begun = !before_session_start(p);
          t.write("ctx/" + state, "done\n");
          const std::string events_before = file(t, events);
          RunResult r = launch(t, m, {"a", "--", "/probe"}, std::string(p.name) + ":" + action);
          INFO("exit " << r.exit_code << ", stderr: " << r.err);
          CHECK(documented_exit(p, action, r.exit_code));
          if (action == "fail") CHECK(r.err.find("injected fault at " + std::string(p.name)) != std::string::npos);
          CHECK(leftovers(t, {"a"}).empty());
          CHECK(file(t, "agent/a.d/status") == "dead\n");
          check_log(t, "a", p, action, log_before);
          CHECK(file(t, state) == (begun ? "failed\n" : "done\n"));
          if (!begun) CHECK(file(t, events) == events_before);  // the error is in the log only
          RunResult next = launch(t, m, {"a", "--", "/probe"}, "");
          CHECK(next.exit_code == 0);
          ++walked;
        }
      }
      CHECK(walked >= 40);
    }
  }
}

// The start records (status start, pid) come before the runtime: a launch
// refused for them has run nothing of the agent's, also when the refusal
// comes long after the sandbox's setup ended, as on a busy machine
// ("late"; docs/launcher.md, "Full disks"). The runtime would leave a file
// in /out. Agent a's sandbox maps itself and goes on alone from its clone;
// b's (iso uid) waits for the maps its supervisor writes.
TEST_CASE("a launch refused at its start records, however late, never ran its runtime", "[fault]") {
  for (const LaunchMode& m : modes()) {
    DYNAMIC_SECTION((m.privileged ? "root launches" : "the test user launches")) {
      CtxTree t(m.owner);
      ctx::test::TempDir tmp;  // outside the CTX tree, which a launch shows only through the view
      tmp.mkdir("out");
      const std::string out = tmp / "out";
      std::filesystem::permissions(tmp.path(), std::filesystem::perms(0755));
      std::filesystem::permissions(out, std::filesystem::perms(0777));
      const std::string mounts = t.base_mounts() + out + "\t/out\trw\tbind,nosuid,nodev\n";
      t.agent("a", {{"mount", mounts}});
      // 2000001 lies in the range scripts/setup delegates to the test user.
      t.agent("b", {{"mount", mounts}, {"iso", "uid\n"}, {"uid", "2000001\n"}, {"gid", "2000002\n"}});
      for (const std::string agent : {"a", "b"}) {
        for (const std::string action : {"fail", "late"}) {
          INFO(agent << ", supervisor.records:" << action);
          const std::string mark = "/out/" + agent + "-" + action;
          RunResult r = launch(t, m, {agent, "--", "/probe", "write:" + mark}, "supervisor.records:" + action);
          INFO("exit " << r.exit_code << ", stderr: " << r.err);
          CHECK(r.exit_code == 125);
          CHECK(r.err.find("injected fault at supervisor.records") != std::string::npos);
          CHECK_FALSE(std::filesystem::exists(tmp.path() + mark));
          CHECK(leftovers(t, {agent}).empty());
          CHECK(file(t, "agent/" + agent + ".d/status") == "dead\n");
        }
        // Not refused, the same runtime leaves its file.
        RunResult ok = launch(t, m, {agent, "--", "/probe", "write:/out/" + agent}, "");
        INFO(ok.err);
        CHECK(ok.exit_code == 0);
        CHECK(std::filesystem::exists(out + "/" + agent));
      }
    }
  }
}

TEST_CASE("a fault at the terminal step of an interactive launch leaves nothing behind", "[fault]") {
  for (const LaunchMode& m : modes()) {
    DYNAMIC_SECTION((m.privileged ? "root launches" : "the test user launches")) {
      CtxTree t(m.owner);
      t.agent("a");
      for (const std::string action : {"fail", "kill"}) {
        INFO(action);
        std::vector<std::string> argv{
            ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "a", "--", "/probe"};
        ctx::test::PtySession s(argv, m.as, {"CTX_FAULT=sandbox.terminal:" + action, "TERM=xterm"});
        int code = s.wait_exit();
        CHECK(code == 125);
        if (action == "fail") CHECK(s.output().find("injected fault at sandbox.terminal") != std::string::npos);
        CHECK(leftovers(t, {"a"}).empty());
        CHECK(file(t, "agent/a.d/status") == "dead\n");
        ctx::test::PtySession next(argv, m.as, {"TERM=xterm"});
        CHECK(next.wait_exit() == 0);
      }
    }
  }
}

TEST_CASE("a fault at every step of child create, start and stop: the next create or start of that child succeeds",
          "[fault]") {
  for (const LaunchMode& m : modes()) {
    DYNAMIC_SECTION((m.privileged ? "root launches" : "the test user launches")) {
      for (const auto& p : ctx::sys::fault_points()) {
        if (p.needs != "child") continue;
        for (const std::string& action : actions(p)) {
          INFO(p.name << ":" << action);
          CtxTree t(m.owner);
          write_family(t, m);
          RunResult r = launch(t, m, {"coder", "--", "/bin/sh", "-c", child_script(std::string(p.name))},
                               std::string(p.name) + ":" + action);
          INFO("exit " << r.exit_code << ", stderr: " << r.err);
          if (action == "fail") {
            // The request is refused; coder's script stops there.
            CHECK(r.exit_code != 0);
            CHECK(r.err.find("injected fault at " + std::string(p.name)) != std::string::npos);
          } else {
            CHECK(r.exit_code == 128 + SIGKILL);
            CHECK(file(t, "agent/coder.d/log").find("\"reason\":\"supervisor_killed\"") != std::string::npos);
          }
          const bool half_made = action == "kill" && p.name.rfind("child.create.", 0) == 0;
          CHECK(leftovers(t, {"coder", "rev"}, !half_made).empty());
          CHECK(file(t, "agent/coder.d/status") == "dead\n");
          // A create that failed before its commit left nothing of rev.
          bool created = std::filesystem::exists(t.root() + "/agent/rev.d");
          if (action == "fail" && p.name.rfind("child.create.", 0) == 0) CHECK_FALSE(created);
          RunResult next = launch(t, m,
                                  {"coder", "--", "/bin/sh", "-c",
                                   created ? retry_script("child.start") : retry_script(std::string(p.name))},
                                  "");
          INFO("retry stderr: " << next.err);
          CHECK(next.exit_code == 0);
          CHECK(leftovers(t, {"coder", "rev"}).empty());
        }
      }
    }
  }
}

TEST_CASE("a kill at every step of the cancellation sequence and of a parent's teardown leaves nothing behind",
          "[fault]") {
  for (const LaunchMode& m : modes()) {
    DYNAMIC_SECTION((m.privileged ? "root launches" : "the test user launches")) {
      for (const auto& p : ctx::sys::fault_points()) {
        if (p.needs != "cancel" && p.needs != "children") continue;
        INFO(p.name);
        CtxTree t(m.owner);
        write_family(t, m);
        // cancel: `stop` of coder (the signal `ctx agent stop` sends) while
        // coder, which ignores SIGTERM, runs rev; children: coder's
        // runtime ends while rev runs.
        bool cancel = p.needs == "cancel";
        std::string script = "set -e; " + kCreateRev + "; /ctx/bin/ctx agent start rev -- /probe notify:READY=1 " +
                             "ignore:TERM sleep:30 >/dev/null; " +
                             (cancel ? "exec /probe notify:READY=1 ignore:TERM sleep:30" : "exit 0");
        std::vector<std::string> argv{ctx::test::built("launcher/ctx-agent-run"),
                                      "--ctx-root",
                                      t.root(),
                                      "--cancel-grace-ms",
                                      "300",
                                      "coder",
                                      "--",
                                      "/bin/sh",
                                      "-c",
                                      script};
        ctx::test::Spawned s = ctx::test::spawn_command(argv, m.as, {"CTX_FAULT=" + std::string(p.name) + ":kill"});
        if (cancel) {
          REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/coder.d/status", "ready\n", 20000));
          REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/rev.d/status", "ready\n", 20000));
          REQUIRE(::kill(s.pid, SIGRTMIN + 3) == 0);
        }
        RunResult r = ctx::test::wait_command(s, 60);
        INFO("exit " << r.exit_code << ", stderr: " << r.err);
        CHECK(r.exit_code == 128 + SIGKILL);
        CHECK(leftovers(t, {"coder", "rev"}).empty());
        CHECK(file(t, "agent/coder.d/log").find("\"reason\":\"supervisor_killed\"") != std::string::npos);
        RunResult next = launch(t, m, {"coder", "--", "/bin/sh", "-c", retry_script("child.start")}, "");
        CHECK(next.exit_code == 0);
        CHECK(leftovers(t, {"coder", "rev"}).empty());
      }
    }
  }
}
