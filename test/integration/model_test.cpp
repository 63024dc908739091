// `ctx model` (issue 12) from inside real sandboxes, launched by root for
// the test user and by the test user: the model runs in a sandbox of its
// own with its credentials, and sees nothing of the agent's.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include <unistd.h>

#include "test/support/facility.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::first_json_line;
using ctx::test::RunResult;
using ctx::test::TestUser;

namespace {

struct ModelTree {
  TestUser as;
  CtxTree t;
  std::string uid;

  ModelTree(const TestUser& owner, const TestUser& launcher) : as(launcher), t(owner), uid(std::to_string(owner.uid)) {
    t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
    t.write("ctx/tool/fs.read", "#!/bin/sh\necho read-ran\n", 0755);
    t.write("ctx/model/debug/echo", "#!/bin/sh\nprintf 'echo:%s\\n' \"$(cat)\"\n", 0755);
    // A model that tells what it sees.
    t.write("ctx/model/debug/spy",
            "#!/bin/sh\necho \"key=$API_KEY\"\nfor p in /work /ctx/tool /ctx/agent /run/ctx /ctx/home; do "
            "[ -e $p ] && echo \"sees $p\"; done\ntouch /x 2>/dev/null && echo wrote\n"
            "[ $(ls /proc | grep -c '^[0-9]') -lt 10 ] && echo own-pid-namespace\n"
            "echo netdevs=$(grep -c : /proc/net/dev)\n",
            0755);
    t.write("ctx/model/debug/spy.d/env", "API_KEY=sk-live-secret\n");
    t.write("ctx/model/debug/fenced", "#!/bin/sh\necho fenced-ran\n", 0755);
    // What a model sees of name resolution: debug/net has the network, debug/resolver not.
    const std::string resolver =
        "#!/bin/sh\nfor f in /etc/resolv.conf /etc/hosts /etc/nsswitch.conf; do [ -e $f ] && echo has $f; done\n"
        "getent hosts localhost >/dev/null && echo resolves-localhost\n"
        "echo x 2>/dev/null >/etc/hosts && echo wrote-hosts\nexit 0\n";
    t.write("ctx/model/debug/net", resolver, 0755);
    t.write("ctx/model/debug/net.d/cap", "network\n");
    t.write("ctx/model/debug/resolver", resolver, 0755);
    t.write("ctx/model/debug/slow", "#!/bin/sh\ncat >/dev/null\nsleep 1\necho slow-done\n", 0755);
    t.write("ctx/model/debug/slow.d/env", "API_KEY=sk-live-secret\n");
    t.write("ctx/model/debug/fenced.d/policy", "allow other_t model:debug/fenced use\n");
    t.write("ctx/model/debug/echo.d/id", "debug/echo\n");
    t.write("ctx/model/openai/gpt-4o", "#!/bin/sh\necho gpt-ran\n", 0755);
    t.write("ctx/model/debug/fail", "#!/bin/sh\necho no-provider >&2\nexit 7\n", 0755);
    // A call that leaves what it can for a later one: a loopback listener
    // and an abstract socket, both handed to the agent over its stdout (a
    // socket the agent made), a process that stays, a file in its /tmp.
    t.write("ctx/model/debug/leave",
            "#!/usr/bin/python3\nimport array, os, socket, time\n"
            "tcp = socket.socket()\ntcp.bind(('127.0.0.1', 47301))\ntcp.listen()\n"
            "unix = socket.socket(socket.AF_UNIX)\nunix.bind('\\0ctx-left-behind')\nunix.listen()\n"
            "open('/tmp/left-behind', 'w').close()\n"
            "out = socket.socket(fileno=os.dup(1))\n"
            "out.sendmsg([b'left'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [tcp.fileno(), "
            "unix.fileno()]))])\n"
            "if os.fork() == 0:\n    os.setsid()\n    time.sleep(30)\n",
            0755);
    // A later call: what it can reach of the earlier one.
    t.write("ctx/model/debug/reach",
            "#!/usr/bin/python3\nimport os, socket\n"
            "def dial(family, addr):\n    s = socket.socket(family)\n    try:\n        s.connect(addr)\n"
            "        return 'connected'\n    except OSError as e:\n        return os.strerror(e.errno)\n"
            "print('tcp 127.0.0.1:47301:', dial(socket.AF_INET, ('127.0.0.1', 47301)))\n"
            "print('abstract ctx-left-behind:', dial(socket.AF_UNIX, '\\0ctx-left-behind'))\n"
            "print('/tmp/left-behind:', os.path.exists('/tmp/left-behind'))\n"
            "print('processes but its init:', sorted(open('/proc/%s/comm' % p).read().strip() "
            "for p in os.listdir('/proc') if p.isdigit() and p != '1'))\n",
            0755);
    // A model that leaves a writer behind, and one killed by a signal.
    t.write("ctx/model/debug/late", "#!/bin/sh\n(sleep 0.05; while :; do echo late; sleep 0.01; done) &\necho early\n",
            0755);
    t.write("ctx/model/debug/killed", "#!/bin/sh\necho dying\nkill -KILL $$\n", 0755);
    // A model that names its network and user namespaces and hands the
    // agent a socket of its network namespace, which keeps both alive
    // (and so their numbers unique) while the agent holds it.
    t.write("ctx/model/debug/ns",
            "#!/usr/bin/python3\nimport array, os, socket\n"
            "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "out = socket.socket(fileno=os.dup(1))\n"
            "msg = os.readlink('/proc/self/ns/net') + ' ' + os.readlink('/proc/self/ns/user')\n"
            "out.sendmsg([msg.encode()], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [s.fileno()]))])\n",
            0755);
    t.dir().symlink("/ctx/model/debug/echo", "ctx/model/main");
    t.dir().symlink("/ctx/model/debug/echo", "ctx/model/helper");
    t.write("ctx/home/" + uid + "/model/.keep", "");
    t.dir().symlink("/ctx/model/debug/fail", "ctx/home/" + uid + "/model/helper");  // the user's alias comes first
    t.dir().symlink("/ctx/model/openai/gpt-4o", "ctx/model/ungranted");
    t.write("data/f", "project\n");
    t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.dir().path() +
                                    "/data\t/work\trw\tbind,nosuid,nodev\n"},
                      {"policy",
                       "allow coder_t model:debug/echo use\nallow coder_t model:debug/spy use\n"
                       "allow coder_t model:debug/fenced use\nallow coder_t model:debug/fail use\n"
                       "allow coder_t model:main use\nallow coder_t model:ungranted use\n"
                       "allow coder_t model:debug/slow use\n"
                       "allow coder_t model:debug/leave use\nallow coder_t model:debug/reach use\n"
                       "allow coder_t model:debug/net use\nallow coder_t model:debug/resolver use\n"
                       "allow coder_t model:debug/late use\nallow coder_t model:debug/killed use\n"
                       "allow coder_t model:debug/ns use\n"
                       "allow coder_t tool:fs.read execute\n"}});
  }
  std::vector<nlohmann::json> lines(const std::string& rel) {
    std::vector<nlohmann::json> out;
    std::istringstream in(t.dir().read(rel));
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  std::vector<nlohmann::json> events() {
    return lines("ctx/home/" + uid + "/agent/coder/session/default/events.jsonl");
  }
  RunResult sh(const std::string& cmd) { return t.launch({"coder", "--", "/bin/sh", "-c", cmd}, as); }
};

