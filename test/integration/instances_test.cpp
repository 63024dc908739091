// Several instances of one agent (docs/abi.md, "Instances"): distinct
// sessions run at once, each with its own supervisor, records, socket and
// cgroup leaf; one session runs once.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cgroup/discover.hpp"
#include "cgroup/placement.hpp"
#include "sys/mountinfo.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;
using ctx::test::Spawned;
using ctx::test::TestUser;

namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// (session, type) of each line of a JSONL log, with its previous_status
// or cgroup for an agent.reap.
std::set<std::string> records_of(const std::string& jsonl) {
  std::set<std::string> out;
  for (const auto& l : lines_of(jsonl)) {
    auto j = nlohmann::json::parse(l);
    std::string r = j.value("session", "") + " " + j.value("type", "");
    if (j.contains("previous_status")) r += " previous_status=" + j["previous_status"].get<std::string>();
    if (j.contains("cgroup")) r += " cgroup=" + j["cgroup"].get<std::string>();
    out.insert(r);
  }
  return out;
}

std::string sessions_policy(const std::string& type, int n) {
  std::string rules;
  for (int i = 1; i <= n; ++i)
    for (const char* p : {"write", "resume"})
      rules += "allow " + type + " session:r" + std::to_string(i) + " " + p + "\n";
  return rules;
}

// An agent `rev` whose policy allows the sessions r1..r<n>.
void make_rev(CtxTree& t, int n) {
  t.agent("rev");
  t.set_policy("rev", sessions_policy("rev_t", n));
}

struct Fleet {
  CtxTree& t;
  TestUser as;
  std::vector<Spawned> running;

  std::string d() const { return t.root() + "/agent/rev.d/"; }
  std::string instance(const std::string& s, const std::string& file) const {
    return d() + "instance/" + s + "/" + file;
  }
  std::string session_dir(const std::string& s) const {
    return t.root() + "/home/" + std::to_string(t.owner().uid) + "/agent/rev/session/" + s;
  }
  // Session s, ready (READY=1, or busy) and then waiting to be stopped.
  Spawned& start(const std::string& s, bool busy = false) {
    std::vector<std::string> args{"rev", "--session", s, "--", "/probe", "notify:READY=1"};
    if (busy) args.push_back("notify:CTX_STATE=busy");
    args.push_back("sleep:60");
    running.push_back(t.spawn(args, as));
    return running.back();
  }
};

}  // namespace

TEST_CASE("five instances of one agent run at once, one per session, each with its own records", "[root][userns]") {
  auto mode = ctx::test::launch_mode();
  CtxTree t(mode.owner);
  make_rev(t, 5);
  Fleet f{t, mode.as, {}};
  f.running.reserve(5);
  // r1 first: it takes the agent's lock and is the primary instance.
  f.start("r1");
  REQUIRE(ctx::test::wait_for_file(f.instance("r1", "status"), "ready\n", 60000));
  for (int i = 2; i <= 5; ++i) f.start("r" + std::to_string(i));
  for (int i = 1; i <= 5; ++i) {
    const std::string s = "r" + std::to_string(i);
    INFO(s);
    REQUIRE(ctx::test::wait_for_file(f.instance(s, "status"), "ready\n", 60000));
    CHECK(slurp(f.instance(s, "pid")) == std::to_string(f.running[i - 1].pid) + "\n");
  }
  // <name>.d/status, pid and <name>.sock are the primary's, as with one instance.
  CHECK(slurp(f.d() + "status") == "ready\n");
  CHECK(slurp(f.d() + "pid") == std::to_string(f.running[0].pid) + "\n");
  CHECK(exists(t.root() + "/agent/rev.sock"));
  for (int i = 2; i <= 5; ++i) CHECK(exists(t.root() + "/agent/rev@r" + std::to_string(i) + ".sock"));

  RunResult ps = ctx::test::run_command({ctx::test::built("ctx/ctx"), "ps", "--ctx-root", t.root()});
  INFO(ps.out);
  CHECK(ps.exit_code == 0);
  auto l = lines_of(ps.out);
  REQUIRE(l.size() == 6);
  for (int i = 1; i <= 5; ++i) {
    char want[128];
    std::snprintf(want, sizeof want, "%-24s %-12s %-9s %8d ", "rev", ("r" + std::to_string(i)).c_str(), "ready",
                  f.running[i - 1].pid);
    CHECK(l[i].rfind(want, 0) == 0);
  }

  for (auto& sp : f.running) REQUIRE(::kill(sp.pid, SIGTERM) == 0);
  for (auto& sp : f.running) CHECK(ctx::test::wait_command(sp, 60).exit_code == 128 + SIGTERM);
  CHECK(slurp(f.d() + "status") == "dead\n");
  const auto log = records_of(slurp(f.d() + "log"));
  for (int i = 1; i <= 5; ++i) {
    const std::string s = "r" + std::to_string(i);
    INFO(s);
    CHECK(slurp(f.instance(s, "status")) == "dead\n");
    CHECK_FALSE(exists(t.root() + "/agent/rev@" + s + ".sock"));
    CHECK(slurp(f.session_dir(s) + "/state") == "failed\n");
    // The session's own stream: its start and stop, nothing of the others.
    CHECK(records_of(slurp(f.session_dir(s) + "/events.jsonl")) ==
          std::set<std::string>{s + " agent.start", s + " agent.stop"});
    // <name>.d/log holds every instance's records, each with its session.
    for (const char* ev : {"agent.start", "agent.exec", "agent.signal", "agent.stop"})
      CHECK(log.count(s + " " + ev) == 1);
  }
  CHECK_FALSE(exists(t.root() + "/agent/rev.sock"));
  RunResult after = ctx::test::run_command({ctx::test::built("ctx/ctx"), "ps", "--ctx-root", t.root()});
  CHECK(after.out == "AGENT                    SESSION      STATUS         PID   UPTIME  CGROUP\n");
}

