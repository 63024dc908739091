// ctx-agent-run in real sandboxes. Every TEST_CASE tagged [root][userns]
// runs twice: launched by root (a privileged launch, as from systemd) and
// by the unprivileged test user. ctx-probe reports from inside.
#include <catch2/catch.hpp>

#include <functional>

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ctx/kernel_probe.hpp"
#include "sys/landlock.hpp"
#include "sys/probe.hpp"
#include "test/support/facility.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;
using ctx::test::TestUser;
using nlohmann::json;

namespace {

using Mode = ctx::test::LaunchMode;
Mode mode() { return ctx::test::launch_mode(); }

json probe(const RunResult& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return json::parse(ctx::test::probe_json_line(r.out));
}

RunResult run_probe(const CtxTree& t, const Mode& m, const std::string& agent, std::vector<std::string> checks) {
  std::vector<std::string> args{agent, "--", "/probe"};
  args.insert(args.end(), checks.begin(), checks.end());
  return t.launch(args, m.as);
}

bool write_proc(const char* path, const std::string& v, int extra_flags = 0) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC | extra_flags, 0644);
  if (fd < 0) return false;
  bool ok = ::write(fd, v.data(), v.size()) == static_cast<ssize_t>(v.size());
  ::close(fd);
  return ok;
}

// In a child about to exec: a user namespace of its own mapping the
// owner's ids to themselves (made dumpable first: dropping from root made
// its /proc files root's). Returns false on any failure.
bool enter_own_userns(const TestUser& u, int extra_flags = 0) {
  if (::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0 || ::unshare(CLONE_NEWUSER | extra_flags) < 0) return false;
  std::string uid = std::to_string(u.uid), gid = std::to_string(u.gid);
  return write_proc("/proc/self/setgroups", "deny") && write_proc("/proc/self/uid_map", uid + " " + uid + " 1") &&
         write_proc("/proc/self/gid_map", gid + " " + gid + " 1");
}

// The lines of /proc/self/uid_map with the padding folded: "in out count".
std::vector<std::string> map_lines(const json& text) {
  std::vector<std::string> out;
  std::istringstream in(text.get<std::string>());
  std::string a, b, c;
  while (in >> a >> b >> c) out.push_back(a + " " + b + " " + c);
  return out;
}

// The sandbox init's host pid: the first line a launch with
// --json-status-fd 1 prints ("started").
int init_pid_of(ctx::test::Spawned& sp) {
  std::string first;
  char c;
  while (::read(sp.out_fd, &c, 1) == 1 && c != '\n') first += c;
  return json::parse(first)["pid"];
}

std::string home_of(const CtxTree& t, const std::string& agent) {
  return t.root() + "/home/" + std::to_string(t.owner().uid) + "/agent/" + agent;
}

}  // namespace

TEST_CASE("only the mount table's targets, /proc and /dev are visible", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("data");
  t.write("data/file", "x\n");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/data\t/data\tro\tbind,nosuid,nodev\n"}});
  json j = probe(run_probe(t, m, "coder",
                           {"mounts", "exists:/etc/passwd", "exists:/home", "exists:/data/file", "exists:" + t.root(),
                            "exists:/tmp", "pids"}));
  std::set<std::string> top;
  for (const auto& mnt : j["mounts"]) {
    std::string target = mnt["target"];
    bool allowed = target == "/" || target.rfind("/usr", 0) == 0 || target == "/probe" || target == "/data" ||
                   target.rfind("/proc", 0) == 0 || target.rfind("/dev", 0) == 0 || target.rfind("/run/ctx", 0) == 0;
    INFO(target);
    CHECK(allowed);
    top.insert(target);
  }
  for (const char* want :
       {"/", "/usr", "/probe", "/data", "/proc", "/dev", "/dev/pts", "/dev/shm", "/dev/null", "/run/ctx"})
    CHECK(top.count(want) == 1);
  CHECK(j["exists:/etc/passwd"] == "ENOENT");
  CHECK(j["exists:/home"] == "ENOENT");
  CHECK(j["exists:/tmp"] == "ENOENT");
  CHECK(j["exists:" + t.root()] == "ENOENT");
  CHECK(j["exists:/data/file"] == "yes");
  // Only the sandbox's own processes: its init (1) and the probe.
  std::set<int> pids(j["pids"].begin(), j["pids"].end());
  CHECK(pids == std::set<int>{1, 2});
}

TEST_CASE("ro is EROFS and cannot be remounted rw; rw is writable", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("ro");
  t.mkdir("rw");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/ro\t/ro\tro\tbind\n" + t.dir().path() +
                                  "/rw\t/rw\trw\tbind\n"}});
  json j =
      probe(run_probe(t, m, "coder", {"write:/ro/x", "write:/rw/x", "remount:/ro", "statvfs:/ro", "write:/probe"}));
  CHECK(j["write:/ro/x"] == "EROFS");
  CHECK(j["write:/rw/x"] == "ok");
  CHECK(j["remount:/ro"] == "EPERM");
  CHECK(j["statvfs:/ro"]["rdonly"] == true);
  CHECK(j["write:/probe"] == "EROFS");
  CHECK(t.dir().read("rw/x") == "probe\n");
}

TEST_CASE("nosuid, nodev and noexec are enforced", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("bin");
  t.write("bin/tool", ctx::test::read_file("/usr/bin/true"), 0755);
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/bin\t/noexec\tro\tbind,nosuid,nodev,noexec\n" +
                                  t.dir().path() + "/bin\t/exec\tro\tbind\n"}});
  json j =
      probe(run_probe(t, m, "coder", {"exec:/noexec/tool", "exec:/exec/tool", "statvfs:/noexec", "statvfs:/exec"}));
  CHECK(j["exec:/noexec/tool"] == "EACCES");
  CHECK(j["exec:/exec/tool"] == "ok");
  json flags = j["statvfs:/noexec"];
  flags.erase("bytes");
  CHECK(flags == json{{"rdonly", true}, {"nosuid", true}, {"nodev", true}, {"noexec", true}});
  CHECK(j["statvfs:/exec"]["noexec"] == false);
}