ModelTree make_tree() {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  TestUser as = ctx::test::current_facility() == "root" ? TestUser{0, 0, "root"} : *u;
  return ModelTree(*u, as);
}

}  // namespace

TEST_CASE("ctx model runs a model in a sandbox of its own: its answer, its credentials, nothing of the agent's",
          "[root][userns]") {
  ModelTree m = make_tree();
  RunResult r = m.sh(
      "/ctx/bin/ctx model debug/echo 'as argument'; echo rc=$?; echo on stdin | /ctx/bin/ctx model "
      "debug/echo; /ctx/bin/ctx model debug/spy </dev/null; echo rc=$?; "
      "cat /ctx/model/debug/spy.d/env 2>/dev/null || echo agent-sees-no-key");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "echo:as argument\nrc=0\necho:on stdin\nkey=sk-live-secret\nown-pid-namespace\nnetdevs=1\nrc=0\n"
        "agent-sees-no-key\n");
  bool logged = false;
  for (const auto& l : m.lines("ctx/agent/coder.d/log"))
    logged = logged || (l["type"] == "model.call" && l["object"] == "model/debug/spy" && l["status"] == "ok");
  CHECK(logged);
}

TEST_CASE("ctx model refuses like ctx tool: the agent's grant, the model's own policy, an unknown name",
          "[root][userns]") {
  ModelTree m = make_tree();
  for (auto [cmd, code, reason] : {std::tuple{"/ctx/bin/ctx model openai/gpt-4o x", 13, "agent_policy"},
                                   std::tuple{"/ctx/bin/ctx model debug/fenced x", 13, "model_policy"},
                                   std::tuple{"/ctx/bin/ctx model ../x x", 2, "not_found"}}) {
    RunResult r = m.sh(cmd);
    INFO(cmd << ": " << r.out << r.err);
    CHECK(r.exit_code == code);
    CHECK(first_json_line(r.err)["reason"] == reason);
    CHECK(r.out.empty());
  }
}

