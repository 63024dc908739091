// The launcher's command line: --dry-run, --json-status-fd, --version and
// the usage line.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>

#include <string>

#include <nlohmann/json.hpp>

#include "test/support/launch.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;
using nlohmann::json;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

}  // namespace

TEST_CASE("--dry-run prints the plan and touches nothing", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"status", "dead\n"}});
  RunResult r = t.launch({"--dry-run", "coder", "--", "/probe", "ids"}, m.as);
  REQUIRE(r.exit_code == 0);
  json plan = json::parse(r.out);
  CHECK(plan["agent"] == "coder");
  CHECK(plan["argv"] == json{"/probe", "ids"});
  CHECK(plan["network"] == "loopback");
  CHECK(plan["ids"]["privileged_caller"] == m.privileged);
  // The root, then the table ordered parents-before-children, then by name.
  CHECK(plan["mounts"][0]["step"] == "root");
  CHECK(plan["mounts"][1]["target"] == "/probe");
  CHECK(plan["mounts"][2]["target"] == "/usr");
  CHECK(plan["mounts"].back()["step"] == "seal");  // /run/ctx, the last step
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
  struct stat st {};
  CHECK(::lstat((t.root() + "/agent/coder.d/log").c_str(), &st) == -1);
}

TEST_CASE("--json-status-fd reports pid, namespaces, timings and exit status", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  RunResult r = t.launch({"--json-status-fd", "1", "coder", "--", "/bin/true"}, m.as);
  REQUIRE(r.exit_code == 0);
  auto nl = r.out.find('\n');
  json started = json::parse(r.out.substr(0, nl));
  json exited = json::parse(ctx::test::probe_json_line(r.out));
  CHECK(started["event"] == "started");
  CHECK(started["pid"].get<int>() > 1);
  for (const char* ns : {"mnt", "pid", "net", "uts", "ipc", "user"}) {
    INFO(ns);
    CHECK(started["namespaces"][ns].get<unsigned long>() > 0);
  }
  for (const char* step : {"prepare", "id_maps", "private_mounts", "owner_ids", "root", "binds", "proc", "dev",
                           "run_ctx", "network", "pivot_root", "cwd", "identity", "total"}) {
    INFO(step);
    CHECK(started["timings_us"].contains(step));
  }
  CHECK(exited == json{{"event", "exited"}, {"agent", "coder"}, {"exit_status", 0}});
}

// The sandbox reports its namespaces itself when the supervisor does not
// write its id maps (launcher/sandbox/start.hpp, supervisor_maps_ids); the
// supervisor's peer checks rest on the pid namespace among them. Each
// must be the sandbox's own, as root reads it from outside.
TEST_CASE("--json-status-fd: the namespaces reported are the sandbox's own", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  auto sp = t.spawn({"--json-status-fd", "1", "coder", "--", "/probe", "sleep:30"}, m.as);
  std::string first;
  char c;
  while (::read(sp.out_fd, &c, 1) == 1 && c != '\n') first += c;
  json started = json::parse(first);
  const std::string proc = "/proc/" + std::to_string(started["pid"].get<int>()) + "/ns/";
  for (const char* ns : {"pid", "user", "mnt", "net", "uts", "ipc", "cgroup"}) {
    INFO(ns);
    struct stat st {};
    REQUIRE(::stat((proc + ns).c_str(), &st) == 0);
    CHECK(started["namespaces"][ns].get<unsigned long>() == st.st_ino);
    struct stat own {};
    REQUIRE(::stat((std::string("/proc/self/ns/") + ns).c_str(), &own) == 0);
    if (std::string(ns) != "cgroup") CHECK(st.st_ino != own.st_ino);
  }
  ::kill(sp.pid, SIGTERM);
  CHECK(ctx::test::wait_command(sp, 30).exit_code == 128 + SIGTERM);
}

TEST_CASE("the command line: --version, the usage line, a closed --json-status-fd", "[fs]") {
  std::string run = ctx::test::built("launcher/ctx-agent-run");
  RunResult v = ctx::test::run_command({run, "--version"});
  CHECK(v.exit_code == 0);
  CHECK(v.out.rfind("ctx-agent-run ", 0) == 0);
  CHECK(ctx::test::run_command({ctx::test::built("ctx/ctx"), "--version"}).out.rfind("ctx ", 0) == 0);
  RunResult h = ctx::test::run_command({run, "--help"});
  CHECK(h.out.find("[OPTIONS] NAME [-- CMD ARG...]") != std::string::npos);
  RunResult fd = ctx::test::run_command({run, "--json-status-fd", "9", "coder"});
  CHECK(fd.exit_code == 2);
  CHECK(fd.err ==
        "ctx-agent-run: --json-status-fd 9: EBADF: not an open file descriptor; open it for the launcher "
        "(e.g. 3>file)\n");
  // The watchdog's own entry (launcher/supervisor/watchdog.hpp) takes only
  // the memfd a watchdog recorded: by hand it refuses and does nothing.
  for (const char* arg : {"2", "x", "99999999999"}) {
    INFO(arg);
    RunResult w = ctx::test::run_command({run, "--watchdog", arg});
    CHECK(w.exit_code == 2);
    CHECK(w.err == "ctx-agent-run: --watchdog is the launcher's own; it is not run by hand\n");
  }
}
