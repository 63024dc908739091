// An agent's life as its control directory shows it: status, pid, log
// and events follow the runtime; exit statuses and signals pass through;
// a failed, stale or killed instance leaves nothing behind.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "sys/recorder.hpp"
#include "test/support/launch.hpp"

using ctx::test::CtxTree;
using ctx::test::home_of;
using ctx::test::probe;
using ctx::test::processes_mentioning;
using ctx::test::run_probe;
using ctx::test::RunResult;
using ctx::test::TestUser;
using nlohmann::json;

namespace {

using Mode = ctx::test::LaunchMode;
using ctx::test::wait_gone;
constexpr auto mode = ctx::test::launch_mode;

}  // namespace

TEST_CASE("a failed launch leaves nothing behind and says why", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"mount", t.base_mounts() + "/nonexistent/src\t/x\tro\tbind\n"}});
  RunResult r = run_probe(t, m, "coder", {"ids"});
  CHECK(r.exit_code == 125);
  CHECK(r.err == "ctx-agent-run: coder.d/mount:3: /nonexistent/src -> /x: open /nonexistent/src: ENOENT\n");
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
  std::string log = t.dir().read("ctx/agent/coder.d/log");
  CHECK(log.find("\"type\":\"agent.error\"") != std::string::npos);
  CHECK(log.find("open /nonexistent/src: ENOENT") != std::string::npos);
  struct stat st {};
  CHECK(::lstat((t.root() + "/agent/coder.sock").c_str(), &st) == -1);
  // The lock is gone with the process: a corrected agent launches.
  t.agent("coder");
  probe(run_probe(t, m, "coder", {"ids"}));
}

TEST_CASE("exit status: the runtime's own, 128+signal, 126, 127", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  CHECK(run_probe(t, m, "coder", {"exit:3"}).exit_code == 3);
  CHECK(t.launch({"coder", "--", "/bin/sh", "-c", "kill -9 $$"}, m.as).exit_code == 137);
  RunResult missing = t.launch({"coder", "--", "/nope"}, m.as);
  CHECK(missing.exit_code == 127);
  CHECK(missing.err == "ctx-agent-run: runtime /nope: execve /nope: ENOENT\n");
  t.write("ctx/home/" + std::to_string(m.owner.uid) + "/agent/coder/root/plain", "not a program\n", 0644);
  RunResult noexec = t.launch({"coder", "--", "/plain"}, m.as);
  CHECK(noexec.exit_code == 126);
  CHECK(noexec.err == "ctx-agent-run: runtime /plain: execve /plain: EACCES\n");
  // The default runtime is the agent's executable entry, seen inside.
  RunResult dflt = t.launch({"coder"}, m.as);
  CHECK(dflt.exit_code == 127);
  CHECK(dflt.err == "ctx-agent-run: runtime /ctx/agent/coder: execve /ctx/agent/coder: ENOENT\n");
}