TEST_CASE("ctx model: an alias is checked as the model it names, the user's alias first; records hold facts",
          "[root][userns]") {
  ModelTree m = make_tree();
  RunResult r = m.sh(
      "/ctx/bin/ctx model main 'secret prompt'; echo rc=$?; /ctx/bin/ctx model helper x; echo rc=$?; "
      "/ctx/bin/ctx model ungranted x 2>/dev/null; echo rc=$?");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  // main -> debug/echo, granted; the user's helper -> debug/fail (exit 7);
  // ungranted -> openai/gpt-4o: the alias's grant is not the model's.
  CHECK(r.out == "echo:secret prompt\nrc=0\nrc=7\nrc=13\n");
  CHECK(r.err.find("no-provider") != std::string::npos);
  std::vector<nlohmann::json> ev;
  for (auto& e : m.events())
    if (e["type"] == "model.call") ev.push_back(e);
  INFO(m.t.dir().read("ctx/home/" + m.uid + "/agent/coder/session/default/events.jsonl"));
  REQUIRE(ev.size() == 3);
  for (const auto& e : ev) {
    INFO(e.dump());
    for (const char* k : {"ts", "type", "agent", "session", "object", "status"}) CHECK(e.contains(k));
    CHECK(e["type"] == "model.call");
    CHECK(e["agent"] == "coder");
    CHECK(e["session"] == "default");
  }
  CHECK(ev[0]["object"] == "model/debug/echo");
  CHECK(ev[0]["status"] == "ok");
  CHECK(ev[0]["exit_status"] == 0);
  CHECK(ev[0]["alias"] == "model/main");
  CHECK(ev[1]["object"] == "model/debug/fail");
  CHECK(ev[1]["status"] == "failed");
  CHECK(ev[1]["exit_status"] == 7);
  CHECK(ev[1]["alias"] == "home/" + m.uid + "/model/helper");
  CHECK(ev[2]["object"] == "model/openai/gpt-4o");
  CHECK(ev[2]["status"] == "denied");
  CHECK(ev[2]["reason"] == "agent_policy");
  CHECK(ev[2]["alias"] == "model/ungranted");
  // The model's own log: one line per call that reached it, with facts
  // and never the request or the answer.
  std::string echo_log = m.t.dir().read("ctx/model/debug/echo.d/log");
  CHECK(echo_log.find("secret prompt") == std::string::npos);
  auto lines = m.lines("ctx/model/debug/echo.d/log");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["type"] == "model.call");
  CHECK(lines[0]["agent"] == "coder");
  CHECK(lines[0]["session"] == "default");
  CHECK(lines[0]["status"] == "ok");
  CHECK(lines[0]["exit_status"] == 0);
  CHECK(lines[0].contains("ts"));
  CHECK(lines[0].contains("ms"));
  for (const auto& e : ev) CHECK(e.dump().find("secret prompt") == std::string::npos);
}

TEST_CASE("ctx model: a refusal by the model's own policy is in its log; a model entry never runs directly",
          "[root][userns]") {
  ModelTree m = make_tree();
  RunResult r = m.sh(
      "/ctx/bin/ctx model debug/fenced x 2>/dev/null; echo rc=$?; /ctx/model/debug/echo </dev/null "
      "2>/dev/null; echo rc=$?; /ctx/model/debug/spy </dev/null 2>/dev/null; echo rc=$?");
  INFO(r.out << r.err);
  CHECK(r.out == "rc=13\nrc=126\nrc=126\n");
  auto lines = m.lines("ctx/model/debug/fenced.d/log");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["status"] == "denied");
  CHECK(lines[0]["reason"] == "model_policy");
  CHECK(lines[0]["agent"] == "coder");
}