TEST_CASE("cwd, environment and hostname are exactly as configured", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("proj");
  std::string uid = std::to_string(m.owner.uid);
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/proj\t/work\trw\tbind\n"},
                    {"cwd", "/work\n"},
                    {"env", "LANG=C.UTF-8\nGREETING=hello $USER\n"}});
  json j = probe(run_probe(t, m, "coder", {"cwd", "env", "hostname"}));
  CHECK(j["cwd"] == "/work");
  CHECK(j["hostname"] == "coder");
  std::set<std::string> env(j["env"].begin(), j["env"].end());
  std::set<std::string> want{
      "CTX_ROOT=/ctx",
      "CTX_HOME=/ctx/home/" + uid,
      "CTX_PATH=/ctx/tool:/ctx/home/" + uid + "/tool",
      "HOME=/ctx/home/" + uid + "/agent/coder",
      "PATH=/ctx/bin:/usr/local/bin:/usr/bin:/bin",
      "LANG=C.UTF-8",
      "GREETING=hello $USER",
      "CTX_AGENT=coder",
      "CTX_SESSION=default",
      "NOTIFY_SOCKET=/run/ctx/notify",
      "LISTEN_FDS=1",
      "LISTEN_FDNAMES=coder.sock",
      "LISTEN_PID=2",
  };
  CHECK(env == want);
}

TEST_CASE("path builds CTX_PATH", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"path", "/ctx/tool\n/ctx/shared/p/tool\n"}});
  json j = probe(run_probe(t, m, "coder", {"env"}));
  std::set<std::string> env(j["env"].begin(), j["env"].end());
  CHECK(env.count("CTX_PATH=/ctx/tool:/ctx/shared/p/tool") == 1);
}

TEST_CASE("no capabilities, no_new_privs, only ABI fds, a new session", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  json j = probe(run_probe(t, m, "coder", {"caps", "fds", "sid", "listenfd", "ls:/proc/1/fd"}));
  // The sandbox's init is off limits to the runtime (not dumpable).
  CHECK(j["ls:/proc/1/fd"] == "EACCES");
  for (const char* k : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    INFO(k);
    CHECK(j["caps"][k] == "0000000000000000");
  }
  CHECK(j["caps"]["NoNewPrivs"] == "1");
  CHECK(j["fds"] == json{0, 1, 2, 3});
  CHECK(j["listenfd"] == "listening");
  // The sandbox's init made the session; the runtime is in it, with no
  // controlling terminal to push input into.
  CHECK(j["sid"]["sid"] == 1);
}

TEST_CASE("no network but loopback without network:default connect", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  json j = probe(run_probe(t, m, "coder", {"net", "connect:127.0.0.1:9"}));
  CHECK(j["net"] == json{"lo"});
  CHECK(j["connect:127.0.0.1:9"] == "ECONNREFUSED");  // loopback is up, nobody listens

  t.agent("netter", {{"policy", "allow netter_t network:default connect\n"}});
  json h = probe(run_probe(t, m, "netter", {"net"}));
  std::string host = ctx::test::read_file("/proc/net/dev");
  CHECK(h["net"].size() >= 1);
  for (const auto& ifc : h["net"]) CHECK(host.find(ifc.get<std::string>() + ":") != std::string::npos);
  if (host.find("eth0:") != std::string::npos || h["net"].size() > 1) CHECK(h["net"] != json{"lo"});
}

TEST_CASE("iso userns: namespace-local ids mapped to the owner", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"uid", "1000\n"}, {"gid", "1000\n"}});
  json j = probe(run_probe(t, m, "coder", {"ids", "uid_map", "gid_map"}));
  CHECK(j["ids"]["uid"] == json{1000, 1000, 1000});
  CHECK(j["ids"]["gid"] == json{1000, 1000, 1000});
  // Seen from outside (the map's outer column): the owner.
  CHECK(map_lines(j["uid_map"]) == std::vector<std::string>{"1000 " + std::to_string(m.owner.uid) + " 1"});
  CHECK(map_lines(j["gid_map"]) == std::vector<std::string>{"1000 " + std::to_string(m.owner.gid) + " 1"});
}

TEST_CASE("iso shared: the owner's own host ids", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"iso", "shared\n"}});
  json j = probe(run_probe(t, m, "coder", {"ids"}));
  CHECK(j["ids"]["uid"] == json{m.owner.uid, m.owner.uid, m.owner.uid});
  CHECK(j["ids"]["gid"] == json{m.owner.gid, m.owner.gid, m.owner.gid});
  CHECK(j["ids"]["groups"] == json::array());
}

TEST_CASE("iso uid: the agent's own host uid, gid and groups", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  // 2000001.. lies in the range scripts/setup delegates to the test user.
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "2000001\n"}, {"gid", "2000002\n"}, {"groups", "2000003\n"}});
  RunResult r = run_probe(t, m, "coder", {"ids"});
  INFO(r.err);
  json j = probe(r);
  CHECK(j["ids"]["uid"] == json{2000001, 2000001, 2000001});
  CHECK(j["ids"]["gid"] == json{2000002, 2000002, 2000002});
  CHECK(j["ids"]["groups"] == json{2000003});
}

TEST_CASE("a symlink in root never leads a mount or mkdir outside it", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("outside");
  t.mkdir("src");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/src\t/work/sub\tro\tbind\n"}});
  std::string link = home_of(t, "coder") + "/root/work";
  REQUIRE(::symlink((t.dir().path() + "/outside").c_str(), link.c_str()) == 0);
  if (::geteuid() == 0) REQUIRE(::lchown(link.c_str(), m.owner.uid, m.owner.gid) == 0);
  RunResult r = run_probe(t, m, "coder", {"ids"});
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("coder.d/mount:3: " + t.dir().path() + "/src -> /work/sub: openat2 work/sub: ELOOP") !=
        std::string::npos);
  struct stat st {};
  CHECK(::lstat((t.dir().path() + "/outside/sub").c_str(), &st) == -1);
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
}

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