TEST_CASE("one session runs once: a second launch of it is EBUSY, naming the session and its supervisor",
          "[root][userns]") {
  auto mode = ctx::test::launch_mode();
  CtxTree t(mode.owner);
  make_rev(t, 2);
  Fleet f{t, mode.as, {}};
  f.running.reserve(2);
  f.start("r1");
  REQUIRE(ctx::test::wait_for_file(f.instance("r1", "status"), "ready\n", 60000));
  f.start("r2");  // an extra instance
  REQUIRE(ctx::test::wait_for_file(f.instance("r2", "status"), "ready\n", 60000));
  for (int i = 0; i < 2; ++i) {
    const std::string s = "r" + std::to_string(i + 1);
    RunResult again = t.launch({"rev", "--session", s, "--", "/probe", "ids"}, mode.as);
    CHECK(again.exit_code == 125);
    CHECK(again.err == "ctx-agent-run: rev: EBUSY: session " + s + " is already running (supervisor pid " +
                           std::to_string(f.running[i].pid) + "); stop it first, or launch with another --session\n");
  }
  // The refused launches changed nothing of the running ones.
  CHECK(slurp(f.d() + "pid") == std::to_string(f.running[0].pid) + "\n");
  CHECK(slurp(f.instance("r2", "status")) == "ready\n");
  CHECK(exists(t.root() + "/agent/rev@r2.sock"));
  for (auto& sp : f.running) REQUIRE(::kill(sp.pid, SIGTERM) == 0);
  for (auto& sp : f.running) CHECK(ctx::test::wait_command(sp, 60).exit_code == 128 + SIGTERM);
}

TEST_CASE("an instance killed with SIGKILL is reaped when its session is launched again; the others run on",
          "[root][userns]") {
  auto mode = ctx::test::launch_mode();
  CtxTree t(mode.owner);
  make_rev(t, 3);
  Fleet f{t, mode.as, {}};
  f.running.reserve(3);
  f.start("r1", true);  // the primary, busy: its status is not r2's
  REQUIRE(ctx::test::wait_for_file(f.instance("r1", "status"), "busy\n", 60000));
  f.start("r2");
  f.start("r3");
  for (const char* s : {"r2", "r3"}) REQUIRE(ctx::test::wait_for_file(f.instance(s, "status"), "ready\n", 60000));
  // r2's supervisor and everything in its process group (its watchdog):
  // nothing cleans up after it.
  REQUIRE(::kill(-f.running[1].pid, SIGKILL) == 0);
  ctx::test::wait_command(f.running[1], 60);
  CHECK(slurp(f.instance("r2", "status")) == "ready\n");  // a dead supervisor's last word
  RunResult again = t.launch({"rev", "--session", "r2", "--", "/probe", "ids"}, mode.as);
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(slurp(f.instance("r2", "status")) == "dead\n");
  const auto log = records_of(slurp(f.d() + "log"));
  CHECK(log.count("r2 agent.reap previous_status=ready") == 1);
  CHECK(log.count("r2 agent.reap previous_status=busy") == 0);
  for (const char* s : {"r1", "r3"}) CHECK(log.count(std::string(s) + " agent.reap previous_status=ready") == 0);
  // The others run on; the primary's files were never touched.
  CHECK(slurp(f.d() + "status") == "busy\n");
  CHECK(slurp(f.d() + "pid") == std::to_string(f.running[0].pid) + "\n");
  for (int i : {0, 2}) CHECK(::kill(f.running[i].pid, 0) == 0);
  CHECK(slurp(f.instance("r3", "status")) == "ready\n");

  // The primary ends while r3 runs: <name>.d/status says so, and the next
  // launch (the primary now) leaves r3 alone.
  REQUIRE(::kill(f.running[0].pid, SIGTERM) == 0);
  CHECK(ctx::test::wait_command(f.running[0], 60).exit_code == 128 + SIGTERM);
  CHECK(slurp(f.d() + "status") == "dead\n");
  RunResult next = t.launch({"rev", "--session", "r1", "--", "/probe", "ids"}, mode.as);
  INFO(next.err);
  CHECK(next.exit_code == 0);
  CHECK(slurp(f.instance("r3", "status")) == "ready\n");
  CHECK(::kill(f.running[2].pid, 0) == 0);
  REQUIRE(::kill(f.running[2].pid, SIGTERM) == 0);
  CHECK(ctx::test::wait_command(f.running[2], 60).exit_code == 128 + SIGTERM);
}