TEST_CASE("a root supervisor writes a model's log as root only in a .d/ that root owns", "[root]") {
  ModelTree m = make_tree();
  REQUIRE(m.as.uid == 0);
  const std::string root = m.t.dir().path();
  // The system tier's echo.d/ belongs to root: its log is written (the
  // owner could not write it).
  m.t.write("ctx/model/debug/echo.d/log", "");
  REQUIRE(::chown((root + "/ctx/model/debug/echo.d").c_str(), 0, 0) == 0);
  REQUIRE(::chown((root + "/ctx/model/debug/echo.d/log").c_str(), 0, 0) == 0);
  // The owner's fail.d/ holds a hard link to a file of root's: written as
  // the owner, never as root.
  m.t.write("ctx/model/debug/fail.d/id", "debug/fail\n");
  m.t.dir().write("victim", "root's\n", 0644);
  REQUIRE(::link((root + "/victim").c_str(), (root + "/ctx/model/debug/fail.d/log").c_str()) == 0);
  RunResult r =
      m.sh("/ctx/bin/ctx model debug/echo x >/dev/null; /ctx/bin/ctx model debug/fail x 2>/dev/null; echo rc=$?");
  INFO(r.out << r.err);
  CHECK(r.out == "rc=7\n");
  auto lines = m.lines("ctx/model/debug/echo.d/log");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["status"] == "ok");
  CHECK(m.t.dir().read("victim") == "root's\n");
  CHECK(r.warnings.find("model/debug/fail.d/log: openat log: EACCES") != std::string::npos);  // reported
}

TEST_CASE("the example tree: coder calls debug/echo, its child reviewer without a grant is refused", "[root][userns]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  TestUser as = ctx::test::current_facility() == "root" ? TestUser{0, 0, "root"} : *u;
  ctx::test::TempDir d;
  const std::string root = ctx::test::install_example(d.path(), *u);
  RunResult r =
      ctx::test::run_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", root, "coder"}, as, 60);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("{\"model\":\"debug/echo\",\"output\":\"hello from coder\"}\n") != std::string::npos);
  CHECK(r.out.find("{\"exit_status\":0,\"name\":\"reviewer\",\"ok\":true,\"op\":\"wait\"}") != std::string::npos);
  const std::string out =
      ctx::test::read_file(root + "/home/" + std::to_string(u->uid) + "/agent/reviewer/session/default/output.log");
  CHECK(out.find("reviewer: ctx model debug/echo refused as expected (exit 13)") != std::string::npos);
  const std::string rlog = ctx::test::read_file(root + "/agent/reviewer.d/log");
  CHECK(rlog.find("\"object\":\"model/debug/echo\",\"reason\":\"agent_policy\",\"session\":\"default\","
                  "\"status\":\"denied\"") != std::string::npos);
  CHECK(rlog.find("\"type\":\"model.call\"") != std::string::npos);
  const std::string mlog = ctx::test::read_file(root + "/model/debug/echo.d/log");
  CHECK(mlog.find("\"agent\":\"coder\"") != std::string::npos);
  CHECK(mlog.find("reviewer") == std::string::npos);  // refused before it reached the model
}

TEST_CASE("while a model runs, nothing in the agent's sandbox shows its credentials, though both run as one uid",
          "[root][userns]") {
  ModelTree m = make_tree();
  // The key is put together at run time, so that the script's own text
  // (its command line, the launch's log) does not hold it.
  RunResult r = m.sh(
      "k=sk-live-; k=${k}secret; /ctx/bin/ctx model debug/slow x >/work/answer & sleep 0.5; "
      "echo \"procs=$(ls -d /proc/[0-9]* | wc -l)\"; "
      "grep -l \"$k\" /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; "
      "grep -rl \"$k\" /ctx /work /run 2>/dev/null; wait; cat /work/answer");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  // Only the answer: no path of the sandbox named the key while the
  // model, holding it in its environment, was running.
  CHECK(r.out.find("sk-live-secret") == std::string::npos);
  CHECK(r.out.find("/proc/") == std::string::npos);
  CHECK(r.out.find("slow-done\n") != std::string::npos);
  CHECK(r.out.rfind("procs=", 0) == 0);
}

// The attack on a network namespace kept between calls: an earlier call
// listens on a loopback port (and an abstract socket, which is per network
// namespace too) and keeps it past its own end, in a process it left and
// in the descriptors it handed to the agent, which hold the listener open
// whatever happens to the call's processes; a later call connects to it.
TEST_CASE("nothing of an earlier model call reaches a later one: not a loopback listener handed to the agent, not a "
          "process it left, not a file it wrote",
          "[root][userns]") {
  ModelTree m = make_tree();
  const std::string agent =
      "import array, socket, subprocess\n"
      "a, b = socket.socketpair()\n"
      "call = subprocess.run(['/ctx/bin/ctx', 'model', 'debug/leave'], stdin=subprocess.DEVNULL, stdout=b)\n"
      "msg, anc, _, _ = a.recvmsg(16, socket.CMSG_SPACE(8))\n"
      "held = array.array('i', anc[0][2]) if anc else []\n"
      "print('first call:', call.returncode, msg.decode(), 'descriptors held:', len(held))\n"
      "print(subprocess.run(['/ctx/bin/ctx', 'model', 'debug/reach'], stdin=subprocess.DEVNULL, "
      "capture_output=True, text=True).stdout, end='')\n";
  RunResult r = m.t.launch({"coder", "--", "/usr/bin/python3", "-c", agent}, m.as);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "first call: 0 left descriptors held: 2\n"
        "tcp 127.0.0.1:47301: Connection refused\n"
        "abstract ctx-left-behind: Connection refused\n"
        "/tmp/left-behind: False\n"
        "processes but its init: ['reach']\n");
}