TEST_CASE("a mount line needs its mount rule; a rw line needs write", "[root][userns]") {
  // docs/abi-policy.md, "What each class gates": the object is the
  // target. The fixture's automatic rules are off: the test writes them.
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("data");
  const std::string data = t.dir().path() + "/data";
  const std::string base_rules = CtxTree::mount_rules_for("coder_t\n", t.base_mounts());
  // Without the rule for /data: refused before anything is made.
  t.agent("coder", {{"mount", t.base_mounts() + data + "\t/data\tro\tbind\n"}, {"policy", base_rules}}, false);
  RunResult denied = run_probe(t, m, "coder", {"exists:/data"});
  CHECK(denied.exit_code == 125);
  CHECK(denied.err == "ctx-agent-run: coder.d/mount:3: EACCES: ro mount " + data +
                          " -> /data needs 'allow coder_t mount:/data read' in coder.d/policy; add the rule or "
                          "remove the line\n");
  // The source, or a path above the target, allows nothing.
  t.agent("coder",
          {{"mount", t.base_mounts() + data + "\t/data\tro\tbind\n"},
           {"policy", base_rules + "allow coder_t mount:" + data + " read\nallow coder_t mount:/ read\n"}},
          false);
  CHECK(run_probe(t, m, "coder", {"exists:/data"}).exit_code == 125);
  // With the rule it launches.
  t.agent("coder",
          {{"mount", t.base_mounts() + data + "\t/data\tro\tbind\n"},
           {"policy", base_rules + "allow coder_t mount:/data read\n"}},
          false);
  CHECK(probe(run_probe(t, m, "coder", {"exists:/data"}))["exists:/data"] == "yes");
  // rw needs write as well.
  t.agent("coder",
          {{"mount", t.base_mounts() + data + "\t/data\trw\tbind\n"},
           {"policy", base_rules + "allow coder_t mount:/data read\n"}},
          false);
  RunResult rw = run_probe(t, m, "coder", {"exists:/data"});
  CHECK(rw.exit_code == 125);
  CHECK(rw.err == "ctx-agent-run: coder.d/mount:3: EACCES: rw mount " + data +
                      " -> /data needs 'allow coder_t mount:/data write' in coder.d/policy; add the rule or "
                      "remove the line\n");
  t.agent("coder",
          {{"mount", t.base_mounts() + data + "\t/data\trw\tbind\n"},
           {"policy", base_rules + "allow coder_t mount:/data read\nallow coder_t mount:/data write\n"}},
          false);
  CHECK(probe(run_probe(t, m, "coder", {"exists:/data"}))["exists:/data"] == "yes");
  // ctx check names every line the policy lacks, as an error.
  t.agent("coder", {{"mount", t.base_mounts() + data + "\t/data\trw\tbind\n"}, {"policy", ""}}, false);
  RunResult chk = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"});
  CHECK(chk.exit_code == 1);
  CHECK(chk.out.find("coder.d/mount:1: EACCES: ro mount /usr -> /usr needs 'allow coder_t mount:/usr read'") !=
        std::string::npos);
  CHECK(chk.out.find("coder.d/mount:3: EACCES: rw mount " + data + " -> /data needs") != std::string::npos);
}

TEST_CASE("a mount of a shared space needs the policy's permission", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("ctx/shared/project-a/data");
  t.mkdir("ctx/shared/project-b");
  std::string src = t.root() + "/shared/project-a";
  t.agent("coder", {{"mount", t.base_mounts() + src + "\t/p\tro\tbind\n"}});
  RunResult denied = run_probe(t, m, "coder", {"ids"});
  CHECK(denied.exit_code == 125);
  CHECK(denied.err == "ctx-agent-run: coder.d/mount:3: EACCES: source " + src +
                          " is in shared space project-a and the policy lacks 'allow coder_t shared:project-a read'\n");
  t.agent("coder",
          {{"mount", t.base_mounts() + src + "\t/p\tro\tbind\n"}, {"policy", "allow coder_t shared:project-a read\n"}});
  CHECK(probe(run_probe(t, m, "coder", {"exists:/p/data"}))["exists:/p/data"] == "yes");
  t.agent("coder",
          {{"mount", t.base_mounts() + src + "\t/p\trw\tbind\n"}, {"policy", "allow coder_t shared:project-a read\n"}});
  RunResult rw = run_probe(t, m, "coder", {"ids"});
  CHECK(rw.exit_code == 125);
  CHECK(rw.err.find("lacks 'allow coder_t shared:project-a write'") != std::string::npos);
  // A mount of the whole ctx root shows the agent view, which has no space
  // the policy does not let it read (docs/view.md).
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind\n"},
                    {"policy", "allow coder_t shared:project-a read\n"}});
  json j = probe(run_probe(
      t, m, "coder",
      {"exists:/ctx/shared/project-a/data", "exists:/ctx/shared/project-b/x", "write:/ctx/shared/project-b/x"}));
  CHECK(j["exists:/ctx/shared/project-a/data"] == "yes");
  CHECK(j["exists:/ctx/shared/project-b/x"] == "ENOENT");
  CHECK(j["write:/ctx/shared/project-b/x"] == "ENOENT");
}

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

TEST_CASE("a privileged launch opens mount sources as the owner", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("private", 0700);  // root's, 0700: the owner cannot enter it
  t.write("private/secret", "s\n");
  REQUIRE(::chown((t.dir() / "private").c_str(), 0, 0) == 0);
  REQUIRE(::chown((t.dir() / "private/secret").c_str(), 0, 0) == 0);
  REQUIRE(::chmod((t.dir() / "private").c_str(), 0700) == 0);
  t.agent("coder", {{"mount", t.base_mounts() + "/etc/shadow\t/shadow\tro\tbind\n"}});
  RunResult shadow = run_probe(t, m, "coder", {"ids"});
  CHECK(shadow.exit_code == 125);
  CHECK(
      shadow.err ==
      "ctx-agent-run: coder.d/mount:3: /etc/shadow -> /shadow: source /etc/shadow: EACCES: the owner may not read it\n");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/private\t/p\tro\tbind\n"}});
  RunResult priv = run_probe(t, m, "coder", {"ids"});
  CHECK(priv.exit_code == 125);
  CHECK(priv.err == "ctx-agent-run: coder.d/mount:3: " + t.dir().path() + "/private -> /p: source " + t.dir().path() +
                        "/private: EACCES: the owner may not read it\n");
  // Readable but not writable by the owner: ro works, rw is refused.
  t.mkdir("shared-ro", 0755);
  REQUIRE(::chown((t.dir() / "shared-ro").c_str(), 0, 0) == 0);
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/shared-ro\t/s\tro\tbind\n"}});
  probe(run_probe(t, m, "coder", {"ids"}));
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/shared-ro\t/s\trw\tbind\n"}});
  RunResult rw = run_probe(t, m, "coder", {"ids"});
  CHECK(rw.exit_code == 125);
  CHECK(rw.err.find("source " + t.dir().path() + "/shared-ro: EACCES: the owner may not read and write it") !=
        std::string::npos);
}