TEST_CASE("status, pid, log and events follow the runtime", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  auto sp = t.spawn({"coder", "--", "/probe", "notify:READY=1", "sleep:1", "notify:CTX_STATE=busy", "sleep:30"}, m.as);
  std::string d = t.root() + "/agent/coder.d/";
  CHECK(ctx::test::wait_for_file(d + "status", "ready\n"));
  CHECK(ctx::test::wait_for_file(d + "status", "busy\n"));
  CHECK(ctx::test::read_file(d + "pid") == std::to_string(sp.pid) + "\n");
  struct stat st {};
  CHECK(::lstat((t.root() + "/agent/coder.sock").c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  // One instance per session (instances_test.cpp: several sessions).
  RunResult second = run_probe(t, m, "coder", {"ids"});
  CHECK(second.exit_code == 125);
  CHECK(second.err == "ctx-agent-run: coder: EBUSY: session default is already running (supervisor pid " +
                          std::to_string(sp.pid) + "); stop it first, or launch with another --session\n");
  // SIGTERM is forwarded; the probe dies of it.
  REQUIRE(::kill(sp.pid, SIGTERM) == 0);
  RunResult r = ctx::test::wait_command(sp, 30);
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK(ctx::test::read_file(d + "status") == "dead\n");
  CHECK(::lstat((t.root() + "/agent/coder.sock").c_str(), &st) == -1);
  std::string log = ctx::test::read_file(d + "log");
  for (const char* ev : {"agent.start", "agent.exec", "agent.status", "agent.signal", "agent.stop"}) {
    INFO(ev);
    CHECK(log.find(std::string("\"type\":\"") + ev + "\"") != std::string::npos);
  }
  std::string events_path = home_of(t, "coder") + "/session/default/events.jsonl";
  // Even a root supervisor leaves the session files to the agent's owner.
  REQUIRE(::stat(events_path.c_str(), &st) == 0);
  CHECK(st.st_uid == m.owner.uid);
  REQUIRE(::stat((home_of(t, "coder") + "/session/default").c_str(), &st) == 0);
  CHECK(st.st_uid == m.owner.uid);
  std::string events = ctx::test::read_file(events_path);
  auto nl = events.find('\n');
  json start = json::parse(events.substr(0, nl));
  json stop = json::parse(events.substr(nl + 1, events.find('\n', nl + 1) - nl - 1));
  CHECK(start["type"] == "agent.start");
  CHECK(start["agent"] == "coder");
  CHECK(start["session"] == "default");
  CHECK(start["ts"].get<std::string>().size() == 24);
  CHECK(stop["type"] == "agent.stop");
  CHECK(stop["exit_status"] == 143);
}

TEST_CASE("READY=1 is forwarded to the launcher's own NOTIFY_SOCKET", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  t.mkdir("notify", 0777);
  std::string sock = t.dir().path() + "/notify/socket";
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  ::chmod(sock.c_str(), 0666);
  RunResult r = ctx::test::run_command(
      // The sender stays a moment: a message whose sender is already gone
      // cannot be attributed to the sandbox and is dropped (security.md).
      {ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder", "--", "/probe", "notify:READY=1",
       "sleep:0.3"},
      m.as, 60, {"NOTIFY_SOCKET=" + sock});
  probe(r);
  char buf[64] = {};
  ssize_t n = ::recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
  ::close(fd);
  CHECK(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0) == "READY=1");
}

TEST_CASE("a stale instance is cleaned up at the next launch", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"status", "busy\n"}, {"pid", "999999\n"}});
  // A socket file left by a supervisor that was SIGKILLed.
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::snprintf(a.sun_path, sizeof a.sun_path, "%s", (t.root() + "/agent/coder.sock").c_str());
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  ::close(fd);
  if (::geteuid() == 0) ::lchown((t.root() + "/agent/coder.sock").c_str(), m.owner.uid, m.owner.gid);
  probe(run_probe(t, m, "coder", {"listenfd"}));
  std::string log = t.dir().read("ctx/agent/coder.d/log");
  CHECK(log.find("\"type\":\"agent.reap\"") != std::string::npos);
  CHECK(log.find("\"previous_status\":\"busy\"") != std::string::npos);
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
}

TEST_CASE("SIGINT, SIGHUP and SIGQUIT are forwarded too", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  for (int sig : {SIGINT, SIGHUP, SIGQUIT}) {
    INFO(sig);
    auto sp = t.spawn({"coder", "--", "/probe", "notify:READY=1", "sleep:30"}, m.as);
    REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/coder.d/status", "ready\n"));
    REQUIRE(::kill(sp.pid, sig) == 0);
    RunResult r = ctx::test::wait_command(sp, 30);
    CHECK(r.exit_code == 128 + sig);
  }
}