TEST_CASE("a model with the network resolves names through the host's /etc/hosts, read-only; one without has no "
          "resolver files",
          "[root][userns]") {
  ModelTree m = make_tree();
  RunResult r = m.sh("/ctx/bin/ctx model debug/net </dev/null; echo --; /ctx/bin/ctx model debug/resolver </dev/null");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "has /etc/resolv.conf\nhas /etc/hosts\nhas /etc/nsswitch.conf\nresolves-localhost\n--\n");
}

// The answer of a call comes once nothing of the model's sandbox runs (it
// is the exit of the sandbox's init, whose end kills the rest), so nothing
// the model left writes to the caller's stdout after it. An exit code from
// a signal comes through as 128 + the signal.
TEST_CASE("a model call is answered when nothing of its sandbox runs; its exit code as the model ended",
          "[root][userns]") {
  ModelTree m = make_tree();
  RunResult r = m.sh(
      "/ctx/bin/ctx model debug/late </dev/null >/work/late.out; echo rc=$?; sleep 0.3; cat /work/late.out; "
      "/ctx/bin/ctx model debug/killed </dev/null; echo rc=$?");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "rc=0\nearly\ndying\nrc=137\n");
  int calls = 0;
  for (const auto& ev : m.events())
    if (ev["type"] == "model.call") {
      ++calls;
      CHECK(ev["exit_status"] == (ev["object"] == "model/debug/late" ? 0 : 137));
    }
  CHECK(calls == 2);
}

// Every call has namespaces of its own, never an earlier call's: the first
// call of an unprivileged launch makes its user and network namespaces at
// its clone, later ones join a pair the supervisor had made ahead for one
// call (ModelGate's spare); a call with the network between them takes
// none. The agent holds a socket of each call's network namespace, so all
// of them live at once and their numbers cannot be reused. (That no
// earlier call's listener or process reaches a later one is the test
// above.)
TEST_CASE("each model call has a network and a user namespace no other call had, made ahead or not", "[root][userns]") {
  ModelTree m = make_tree();
  const std::string agent =
      "import array, os, socket, subprocess\n"
      "held = []\n"
      "for name in ['debug/ns', 'debug/ns', 'debug/ns', 'debug/net', 'debug/ns']:\n"
      "    a, b = socket.socketpair()\n"
      "    call = subprocess.run(['/ctx/bin/ctx', 'model', name], stdin=subprocess.DEVNULL, stdout=b)\n"
      "    b.close()\n"
      "    if name == 'debug/ns':\n"
      "        msg, anc, _, _ = a.recvmsg(256, socket.CMSG_SPACE(4))\n"
      "        held.append(array.array('i', anc[0][2])[0] if anc else -1)\n"
      "        print(msg.decode())\n"
      "    print('rc=%d' % call.returncode)\n"
      "print(os.readlink('/proc/self/ns/net') + ' ' + os.readlink('/proc/self/ns/user'))\n"
      "print('held', sum(1 for fd in held if fd >= 0))\n";
  RunResult r = m.t.launch({"coder", "--", "/usr/bin/python3", "-c", agent}, m.as);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::istringstream in(r.out);
  std::vector<std::string> net, user;
  std::string line;
  int ok = 0;
  while (std::getline(in, line)) {
    if (line == "rc=0") {
      ++ok;
      continue;
    }
    auto sp = line.find(' ');
    if (line.rfind("net:[", 0) == 0 && sp != std::string::npos) {
      net.push_back(line.substr(0, sp));
      user.push_back(line.substr(sp + 1));
    }
  }
  CHECK(ok == 5);
  CHECK(r.out.find("held 4\n") != std::string::npos);
  REQUIRE(net.size() == 5);  // four calls and the agent, last
  for (std::size_t i = 0; i < net.size(); ++i) {
    CHECK(user[i].rfind("user:[", 0) == 0);
    for (std::size_t j = 0; j < i; ++j) {
      CHECK(net[i] != net[j]);
      CHECK(user[i] != user[j]);
    }
  }
  int calls = 0;
  for (const auto& ev : m.events())
    if (ev["type"] == "model.call" && ev["object"] == "model/debug/ns") {
      ++calls;
      CHECK(ev["status"] == "ok");
    }
  CHECK(calls == 4);
}