TEST_CASE("a privileged launch refuses untrusted control files", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  ::chmod((t.root() + "/agent/coder.d/mount").c_str(), 0666);
  RunResult r = run_probe(t, m, "coder", {"ids"});
  CHECK(r.exit_code == 125);
  CHECK(r.err == "ctx-agent-run: coder.d/mount: EPERM: writable by group or other (mode 0666); chmod go-w it\n");
  ::chmod((t.root() + "/agent/coder.d/mount").c_str(), 0644);
  REQUIRE(::chown((t.root() + "/agent/coder.d/mount").c_str(), m.owner.uid + 1, m.owner.gid) == 0);
  RunResult other = run_probe(t, m, "coder", {"ids"});
  CHECK(other.exit_code == 125);
  CHECK(other.err.find("not by root or the owner " + std::to_string(m.owner.uid) + "; chown it") != std::string::npos);
  // Symlinked control files are refused in every launch.
  ::chown((t.root() + "/agent/coder.d/mount").c_str(), m.owner.uid, m.owner.gid);
  ::unlink((t.root() + "/agent/coder.d/mount").c_str());
  REQUIRE(::symlink("/etc/fstab", (t.root() + "/agent/coder.d/mount").c_str()) == 0);
  RunResult link = run_probe(t, m, "coder", {"ids"});
  CHECK(link.exit_code == 125);
  CHECK(link.err == "ctx-agent-run: coder.d/mount: ELOOP: is a symbolic link; control files must be regular files\n");
}

TEST_CASE("bind hides the source's submounts, rbind shows them", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("src/sub");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/src\t/b\tro\tbind\n" + t.dir().path() +
                                  "/src\t/r\tro\trbind\n"}});
  // The submount is made in a private mount namespace of a helper that
  // then runs the launcher: the host's mounts stay untouched.
  std::string script = "set -e; mount --make-rprivate /; mount -t tmpfs -o size=64k tmpfs " + t.dir().path() +
                       "/src/sub; touch " + t.dir().path() + "/src/sub/marker; exec " +
                       ctx::test::built("launcher/ctx-agent-run") + " --ctx-root " + t.root() +
                       " coder -- /probe exists:/b/sub/marker exists:/r/sub/marker exists:/b/sub";
  RunResult r =
      ctx::test::run_command({"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script});
  json j = probe(r);
  CHECK(j["exists:/b/sub"] == "yes");
  CHECK(j["exists:/b/sub/marker"] == "ENOENT");
  CHECK(j["exists:/r/sub/marker"] == "yes");
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

TEST_CASE("without user namespaces an unprivileged launch fails with the remedy", "[userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  // The launcher runs in a user namespace of its own whose limit on
  // nested user namespaces is 0: the machine's setting stays untouched.
  auto no_userns = [&]() { return enter_own_userns(m.owner) && write_proc("/proc/sys/user/max_user_namespaces", "0"); };
  RunResult r = ctx::test::run_command(
      {ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder", "--", "/probe", "ids"}, m.as, 60,
      {}, no_userns);
  CHECK(r.exit_code == 125);
  CHECK(r.err ==
        "ctx-agent-run: creating namespaces: clone3: ENOSPC (unprivileged user namespaces are unavailable to uid " +
            std::to_string(m.owner.uid) +
            ": raise user.max_user_namespaces, set kernel.unprivileged_userns_clone=1, on Ubuntu load "
            "its profile (apparmor_parser -r /etc/apparmor.d/ctx-agent-run) or set kernel.apparmor_restrict_unprivileged_userns=0, or launch as "
            "root from a systemd unit)\n");
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
  // A failed clone3 leaves no agent socket behind.
  CHECK_FALSE(std::filesystem::exists(t.root() + "/agent/coder.sock"));
}

TEST_CASE("unprivileged: bind of a source with submounts is refused, rbind shows them", "[userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("src/sub");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/src\t/b\tro\tbind\n" + t.dir().path() +
                                  "/src\t/r\tro\trbind\n"}});
  // The submount lives in a user and mount namespace of the test's own,
  // in which the launcher then runs (and nests its sandbox).
  std::string sub = t.dir().path() + "/src/sub";
  auto with_submount = [&]() {
    if (!enter_own_userns(m.owner, CLONE_NEWNS)) return false;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) return false;
    if (::mount("tmpfs", sub.c_str(), "tmpfs", 0, "size=64k") < 0) return false;
    return write_proc((sub + "/marker").c_str(), "", O_CREAT);
  };
  // A non-recursive bind of a source with (locked) submounts is refused by
  // the kernel in a user namespace; rbind shows them.
  RunResult b = ctx::test::run_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder",
                                        "--", "/probe", "exists:/b/sub/marker"},
                                       m.as, 60, {}, with_submount);
  CHECK(b.exit_code == 125);
  CHECK(b.err ==
        "ctx-agent-run: coder.d/mount:3: " + t.dir().path() + "/src -> /b: source " + t.dir().path() +
            "/src: EINVAL: has mounts below it that a non-recursive bind would uncover, which the kernel refuses "
            "in a user namespace; use rbind\n");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/src\t/r\tro\trbind\n"}});
  RunResult r = ctx::test::run_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder",
                                        "--", "/probe", "exists:/r/sub/marker"},
                                       m.as, 60, {}, with_submount);
  CHECK(probe(r)["exists:/r/sub/marker"] == "yes");
}

namespace {

// Processes whose command line mentions `token` (the tests' unique paths).
using ctx::test::processes_mentioning;

}  // namespace

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
  CHECK(processes_mentioning(token).size() == 4);
  REQUIRE(::kill(sp.pid, SIGKILL) == 0);
  RunResult r = ctx::test::wait_command(sp, 30);
  CHECK(r.exit_code == 128 + SIGKILL);
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    gone = processes_mentioning(token).empty();
    if (!gone) ::usleep(20000);
  }
  CHECK(gone);
  // The watchdog left nothing stale: the agent is dead, with the reason,
  // its socket is gone (it used to stay `ready` until the next launch).
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
  CHECK(t.dir().read("ctx/agent/coder.d/log").find("\"reason\":\"supervisor_killed\"") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.root() + "/agent/coder.sock"));
  probe(run_probe(t, m, "coder", {"ids"}));
}

TEST_CASE("iso uid outside the delegated range fails with the fix", "[userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "5000\n"}});
  RunResult r = run_probe(t, m, "coder", {"ids"});
  CHECK(r.exit_code == 125);
  CHECK(r.err == "ctx-agent-run: coder: iso uid: uid 5000 is not delegated to uid " + std::to_string(m.owner.uid) +
                     " in /etc/subuid; add a range that holds it\n");
}