TEST_CASE("each instance has a cgroup leaf of its own, all gone after; a relaunch reaps only its own", "[cgroup]") {
  auto owner = ctx::test::test_user();
  REQUIRE(owner);
  CtxTree t(*owner);
  make_rev(t, 5);
  Fleet f{t, TestUser{0, 0, "root"}, {}};
  f.running.reserve(5);
  auto mounts = ctx::sys::read_mountinfo();
  REQUIRE(mounts);
  auto m = ctx::cgroup::find_cgroup2(*mounts);
  REQUIRE(m);
  const std::string primary = m->mount_point + "/cortexfs/user-" + std::to_string(owner->uid) + "/" +
                              ctx::cgroup::agent_cgroup_name("rev", t.root());
  auto leaf = [&](int i) { return i == 1 ? primary : primary + "@r" + std::to_string(i); };
  f.start("r1");
  REQUIRE(ctx::test::wait_for_file(f.instance("r1", "status"), "ready\n", 60000));
  for (int i = 2; i <= 5; ++i) f.start("r" + std::to_string(i));
  for (int i = 1; i <= 5; ++i) {
    INFO(i);
    REQUIRE(ctx::test::wait_for_file(f.instance("r" + std::to_string(i), "status"), "ready\n", 60000));
    CHECK_FALSE(slurp(leaf(i) + "/runtime/cgroup.procs").empty());
  }
  // A SIGKILLed extra's leaf is left behind; its relaunch reaps it, and
  // only it.
  REQUIRE(::kill(-f.running[3].pid, SIGKILL) == 0);
  ctx::test::wait_command(f.running[3], 60);
  REQUIRE(exists(leaf(4)));
  RunResult again = t.launch({"rev", "--session", "r4", "--", "/probe", "ids"}, f.as);
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(records_of(slurp(f.d() + "log")).count("r4 agent.reap cgroup=" + leaf(4)) == 1);
  CHECK_FALSE(exists(leaf(4)));
  for (int i : {1, 2, 3, 5}) CHECK_FALSE(slurp(leaf(i) + "/runtime/cgroup.procs").empty());
  for (int i : {0, 1, 2, 4}) REQUIRE(::kill(f.running[static_cast<std::size_t>(i)].pid, SIGTERM) == 0);
  for (int i : {0, 1, 2, 4}) ctx::test::wait_command(f.running[static_cast<std::size_t>(i)], 60);
  for (int i = 1; i <= 5; ++i) CHECK_FALSE(exists(leaf(i)));
}

TEST_CASE("ctx ps shows a runtime that never sends READY=1 as running, not start", "[root][userns]") {
  auto mode = ctx::test::launch_mode();
  CtxTree t(mode.owner);
  make_rev(t, 1);
  Fleet f{t, mode.as, {}};
  f.running.reserve(1);
  f.running.push_back(t.spawn({"rev", "--", "/probe", "sleep:60"}, mode.as));
  for (int i = 0; i < 600 && !exists(f.instance("default", "exec")); ++i) ::usleep(100000);
  REQUIRE(exists(f.instance("default", "exec")));
  CHECK(slurp(f.d() + "status") == "start\n");  // the file keeps seed 000's word
  RunResult ps = ctx::test::run_command({ctx::test::built("ctx/ctx"), "ps", "--ctx-root", t.root()});
  auto l = lines_of(ps.out);
  REQUIRE(l.size() == 2);
  char want[128];
  std::snprintf(want, sizeof want, "rev                      default      running   %8d ", f.running[0].pid);
  CHECK(l[1].substr(0, std::string(want).size()) == want);
  REQUIRE(::kill(f.running[0].pid, SIGTERM) == 0);
  CHECK(ctx::test::wait_command(f.running[0], 60).exit_code == 128 + SIGTERM);
}

TEST_CASE("a session's instance directory a root launch made is its .d owner's: the owner launches it next", "[root]") {
  auto owner = ctx::test::test_user();
  REQUIRE(owner);
  CtxTree t(*owner);
  make_rev(t, 1);
  const std::string d = t.root() + "/agent/rev.d/";
  struct stat st {};
  REQUIRE(::stat(d.c_str(), &st) == 0);
  REQUIRE(st.st_uid == owner->uid);  // the owner keeps its agent's .d
  RunResult by_root = t.launch({"rev", "--session", "r1", "--", "/probe", "ids"}, TestUser{0, 0, "root"});
  INFO(by_root.err);
  CHECK(by_root.exit_code == 0);
  for (const char* dir : {"instance", "instance/r1"}) {
    REQUIRE(::stat((d + dir).c_str(), &st) == 0);
    CHECK(st.st_uid == owner->uid);
  }
  RunResult by_owner = t.launch({"rev", "--session", "r1", "--", "/probe", "ids"}, *owner);
  INFO(by_owner.err);
  CHECK(by_owner.exit_code == 0);
  CHECK(slurp(d + "instance/r1/status") == "dead\n");
}