TEST_CASE("nothing keeps running after a failed launch or a killed supervisor", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"mount", t.base_mounts() + "/nonexistent\t/x\tro\tbind\n"}});
  CHECK(run_probe(t, m, "coder", {"ids"}).exit_code == 125);
  CHECK(processes_mentioning(t.root()).empty());

  // SIGKILL of the supervisor: the sandbox's init has PDEATHSIG, and with
  // pid 1 gone the kernel ends the whole sandbox.
  t.agent("coder");
  // Unique to this runner: the [root] and [userns] runs go in parallel.
  std::string token = "sleep:29." + std::to_string(::getpid());
  auto sp = t.spawn({"coder", "--", "/probe", "notify:READY=1", token}, m.as);
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/coder.d/status", "ready\n"));
  // The supervisor, its watchdog, the sandbox init, the probe.
  const std::vector<int> four = processes_mentioning(token);
  CHECK(four.size() == 4);
  // The watchdog shares the supervisor's memory (sys/recorder.hpp): its
  // start copies no page table, and no write of the supervisor's faults a
  // copied page in. Every other process has memory of its own.
  int sharing = 0;
  for (int q : four)
    if (q != sp.pid && ::syscall(SYS_kcmp, sp.pid, q, KCMP_VM, 0, 0) == 0) ++sharing;
  if (ctx::sys::recorder_shares_memory()) CHECK(sharing == 1);
  REQUIRE(::kill(sp.pid, SIGKILL) == 0);
  RunResult r = ctx::test::wait_command(sp, 30);
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK(wait_gone(token, 2000));
  // The watchdog left nothing stale: the agent is dead, with the reason,
  // its socket is gone (it used to stay `ready` until the next launch).
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
  CHECK(t.dir().read("ctx/agent/coder.d/log").find("\"reason\":\"supervisor_killed\"") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.root() + "/agent/coder.sock"));
  probe(run_probe(t, m, "coder", {"ids"}));
}

// The sandbox's init kills and reaps what the runtime left before it tells
// the supervisor the runtime ended (end_sandbox), and the supervisor marks
// the agent dead only on that word or after the init's exit: whoever sees
// `dead` sees nothing of the sandbox running. The token is built by the
// shell, so that only the left process's command line holds it, not the
// launcher's.
TEST_CASE("what the runtime left running is gone once the agent is dead", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  const std::string tail = std::to_string(::getpid());
  const std::string token = "sleep:29." + tail;
  auto sp = t.spawn({"coder", "--", "/bin/sh", "-c", "s=29; /probe sleep:$s." + tail + " & sleep 0.2; exit 3"}, m.as);
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/coder.d/status", "dead\n", 20000));
  CHECK(processes_mentioning(token).empty());
  CHECK(ctx::test::wait_command(sp, 30).exit_code == 3);
  CHECK(processes_mentioning(token).empty());
}

TEST_CASE("a long log does not stop the next launch (status, pid and log are not read)", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"log", std::string(70000, 'x') + "\n"}, {"status", "garbage that is no status\n"}});
  probe(run_probe(t, m, "coder", {"ids"}));
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
}

// Records are replaced through a spare file, the previous content's,
// which the next replace writes again (sys::replace_via_spare). A reader
// that opened a record before it was replaced still holds that file: it
// must never see it rewritten. And with nobody holding them, the launches
// cycle through the same two files of each record, making none.
TEST_CASE("a record held open is never rewritten; unheld, records reuse their files", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"status", "held open\n"}});
  const std::string d = t.root() + "/agent/coder.d/";
  const std::string spare = d + "instance/default/.spare.d-status";
  // The record as its writer leaves it: a root launch writes <name>.d's
  // records as root. (One of the owner's, say from an unprivileged launch
  // of the same agent, is never written by root once it is the spare: that
  // record then takes a new file at each replace, whose inode numbers the
  // file system may or may not hand out again; the check below would pass
  // or fail by that alone.)
  if (m.as.uid == 0) REQUIRE(::chown((d + "status").c_str(), 0, 0) == 0);
  int held = ::open((d + "status").c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(held >= 0);
  for (int i = 0; i < 2; ++i) probe(run_probe(t, m, "coder", {"ids"}));
  char buf[64] = {};
  CHECK(::pread(held, buf, sizeof buf - 1, 0) == 10);
  CHECK(std::string(buf) == "held open\n");
  ::close(held);
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
  auto inodes = [&] {
    std::set<ino_t> out;
    for (const std::string& p : {d + "status", spare, d + "instance/default/status",
                                 d + "instance/default/.spare.status"}) {
      struct stat st {};
      if (::lstat(p.c_str(), &st) == 0) out.insert(st.st_ino);
    }
    return out;
  };
  // Which file has which inode, for a failure's message.
  auto names = [&] {
    std::string out;
    for (const std::string& p :
         {d + "status", spare, d + "instance/default/status", d + "instance/default/.spare.status"}) {
      struct stat st {};
      out += p.substr(d.size()) + "=" + (::lstat(p.c_str(), &st) == 0 ? std::to_string(st.st_ino) : "-") + " ";
    }
    return out;
  };
  probe(run_probe(t, m, "coder", {"ids"}));
  const std::set<ino_t> before = inodes();
  const std::string named = names();
  CHECK(before.size() == 4);
  probe(run_probe(t, m, "coder", {"ids"}));
  INFO("before: " << named << "; after: " << names() << "; log: " << t.dir().read("ctx/agent/coder.d/log"));
  CHECK(inodes() == before);
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
}