// Root is needed to look into the init (it is not dumpable); both kinds of
// launch are checked.
TEST_CASE("the sandbox's init holds only its signalfd and the lifeline", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  for (const TestUser& as : {TestUser{0, 0, "root"}, *u}) {
    INFO("launched by " << as.name);
    CtxTree t(*u);
    t.agent("coder");
    auto sp = ctx::test::spawn_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(),
                                        "--json-status-fd", "1", "coder", "--", "/probe", "notify:READY=1", "sleep:30"},
                                       as);
    REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/coder.d/status", "ready\n"));
    int init = init_pid_of(sp);
    std::vector<std::string> fds = ctx::test::names_in("/proc/" + std::to_string(init) + "/fd");
    CHECK(fds.size() == 5);  // stdin, stdout, stderr, signalfd, lifeline: no host directory
    for (const auto& fd : fds) {
      char target[256] = {};
      ssize_t n = ::readlink(("/proc/" + std::to_string(init) + "/fd/" + fd).c_str(), target, sizeof target - 1);
      INFO(fd << " -> " << std::string(target, n > 0 ? static_cast<std::size_t>(n) : 0));
      CHECK(std::string(target).find(t.root()) == std::string::npos);
      CHECK(std::string(target).find("/tmp/ctx-agent-run") == std::string::npos);
    }
    ::kill(sp.pid, SIGTERM);
    CHECK(ctx::test::wait_command(sp, 30).exit_code == 143);
  }
}

TEST_CASE("ctx check --env names the remedy when user namespaces are unavailable", "[userns]") {
  Mode m = mode();
  std::vector<std::string> argv{ctx::test::built("ctx/ctx"), "check", "--env"};
  RunResult fine = ctx::test::run_command(argv, m.as);
  CHECK(fine.out.find("env ok      user namespaces for unprivileged users (Linux 3.8; user.max_user_namespaces ") == 0);
  auto no_userns = [&]() { return enter_own_userns(m.owner) && write_proc("/proc/sys/user/max_user_namespaces", "0"); };
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

TEST_CASE("a long log does not stop the next launch (status, pid and log are not read)", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"log", std::string(70000, 'x') + "\n"}, {"status", "garbage that is no status\n"}});
  probe(run_probe(t, m, "coder", {"ids"}));
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
}

TEST_CASE("a root launch refuses ids the owner is not entitled to", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  const std::string etc = t.base_mounts() + "/etc\t/hostetc\tro\tbind\n";
  const std::string owner = std::to_string(m.owner.uid);
  const std::string tail =
      "; a root launch gives an agent only ids its owner is entitled to unless root owns the file: ";
  // uid 0 in a uid file the owner wrote: refused before anything runs.
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "0\n"}, {"gid", std::to_string(m.owner.gid) + "\n"}, {"mount", etc}});
  RunResult root_uid = run_probe(t, m, "coder", {"ids", "read:/hostetc/shadow"});
  CHECK(root_uid.exit_code == 125);
  CHECK(root_uid.err == "ctx-agent-run: coder.d/uid: EPERM: uid 0 is neither the owner (" + owner +
                            ") nor in the owner's /etc/subuid ranges" + tail + "write " + owner +
                            ", delegate the uid to the owner in /etc/subuid, or have root own coder.d/uid\n");
  CHECK_FALSE(std::filesystem::exists(t.root() + "/agent/coder.d/pid"));
  // Another user's uid.
  t.agent("coder", {{"iso", "uid\n"}, {"uid", std::to_string(m.owner.uid + 1) + "\n"}, {"mount", etc}});
  CHECK(run_probe(t, m, "coder", {"ids"}).err.find("coder.d/uid: EPERM: uid " + std::to_string(m.owner.uid + 1)) !=
        std::string::npos);
  // gid 42 or groups 0 42: shadow's group is within reach otherwise.
  for (const char* iso : {"shared\n", "uid\n"}) {
    t.agent("coder", {{"iso", iso}, {"uid", owner + "\n"}, {"gid", "42\n"}, {"mount", etc}});
    RunResult g = run_probe(t, m, "coder", {"ids"});
    INFO(iso << g.err);
    CHECK(g.exit_code == 125);
    CHECK(g.err.find("ctx-agent-run: coder.d/gid: EPERM: gid 42 is not the owner's primary group") == 0);
  }
  for (const char* iso : {"shared\n", "uid\n", "userns\n"}) {
    t.agent("coder", {{"iso", iso},
                      {"uid", owner + "\n"},
                      {"gid", std::to_string(m.owner.gid) + "\n"},
                      {"groups", "0\n42\n"},
                      {"mount", etc}});
    RunResult g = run_probe(t, m, "coder", {"ids"});
    INFO(iso << g.err);
    CHECK(g.exit_code == 125);
    CHECK(g.err.find("ctx-agent-run: coder.d/groups: EPERM: gid 0 is not the owner's primary group") == 0);
  }
  // The same files owned by root are root's decision: the launch runs with
  // those ids, and the agent reads what they reach (the attack the check
  // closes for owner-written files).
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "0\n"}, {"gid", "0\n"}, {"groups", "42\n"}, {"mount", etc}});
  for (const char* f : {"uid", "gid", "groups"})
    REQUIRE(::chown((t.root() + "/agent/coder.d/" + f).c_str(), 0, 0) == 0);
  json j = probe(run_probe(t, m, "coder", {"ids", "read:/hostetc/shadow"}));
  CHECK(j["ids"]["uid"] == json{0, 0, 0});
  CHECK(j["read:/hostetc/shadow"] == "ok");
}

namespace {

// The unix sockets a process holds, as "path" (empty for unnamed) by
// inode, from its own network namespace's /proc/<pid>/net/unix.
std::vector<std::string> named_sockets_of(int pid) {
  std::set<std::string> inodes;
  for (const auto& fd : ctx::test::names_in("/proc/" + std::to_string(pid) + "/fd")) {
    char buf[64];
    ssize_t n = ::readlink(("/proc/" + std::to_string(pid) + "/fd/" + fd).c_str(), buf, sizeof buf - 1);
    if (n <= 0) continue;
    std::string l(buf, static_cast<std::size_t>(n));
    if (l.rfind("socket:[", 0) == 0) inodes.insert(l.substr(8, l.size() - 9));
  }
  std::vector<std::string> out;
  std::istringstream in(ctx::test::read_file("/proc/" + std::to_string(pid) + "/net/unix"));
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string num, refs, proto, flags, type, st, inode, path;
    f >> num >> refs >> proto >> flags >> type >> st >> inode >> path;
    if (inodes.count(inode) != 0 && !path.empty()) out.push_back(path);
  }
  return out;
}

int supervisor_pid(const CtxTree& t) { return std::stoi(ctx::test::read_file(t.root() + "/agent/coder.d/pid")); }

}  // namespace

