#include <catch2/catch.hpp>

#include <unistd.h>

#include "ctx/check.hpp"
#include "ctx/ps.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::helper::format_ps;
using ctx::helper::PsRow;

TEST_CASE("ctx ps draws children under their parent", "[unit]") {
  std::vector<PsRow> rows{
      {"rev-1", "coder", "busy", 201, 5, "/cortexfs/user-1000/agent-rev-1/runtime", "default"},
      {"coder", "", "ready", 100, 3725, "/cortexfs/user-1000/agent-coder/runtime", "default"},
      {"coder", "", "running", 110, 70, "/cortexfs/user-1000/agent-coder@s2/runtime", "s2"},
      {"lone", "gone", "idle", 300, 61, "-", "default"},
      {"grand", "rev-1", "start", 401, 0, "-", "default"},
  };
  // A second instance of coder is a row of its own; the children are
  // drawn once, under the first.
  CHECK(format_ps(rows) ==
        "AGENT                    SESSION      STATUS         PID   UPTIME  CGROUP\n"
        "coder                    default      ready          100    1h02m  /cortexfs/user-1000/agent-coder/runtime\n"
        "  `-rev-1                default      busy           201       5s  /cortexfs/user-1000/agent-rev-1/runtime\n"
        "    `-grand              default      start          401       0s  -\n"
        "coder                    s2           running        110    1m10s  /cortexfs/user-1000/agent-coder@s2/runtime\n"
        "lone                     default      idle           300    1m01s  -\n");
  // A parent cycle is drawn once, not forever.
  std::vector<PsRow> cycle{{"a", "b", "ready", 1, 0, "-", "default"}, {"b", "a", "ready", 2, 0, "-", "default"}};
  CHECK_FALSE(format_ps(cycle).empty());
}

TEST_CASE("ctx status explains a missing status file", "[fs]") {
  ctx::test::TempDir t;
  t.mkdir("ctx");
  auto r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "status", "--ctx-root", t / "ctx"});
  CHECK(r.exit_code == 1);
  CHECK(r.err ==
        "ctx status: " + (t / "ctx") +
            "/status: ENOENT: missing: the CTX root's status (docs/abi.md, \"The root's status file\") is written by whatever mounts the "
            "root; a tree made by hand has none (write one line, e.g. \"ok\", or check the --ctx-root)\n");
}

TEST_CASE("ctx ps without a CTX root fails and says what to do", "[fs]") {
  ctx::test::TempDir t;
  auto r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "ps", "--ctx-root", t / "none"});
  CHECK(r.exit_code == 1);
  CHECK(r.out.empty());
  CHECK(r.err == "ctx ps: " + (t / "none") +
                     ": ENOENT: no CTX root here (it has no agent/ directory); pass --ctx-root DIR or set CTX_ROOT "
                     "(ctx init makes a tree)\n");
}

TEST_CASE("ctx ps shows a running user agent as name@U, apart from its system namesake", "[fs]") {
  ctx::test::TempDir t;
  const std::string me = std::to_string(::getpid());  // a live pid: this test's
  for (const std::string d : {"agent/coder.d/instance/default/", "home/999/agent/coder.d/instance/default/"}) {
    t.write(d + "status", "ready\n");
    t.write(d + "pid", me + "\n");
  }
  t.mkdir("home/999/agent/coder");  // the agent home's state directory: not an agent
  t.mkdir("home/x/agent/bad.d");    // not a uid: not a user tier
  t.mkdir("agent");
  auto rows = ctx::helper::running_agents(t.path());
  REQUIRE(rows);
  std::vector<std::string> names;
  for (const auto& r : *rows) names.push_back(r.name);
  CHECK(names == std::vector<std::string>{"coder", "coder@999"});
  CHECK(ctx::helper::user_agent_names(t.path()) == std::vector<std::pair<std::uint32_t, std::string>>{{999u, "coder"}});
}

TEST_CASE("ctx ps shows each live instance, and `running` for a start status once exec'd", "[fs]") {
  ctx::test::TempDir t;
  const std::string me = std::to_string(::getpid());
  const std::string d = "agent/coder.d/instance/";
  t.write(d + "default/status", "start\n");  // exec'd, never sent READY=1
  t.write(d + "default/pid", me + "\n");
  t.write(d + "default/exec", "2026-11-27T03:00:00.000Z\n");
  t.write(d + "s2/status", "start\n");  // still setting up its sandbox
  t.write(d + "s2/pid", me + "\n");
  t.write(d + "s3/status", "dead\n");
  t.write(d + "s3/pid", me + "\n");
  t.write(d + "s4/status", "busy\n");
  t.write(d + "s4/pid", "999999999\n");  // no such process: a stale pid
  auto rows = ctx::helper::running_agents(t.path());
  REQUIRE(rows);
  REQUIRE(rows->size() == 2);
  CHECK((*rows)[0].session == "default");
  CHECK((*rows)[0].status == "running");
  CHECK((*rows)[1].session == "s2");
  CHECK((*rows)[1].status == "start");
  PsRow shown = (*rows)[0];
  shown.uptime_s = 75;
  CHECK(format_ps({shown}) ==
        "AGENT                    SESSION      STATUS         PID   UPTIME  CGROUP\n"
        "coder                    default      running   " + std::string(8 - me.size(), ' ') + me + "    1m15s  -\n");
}

TEST_CASE("ctx check --user reads the user tier and says its refusals", "[fs]") {
  ctx::test::TempDir t;
  t.mkdir("agent");
  t.write("home/999/agent/coder.d/owner", "1000\n");
  t.write("home/999/agent/coder.d/gid", "0\n");
  t.write("home/999/agent/coder.d/parent", "agent:lead\n");
  auto f = ctx::helper::check_agent(t.path(), "coder", 999u);
  std::vector<std::string> errors;
  for (const auto& x : f)
    if (x.level == ctx::helper::Finding::Level::error) errors.push_back(x.text.substr(0, x.text.find(':', 30)));
  REQUIRE(errors.size() >= 2);
  CHECK(errors[0].rfind("home/999/agent/coder.d/owner: EPERM", 0) == 0);
  CHECK(errors[1].rfind("home/999/agent/coder.d/parent: ENOTSUP", 0) == 0);
  // The system tier has no coder.
  CHECK(ctx::helper::check_agent(t.path(), "coder").front().text.find("ENOENT") != std::string::npos);
}