// The attack review of the spares (docs/security.md, "Records written
// through kept spare files"): a root launch never writes through a file
// the owner planted at a spare's name (here root's own 0600 file, which
// the owner of the .d could rename there but not write), and what stands
// at a session record's name when it is replaced stays in the session's
// directory, never moved into the owner's .d.
TEST_CASE("a spare the owner planted is never written through", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  CtxTree t(*u);
  t.agent("coder");
  const TestUser root{0, 0, "root"};
  REQUIRE(t.launch({"coder", "--", "/probe", "ids"}, root).exit_code == 0);
  const std::string planted = t.root() + "/agent/coder.d/instance/default/.spare.status";
  ::unlink(planted.c_str());
  int fd = ::open(planted.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "root's secret\n", 14) == 14);
  ::close(fd);
  REQUIRE(t.launch({"coder", "--", "/probe", "ids"}, root).exit_code == 0);
  struct stat st {};
  REQUIRE(::lstat(planted.c_str(), &st) == 0);
  CHECK(st.st_uid == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(ctx::test::read_file(planted) == "root's secret\n");
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
}

TEST_CASE("what stands at a session record's name stays in the session", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  auto sp = t.spawn({"coder", "--", "/probe", "notify:READY=1", "sleep:2"}, m.as);
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/coder.d/status", "ready\n"));
  // The agent (or another user of a shared space) puts a directory at
  // its session's state while it runs.
  const std::string session = home_of(t, "coder") + "/session/default";
  REQUIRE(::unlink((session + "/state").c_str()) == 0);
  REQUIRE(::mkdir((session + "/state").c_str(), 0755) == 0);
  REQUIRE(::chmod((session + "/state").c_str(), 0777) == 0);
  CHECK(ctx::test::wait_command(sp, 30).exit_code == 0);
  struct stat st {};
  CHECK(::lstat((t.root() + "/agent/coder.d/instance/default/.spare.session-state").c_str(), &st) != 0);
  for (const auto& e : std::filesystem::directory_iterator(t.root() + "/agent/coder.d/instance/default")) {
    INFO(e.path());
    CHECK(e.is_regular_file());
  }
  REQUIRE(::lstat((session + "/.spare.state").c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK(t.dir().read(session.substr(t.dir().path().size() + 1) + "/state") == "done\n");
}

// A flood of sd_notify messages is rate-limited, and the log is capped.
TEST_CASE("notify floods are dropped and the log rotates at its cap", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"mount", t.base_mounts() + "/etc\t/etc\tro\trbind\n"}});
  const std::string flood =
      "import os,socket\n"
      "s=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM)\n"
      "for i in range(20000): s.sendto(b'BUSY=1' if i%2 else b'IDLE=1', os.environ['NOTIFY_SOCKET'])\n";
  RunResult r = t.launch({"coder", "--", "/usr/bin/python3", "-c", flood}, m.as);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::string log = t.dir().read("ctx/agent/coder.d/log");
  std::size_t lines = static_cast<std::size_t>(std::count(log.begin(), log.end(), '\n'));
  CHECK(lines < 400);  // 20000 without the limit
  CHECK(log.find("\"dropped\"") != std::string::npos);
  // A log at its cap becomes log.1; the new log starts with this launch.
  t.write("ctx/agent/coder.d/log", std::string((1 << 20) - 10, 'x') + "\n");
  probe(run_probe(t, m, "coder", {"ids"}));
  CHECK(t.dir().read("ctx/agent/coder.d/log.1").size() == (1 << 20) - 9);
  std::string fresh = t.dir().read("ctx/agent/coder.d/log");
  CHECK(fresh.size() < 4096);
  CHECK(fresh.find("agent.start") != std::string::npos);
}