// The supervisor's notify and control sockets are bound inside the
// sandbox and handed over: no name of theirs ever exists on the host,
// where another agent of the same uid could connect in the launch window.
TEST_CASE("the supervisor's sockets never have a host name", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  std::string token = "sleep:28." + std::to_string(::getpid());
  auto sp = t.spawn({"coder", "--", "/probe", "notify:READY=1", "exists:/run/ctx/supervisor", token}, m.as);
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/coder.d/status", "ready\n"));
  // The supervisor holds no named socket (the agent socket went to the
  // sandbox as fd 3).
  CHECK(named_sockets_of(supervisor_pid(t)).empty());
  // Nothing under the places a runtime directory used to be.
  CHECK_FALSE(std::filesystem::exists("/tmp/ctx-agent-run-" + std::to_string(m.as.uid) + "/" + "coder"));
  ::kill(sp.pid, SIGTERM);
  RunResult r = ctx::test::wait_command(sp, 30);
  CHECK(r.exit_code == 128 + SIGTERM);
}

// Root can still reach a sandbox's sockets through /proc/<pid>/root: the
// supervisor answers only peers in the sandbox.
TEST_CASE("a peer outside the sandbox is not served by the supervisor", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  for (const TestUser& as : {TestUser{0, 0, "root"}, *u}) {
    INFO("launched by " << as.name);
    CtxTree t(*u);
    t.agent("coder", {{"policy", "allow coder_t agent:x create\n"}});
    auto sp = ctx::test::spawn_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(),
                                        "--json-status-fd", "1", "coder", "--", "/probe", "sleep:30"},
                                       as);
    int init = init_pid_of(sp);
    std::string run_ctx = "/proc/" + std::to_string(init) + "/root/run/ctx/";
    // The control socket: connected, then closed unanswered.
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(s >= 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::string path = run_ctx + "supervisor";
    REQUIRE(path.size() < sizeof a.sun_path);
    std::memcpy(a.sun_path, path.c_str(), path.size());
    REQUIRE(::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    std::string req = "{\"op\":\"create\",\"name\":\"x\"}\n";
    (void)::send(s, req.data(), req.size(), MSG_NOSIGNAL);
    timeval tv{5, 0};
    ::setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[256];
    ssize_t got = ::read(s, buf, sizeof buf);
    int err = errno;
    INFO("read " << got << " errno " << err << " " << std::string(buf, got > 0 ? static_cast<std::size_t>(got) : 0));
    // Closed unanswered: EOF, or ECONNRESET when the request was still
    // unread in the supervisor's queue as it closed.
    CHECK((got == 0 || (got < 0 && err == ECONNRESET)));
    ::close(s);
    CHECK_FALSE(std::filesystem::exists(t.root() + "/agent/x.d"));
    // NOTIFY_SOCKET: READY=1 from outside changes nothing.
    int d = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    path = run_ctx + "notify";
    std::memset(a.sun_path, 0, sizeof a.sun_path);
    std::memcpy(a.sun_path, path.c_str(), path.size());
    CHECK(::sendto(d, "READY=1", 7, 0, reinterpret_cast<sockaddr*>(&a), sizeof a) == 7);
    ::close(d);
    ::usleep(300000);
    CHECK(t.dir().read("ctx/agent/coder.d/status") == "start\n");
    ::kill(sp.pid, SIGTERM);
    ctx::test::wait_command(sp, 30);
  }
}

// A runtime directory another user planted (the old /tmp location, or an
// XDG_RUNTIME_DIR that is not the caller's) neither blocks nor is used.
TEST_CASE("a planted runtime directory does not block a launch", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  ctx::test::TempDir planted;
  REQUIRE(::chmod(planted.path().c_str(), 0777) == 0);
  std::string tmp = "/tmp/ctx-agent-run-" + std::to_string(u->uid);
  bool made = ::mkdir(tmp.c_str(), 0777) == 0;
  if (made) ::chmod(tmp.c_str(), 0777);
  // Removed on every way out (a failed REQUIRE throws).
  struct Remove {
    std::string path;
    ~Remove() {
      if (!path.empty()) ::rmdir(path.c_str());
    }
  } remove{made ? tmp : std::string()};
  CtxTree t(*u);
  t.agent("coder");
  RunResult r = ctx::test::run_command(
      {ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder", "--", "/probe", "ids"}, *u, 60,
      {"XDG_RUNTIME_DIR=" + planted.path()});
  CHECK(r.exit_code == 0);
  CHECK(ctx::test::names_in(planted.path()).empty());
}

// Bounds that hold without cgroup controllers.
TEST_CASE("/dev/shm has a size and processes a bound; limits raise them", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  json j = probe(run_probe(t, m, "coder", {"statvfs:/dev/shm"}));
  CHECK(j["statvfs:/dev/shm"]["bytes"] == 64ull << 20);
  RunResult u = t.launch({"coder", "--", "/bin/sh", "-c", "ulimit -p"}, m.as);
  INFO(u.err);
  CHECK(u.out == "1024\n");
  t.agent("coder", {{"limits", "shm.max=8M\nnproc.max=40\n"}});
  j = probe(run_probe(t, m, "coder", {"statvfs:/dev/shm"}));
  CHECK(j["statvfs:/dev/shm"]["bytes"] == 8ull << 20);
  // 60 sleepers against a bound of 40: the shell's forks start failing
  // (dash gives up at the first); with a bound of 100 they all start.
  const std::vector<std::string> sleepers{"coder", "--", "/bin/sh", "-c",
                                          "for i in $(seq 60); do sleep 2 & done; echo all"};
  RunResult f = t.launch(sleepers, m.as);
  CHECK(f.exit_code != 0);
  CHECK(f.err.find("Cannot fork") != std::string::npos);
  t.agent("coder", {{"limits", "shm.max=8M\nnproc.max=100\n"}});
  RunResult ok = t.launch(sleepers, m.as);
  INFO(ok.err);
  CHECK(ok.out == "all\n");
  // A write past the size is ENOSPC, the host's memory untouched.
  RunResult w = t.launch({"coder", "--", "/bin/sh", "-c", "head -c 16M /dev/zero > /dev/shm/x; echo $?"}, m.as);
  CHECK(w.out == "1\n");
  CHECK(w.err.find("No space left on device") != std::string::npos);
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

TEST_CASE("ctx check run as root reports what a root launch refuses", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  // A tree a launch with no command accepts: its runtime at /ctx/agent/coder.
  t.agent("coder", {{"groups", "0\n"}, {"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"}});
  t.write("ctx/agent/coder", "#!/bin/sh\n", 0755);
  RunResult c = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"});
  CHECK(c.exit_code != 0);
  CHECK(c.out.find("coder.d/groups: EPERM: gid 0 is not the owner's primary group") != std::string::npos);
  // The launch refuses it with the same sentence.
  RunResult l = run_probe(t, m, "coder", {"ids"});
  CHECK(l.exit_code == 125);
  CHECK(l.err.find("coder.d/groups: EPERM: gid 0 is not the owner's primary group") != std::string::npos);
  REQUIRE(::chown((t.root() + "/agent/coder.d/groups").c_str(), 0, 0) == 0);
  RunResult ok = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"});
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  ::chmod((t.root() + "/agent/coder.d/mount").c_str(), 0666);
  RunResult trust = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"});
  CHECK(trust.exit_code != 0);
  CHECK(trust.out.find("coder.d/mount: EPERM: writable by group or other (mode 0666); chmod go-w it") !=
        std::string::npos);
}

// The seccomp deny-list (docs/seccomp.md), checked call by call from
// inside: each would succeed, or fail otherwise, without the filter.
TEST_CASE("the seccomp filter refuses the listed calls from inside", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  json d = probe(run_probe(t, m, "coder", {"denied"}))["denied"];
  INFO(d.dump());
  CHECK(d["Seccomp"] == "2");
  for (const char* call :
       {"keyctl", "add_key", "request_key", "io_uring_setup", "perf_event_open", "bpf", "userfaultfd", "unshare_user",
        "setns", "tiocsti", "open_by_handle_at", "acct", "reboot", "personality_rie", "i386_getpid", "x32_getpid"}) {
    INFO(call);
    CHECK(d[call] == "EPERM");
  }
  CHECK(d["clone3"] == "ENOSYS");
  CHECK(d["unshare_none"] == "ok");
  CHECK(d["personality_query"] == "ok");
  // Tools the runtime starts are under the same filter.
  RunResult sh = t.launch({"coder", "--", "/bin/sh", "-c", "/probe denied"}, m.as);
  REQUIRE(sh.exit_code == 0);
  CHECK(json::parse(ctx::test::probe_json_line(sh.out))["denied"]["keyctl"] == "EPERM");
}

// Landlock (ABI 6): with the host's network granted, the host's abstract
// unix sockets and the sandbox's own init stay out of reach.
// On an older kernel the launch says so instead (one notice), and the
// test checks that.
TEST_CASE("Landlock scopes abstract sockets and signals to the sandbox", "[root][userns]") {
  const bool scoped = ctx::sys::landlock_abi().value_or(0) >= ctx::sys::kLandlockScopeAbi;
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"policy", "allow coder_t network:default connect\n"}});
  std::string name = "ctx-test-abstract-" + std::to_string(::getpid());
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), len) == 0);
  REQUIRE(::listen(s, 8) == 0);
  RunResult r = run_probe(t, m, "coder", {"net", "abstract:" + name, "kill:1"});
  json j = probe(r);
  ::close(s);
  if (scoped) {
    CHECK(j["abstract:" + name] == "EPERM");
    CHECK(j["kill:1"] == "EPERM");
    CHECK(r.err.find("notice: this kernel's Landlock") == std::string::npos);
  } else {
    CHECK(r.err.find("notice: this kernel's Landlock") != std::string::npos);
  }
}

// Through a bound /proc an agent reaches the owner's processes' files
// (/proc/<pid>/root) and writes into them as the owner: a root launch
// takes sources only from file systems of plain files, and refuses an
// rbind that holds another (allowlist_test.cpp has the rest).
TEST_CASE("a root launch refuses pseudo file systems as mount sources", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"mount", t.base_mounts() + "/proc\t/hostproc\tro\tbind\n"}});
  RunResult p = run_probe(t, m, "coder", {"ids"});
  CHECK(p.exit_code == 125);
  CHECK(p.err ==
        "ctx-agent-run: coder.d/mount:3: /proc -> /hostproc: source /proc: EACCES: lies on proc, which is not a file "
        "system of plain files: a root launch takes mount sources only from those (docs/security.md, \"Mount sources "
        "of a root launch\"); bind a directory of a disk, memory or network file system instead, or remove the "
        "line\n");
  t.agent("coder", {{"mount", t.base_mounts() + "/sys/kernel\t/k\tro\tbind\n"}});
  CHECK(run_probe(t, m, "coder", {"ids"}).err.find("source /sys/kernel: EACCES: lies on sysfs,") != std::string::npos);
  t.agent("coder", {{"mount", t.base_mounts() + "/\t/host\tro\trbind\n"}});
  RunResult all = run_probe(t, m, "coder", {"ids"});
  CHECK(all.exit_code == 125);
  CHECK(all.err.find("source /: EACCES: holds ") != std::string::npos);
  CHECK(all.err.find("use bind instead of rbind") != std::string::npos);
  // A plain bind of / brings no submount: allowed.
  t.agent("coder", {{"mount", t.base_mounts() + "/\t/host\tro\tbind\n"}});
  probe(run_probe(t, m, "coder", {"ids"}));
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
}

// The plan is the truth: the mount points a sandbox has (its mountinfo)
// are exactly the plan's, no more and no fewer, with a mask, a tool view
// (wrapped tools included) and the handful of fixed ones.
TEST_CASE("the mounts inside are exactly the plan's mount points", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("ctx/shared/hidden");
  t.write("ctx/tool/fs.read", "#!/bin/sh\n", 0755);
  t.mkdir("ctx/tool/fs.read.d");
  t.write("ctx/tool/shell.exec", "#!/bin/sh\n", 0755);
  t.write("ctx/bin/ctx", "#!/bin/sh\n", 0755);
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"},
                    {"policy", "allow coder_t tool:fs.read execute\n"}});
  RunResult dry = t.launch({"--dry-run", "coder", "--", "/probe", "mounts"}, m.as);
  REQUIRE(dry.exit_code == 0);
  json plan = json::parse(dry.out);
  std::multiset<std::string> want;
  for (const auto& p : plan["mount_points"]) want.insert(p.get<std::string>());
  CHECK(want.count("/ctx") == 1);                // the agent view
  CHECK(want.count("/ctx/shared/hidden") == 0);  // the view never shows it: no mask
  json j = probe(run_probe(t, m, "coder", {"mounts"}));
  std::multiset<std::string> seen;
  for (const auto& mnt : j["mounts"]) seen.insert(mnt["target"].get<std::string>());
  INFO("plan: " << plan["mount_points"].dump() << "\ninside: " << j["mounts"].dump());
  CHECK(seen == want);
}

// The agent can write in its home (where its root lies) and in its rw
// binds. A symbolic link it plants there must not choose its next launch's
// root or mounts: the owner's other files, the durable CTX tree.
TEST_CASE("a symbolic link an agent plants in its home does not choose its next launch's root or mounts",
          "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  const std::string home = t.root() + "/home/" + uid + "/agent/coder";
  t.mkdir("secret");
  t.write("secret/key", "owner-only\n");
  t.mkdir("ctx/home/" + uid + "/agent/coder/data");
  t.agent("coder", {{"mount", t.base_mounts() + home + "\t/home/coder\trw\tbind,nosuid,nodev\n" + home +
                                  "/data\t/data\trw\tbind,nosuid,nodev\n"}});
  // First launch: the agent swaps its data directory and its root for
  // links to places of its choice.
  RunResult plant = t.launch({"coder", "--", "/bin/sh", "-c",
                              "cd /home/coder && rmdir data && ln -s " + t.dir().path() +
                                  "/secret data && mv root root.real && ln -s " + t.root() + " root && echo planted"},
                             m.as);
  INFO(plant.out << plant.err);
  REQUIRE(plant.out == "planted\n");
  // Next launch: refused, naming the link; nothing ran.
  RunResult next = t.launch({"coder", "--", "/bin/sh", "-c", "cat /data/key; ls /; echo ran"}, m.as);
  INFO(next.out << next.err);
  CHECK(next.exit_code != 0);
  CHECK(next.out.find("ran") == std::string::npos);
  CHECK(next.out.find("owner-only") == std::string::npos);
  // The session's start makes the home's data/ first: the link there is
  // refused before any mount (docs/abi.md, "Sessions").
  CHECK(next.err.find(home + "/data: openat data: ENOTDIR") != std::string::npos);
  CHECK(next.err.find("the agent was not started") != std::string::npos);
  // With the root back, the data link alone is refused too.
  REQUIRE(::unlink((home + "/root").c_str()) == 0);
  REQUIRE(::rename((home + "/root.real").c_str(), (home + "/root").c_str()) == 0);
  RunResult data = t.launch({"coder", "--", "/bin/sh", "-c", "cat /data/key; echo ran"}, m.as);
  INFO(data.out << data.err);
  CHECK(data.exit_code != 0);
  CHECK(data.out.find("owner-only") == std::string::npos);
  CHECK(data.err.find(home + "/data: openat data: ENOTDIR") != std::string::npos);
  // The root link alone (data a directory again): the root is not followed.
  REQUIRE(::unlink((home + "/data").c_str()) == 0);
  t.mkdir("ctx/home/" + uid + "/agent/coder/data");
  REQUIRE(::rename((home + "/root").c_str(), (home + "/root.real").c_str()) == 0);
  REQUIRE(::symlink(t.root().c_str(), (home + "/root").c_str()) == 0);
  RunResult root = t.launch({"coder", "--", "/bin/sh", "-c", "ls /; echo ran"}, m.as);
  INFO(root.out << root.err);
  CHECK(root.exit_code != 0);
  CHECK(root.out.find("ran") == std::string::npos);
  CHECK(root.err.find("ELOOP: reaches through a symbolic link, which a launch never follows") != std::string::npos);
}

// Issue 13: what a launch refuses is said with the file to fix, and
// ctx check (the launcher's own preflight) refuses the same trees first.
TEST_CASE("launch errors name the control file, the missing interpreter or loader; ctx check fails on them",
          "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  const std::string home_root = t.root() + "/home/" + uid + "/agent/coder/root";
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"}});
  t.write("ctx/agent/coder", "#!/bin/sh\necho ran\n", 0755);
  const std::string ctx = ctx::test::built("ctx/ctx");
  auto check = [&] { return ctx::test::run_command({ctx, "check", "--ctx-root", t.root(), "coder"}, m.as); };
  auto launch = [&] { return t.launch({"coder"}, m.as); };
  RunResult ok = launch();
  INFO(ok.out << ok.err);
  REQUIRE(ok.exit_code == 0);
  REQUIRE(ok.out == "ran\n");
  REQUIRE(check().exit_code == 0);

  struct Fault {
    const char* what;
    std::function<void()> make, undo;
    int exit_code;
    std::string message;
  };
  std::vector<Fault> faults{
      {"CRLF", [&] { t.write("ctx/agent/coder", "#!/bin/sh\r\necho ran\r\n", 0755); },
       [&] { t.write("ctx/agent/coder", "#!/bin/sh\necho ran\n", 0755); }, 127,
       "runtime /ctx/agent/coder: its #! line ends in CR (DOS line ends)"},
      {"no /bin link", [&] { REQUIRE(::rename((home_root + "/bin").c_str(), (home_root + "/bin.off").c_str()) == 0); },
       [&] { REQUIRE(::rename((home_root + "/bin.off").c_str(), (home_root + "/bin").c_str()) == 0); }, 127,
       "runtime /ctx/agent/coder: #!/bin/sh: /bin/sh not found in the sandbox; the root " + home_root +
           " needs the merged-/usr links"},
      {"cwd", [&] { t.write("ctx/agent/coder.d/cwd", "/nowhere\n"); },
       [&] { REQUIRE(::unlink((t.root() + "/agent/coder.d/cwd").c_str()) == 0); }, 125,
       "coder.d/cwd: chdir /nowhere: ENOENT: no such directory in the sandbox"},
      {"root", [&] { t.write("ctx/agent/coder.d/root", t.root() + "/home/" + uid + "/agent/coder/nothing\n"); },
       [&] { t.write("ctx/agent/coder.d/root", home_root + "\n"); }, 125,
       "coder.d/root: root " + t.root() + "/home/" + uid + "/agent/coder/nothing: ENOENT: no such directory"},
  };
  for (auto& f : faults) {
    f.make();
    RunResult l = launch();
    RunResult c = check();
    INFO(f.what << "\nlaunch: " << l.out << l.err << "\ncheck: " << c.out << c.err);
    CHECK(l.exit_code == f.exit_code);
    CHECK(l.err.find(f.message) != std::string::npos);
    CHECK(c.exit_code == 1);
    CHECK(c.out.find(f.message) != std::string::npos);  // the same sentence, before any launch
    f.undo();
    CHECK(launch().exit_code == 0);
  }
  // An ELF runtime whose loader the root does not show.
  REQUIRE(::rename((home_root + "/lib64").c_str(), (home_root + "/lib64.off").c_str()) == 0);
  RunResult elf = t.launch({"coder", "--", "/usr/bin/true"}, m.as);
  INFO(elf.err);
  CHECK(elf.exit_code == 127);
  CHECK(elf.err.find("runtime /usr/bin/true: its loader /lib64/") != std::string::npos);
}
