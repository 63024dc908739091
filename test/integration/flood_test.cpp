// Floods of the supervisor from inside real sandboxes, launched by root
// for the test user and by the test user (docs/security.md, "Floods and
// unbounded resources"): a flood of requests neither erases the agent's
// earlier records nor another agent's in a model's shared log, nor grows
// a file without bound; idle connections cannot lock the agent out; a
// stopping agent cannot claim to be ready; a refusal names the agent the
// supervisor serves, not the environment's CTX_AGENT.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "launcher/records/agent_files.hpp"
#include "launcher/control/server.hpp"
#include "launcher/control/rate_limit.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;
using nlohmann::json;

namespace {

// One connection, one request line after the other with the three stdio
// descriptors attached as `ctx model` sends them, each answer read, for
// argv[2] seconds. Prints: requests, rate-limited answers, seconds.
const char* const kFloodPy = R"(import array, socket, sys, time
req = (sys.argv[1] + "\n").encode()
s = socket.socket(socket.AF_UNIX); s.connect("/run/ctx/supervisor")
fds = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [0, 1, 2]))]
n = limited = 0; buf = b""; t0 = time.time()
while time.time() < t0 + float(sys.argv[2]):
    s.sendmsg([req], fds)
    while b"\n" not in buf:
        d = s.recv(65536)
        if not d: sys.exit("closed")
        buf += d
    line, buf = buf.split(b"\n", 1)
    n += 1; limited += b'"rate_limited"' in line
print(n, limited, time.time() - t0)
)";

// 32 connections: one waits for the child rev's exit, 31 say nothing. A
// 33rd is closed unanswered; once the idle ones have timed out a new one
// is answered, and the waiter still gets its answer.
const char* const kIdlePy = R"(import socket, time
def conn():
    s = socket.socket(socket.AF_UNIX); s.connect("/run/ctx/supervisor"); return s
def ask(s, line):
    try:
        s.settimeout(3); s.sendall(line + b"\n"); return s.recv(65536).decode().strip() or "closed"
    except OSError as e:
        return "closed" if not isinstance(e, socket.timeout) else "no answer"
w = conn(); w.sendall(b'{"op":"wait","name":"rev"}\n')
idle = [conn() for _ in range(31)]
time.sleep(0.5)
print("33rd:", ask(conn(), b'{"op":"wait","name":"nosuch"}'))
time.sleep(%IDLE% + 1)
closed = 0
for s in idle:
    s.settimeout(0.2)
    try: closed += s.recv(1) == b""
    except OSError: pass
print("idle closed:", closed)
print("new:", ask(conn(), b'{"op":"wait","name":"nosuch"}'))
w.settimeout(20)
print("waiter:", w.recv(65536).decode().strip())
)";

// The agent coder (label coder_t) sees /usr, the probe, the CTX root (the
// agent view, with /ctx/bin/ctx) and data/ at /work; it may run the tool
// fs.read and use the model debug/fenced, whose own policy admits only
// other_t; openai/gpt-4o exists and is granted to nobody.
struct FloodTree {
  ctx::test::LaunchMode m = ctx::test::launch_mode();
  CtxTree t{m.owner};
  std::string uid = std::to_string(m.owner.uid);

  FloodTree() {
    t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
    t.write("ctx/tool/fs.read", "#!/bin/sh\necho read-ran\n", 0755);
    t.write("ctx/model/openai/gpt-4o", "#!/bin/sh\necho gpt-ran\n", 0755);
    t.write("ctx/model/debug/fenced", "#!/bin/sh\ncat >/dev/null\necho fenced-ran\n", 0755);
    t.write("ctx/model/debug/fenced.d/policy", "allow other_t model:debug/fenced use\n");
    std::string idle = kIdlePy;
    idle.replace(idle.find("%IDLE%"), 6, std::to_string(ctx::launcher::kIdleTimeoutMs / 1000));
    t.write("data/flood.py", kFloodPy);
    t.write("data/idle.py", idle);
    agent("coder",
          "allow coder_t tool:fs.read execute\nallow coder_t model:debug/fenced use\n"
          "allow coder_t agent:rev create\nallow coder_t agent:rev start\n");
    agent("other", "allow other_t model:debug/fenced use\n");
  }
  // As root an agent runs with its owner's ids (iso shared), so that its
  // owned child needs no user namespace of its own (as children_test).
  void agent(const std::string& name, const std::string& policy) {
    t.agent(name, {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.dir().path() +
                                 "/data\t/work\tro\tbind,nosuid,nodev\n"},
                   {"policy", policy},
                   {"iso", m.privileged ? "shared\n" : "userns\n"}});
  }
  RunResult sh(const std::string& agent, const std::string& cmd) {
    return t.launch({agent, "--", "/bin/sh", "-c", cmd}, m.as, 90);
  }
  std::string read(const std::string& rel) {
    return std::filesystem::exists(t.dir() / rel) ? t.dir().read(rel) : std::string();
  }
  std::string events(const std::string& agent) {
    return read("ctx/home/" + uid + "/agent/" + agent + "/session/default/events.jsonl");
  }
};

std::vector<json> lines_of(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

std::size_t count_if(const std::vector<json>& v, const json& want) {
  return static_cast<std::size_t>(std::count_if(v.begin(), v.end(), [&](const json& e) {
    for (const auto& [k, x] : want.items())
      if (!e.contains(k) || e[k] != x) return false;
    return true;
  }));
}

// What flood.py printed.
struct Flood {
  std::size_t requests = 0, limited = 0;
  double seconds = 0;
};
Flood flood_of(const RunResult& r) {
  Flood f;
  std::istringstream in(r.out.substr(r.out.rfind('\n', r.out.size() - 2) + 1));
  in >> f.requests >> f.limited >> f.seconds;
  return f;
}

// The most records a flood of f can have made: the burst, then the rate
// for the time it took (and a second for the requests before it).
std::size_t admitted_at_most(const Flood& f) {
  return ctx::launcher::kRequestBurst +
         static_cast<std::size_t>(ctx::launcher::kRequestsPerMinute * (f.seconds + 1) / 60) + 1;
}

// How long a sustained flood of lines like `line` takes to push a record
// out of a log (one cap's worth; log.1 keeps it for as long again): the
// arithmetic of launcher/control/rate_limit.hpp and docs/security.md.
double survival_seconds(const json& line) {
  const double bytes = static_cast<double>(line.dump(-1, ' ', true).size() + 1);
  return static_cast<double>(ctx::launcher::kMaxLogBytes) / (ctx::launcher::kRequestsPerMinute / 60.0 * bytes);
}

}  // namespace

TEST_CASE("a flood of model calls neither erases the agent's earlier records nor grows its files without bound",
          "[root][userns]") {
  FloodTree f;
  RunResult r = f.sh("coder",
                     "/ctx/bin/ctx tool fs.read >/dev/null && exec python3 /work/flood.py "
                     "'{\"op\":\"model\",\"name\":\"openai/gpt-4o\"}' 3");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const Flood fl = flood_of(r);
  REQUIRE(fl.requests > ctx::launcher::kRequestBurst + 100);  // a flood, past the burst
  // Beyond the limit: EAGAIN, unrecorded; the records are the burst and
  // the rate, no more.
  std::vector<json> ev = lines_of(f.events("coder"));
  const std::size_t recorded = count_if(ev, {{"type", "model.call"}, {"object", "model/openai/gpt-4o"}});
  CHECK(recorded + fl.limited == fl.requests);
  CHECK(recorded <= admitted_at_most(fl));
  CHECK(ev.size() <= admitted_at_most(fl) + 8);
  // The agent's log: its start and its earlier tool call are still there,
  // and the drops are one record with their count.
  const std::string log = f.read("ctx/agent/coder.d/log.1") + f.read("ctx/agent/coder.d/log");
  std::vector<json> lg = lines_of(log);
  CHECK(count_if(lg, {{"type", "agent.start"}}) == 1);
  CHECK(count_if(lg, {{"type", "tool.call"}, {"object", "tool/fs.read"}, {"status", "ok"}}) == 1);
  CHECK(count_if(lg, {{"type", "model.call"}}) == recorded);
  CHECK(count_if(lg, {{"type", "agent.limit"}, {"status", "dropped"}, {"dropped", fl.limited}}) == 1);
  CHECK(lg.size() <= admitted_at_most(fl) + 12);
  // A sustained flood of these records takes 1.8 hours to push one out
  // of log (docs/security.md), as long again out of log.1.
  json sample;
  for (const auto& e : lg)
    if (e["type"] == "model.call") sample = e;
  CHECK(survival_seconds(sample) >= 1.75 * 3600);
}

TEST_CASE("a flood of calls a model's own policy refuses leaves another agent's records in the model's log",
          "[root][userns]") {
  FloodTree f;
  RunResult o = f.sh("other", "/ctx/bin/ctx model debug/fenced x");
  INFO(o.out << o.err);
  REQUIRE(o.out == "fenced-ran\n");
  RunResult r = f.sh("coder", "exec python3 /work/flood.py '{\"op\":\"model\",\"name\":\"debug/fenced\"}' 3");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const Flood fl = flood_of(r);
  REQUIRE(fl.requests > ctx::launcher::kRequestBurst + 100);
  // The model's shared log: the other agent's call survives; the caller's
  // refusals in it are its rate, no more.
  std::vector<json> ml = lines_of(f.read("ctx/model/debug/fenced.d/log.1") + f.read("ctx/model/debug/fenced.d/log"));
  CHECK(count_if(ml, {{"agent", "other"}, {"type", "model.call"}, {"status", "ok"}}) == 1);
  const std::size_t refused = count_if(ml, {{"agent", "coder"}, {"status", "denied"}, {"reason", "model_policy"}});
  CHECK(refused + fl.limited == fl.requests);
  CHECK(refused <= admitted_at_most(fl));
  CHECK(ml.size() == refused + 1);
  // And the caller's own files.
  CHECK(lines_of(f.events("coder")).size() <= admitted_at_most(fl) + 8);
  std::vector<json> lg = lines_of(f.read("ctx/agent/coder.d/log.1") + f.read("ctx/agent/coder.d/log"));
  CHECK(count_if(lg, {{"type", "agent.start"}}) == 1);
  CHECK(lg.size() <= admitted_at_most(fl) + 12);
  CHECK(survival_seconds(ml.back()) >= 1.75 * 3600);
}

TEST_CASE("idle control connections time out; a waiter for a child's exit is not idle", "[root][userns]") {
  FloodTree f;
  static_assert(ctx::launcher::kMaxConns == 32);
  const std::string req =
      "{\"name\":\"rev\",\"label\":\"rev_t\",\"mount\":[[\"/usr\",\"/usr\",\"ro\"],[\"/probe\",\"/probe\",\"ro\"]]}";
  RunResult r =
      f.sh("coder",
           "set -e; /ctx/bin/ctx agent create '" + req + "' >/dev/null; /ctx/bin/ctx agent start rev -- /probe sleep:" +
               std::to_string(ctx::launcher::kIdleTimeoutMs / 1000 + 3) + " >/dev/null; exec python3 /work/idle.py");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "33rd: closed\n"
        "idle closed: 31\n"
        "new: {\"agent\":\"coder\",\"code\":\"ESRCH\",\"message\":\"nosuch: ESRCH: this supervisor has not started "
        "it\",\"ok\":false,\"op\":\"wait\",\"reason\":\"not_started\"}\n"
        "waiter: {\"exit_status\":0,\"name\":\"rev\",\"ok\":true,\"op\":\"wait\"}\n");
}

TEST_CASE("a stopping agent stays stopping: no notify message makes it ready again", "[root][userns]") {
  FloodTree f;
  // The runtime says it stops, then that it is ready and busy.
  const std::string say =
      "import os, socket, time\n"
      "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
      "for m in [b'READY=1', b'STOPPING=1', b'READY=1', b'CTX_STATE=busy', b'IDLE=1\\nREADY=1']:\n"
      "    s.sendto(m, os.environ['NOTIFY_SOCKET']); time.sleep(0.2)\n";
  RunResult r = f.t.launch({"coder", "--", "/usr/bin/python3", "-c", say}, f.m.as);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> states;
  for (const auto& e : lines_of(f.read("ctx/agent/coder.d/log")))
    if (e["type"] == "agent.status") states.push_back(e["state"]);
  CHECK(states == std::vector<std::string>{"ready", "stopping"});
  // Stopped by a signal (the supervisor says stopping), the runtime
  // answers READY=1 on its way out: status stays stopping.
  const std::string trap =
      "import os, signal, socket, sys, time\n"
      "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
      "def term(*a):\n"
      "    s.sendto(b'READY=1', os.environ['NOTIFY_SOCKET']); time.sleep(0.5); sys.exit(0)\n"
      "signal.signal(signal.SIGTERM, term)\n"
      "s.sendto(b'READY=1', os.environ['NOTIFY_SOCKET'])\n"
      "time.sleep(30)\n";
  ctx::test::Spawned sp = f.t.spawn({"coder", "--", "/usr/bin/python3", "-c", trap}, f.m.as);
  const std::string status = f.t.root() + "/agent/coder.d/status";
  REQUIRE(ctx::test::wait_for_file(status, "ready\n"));
  REQUIRE(::kill(sp.pid, SIGTERM) == 0);
  CHECK(ctx::test::wait_for_file(status, "stopping\n"));
  ::usleep(300 * 1000);  // the runtime's READY=1 has been read
  CHECK(ctx::test::read_file(status) == "stopping\n");
  RunResult end = ctx::test::wait_command(sp);
  INFO(end.out << end.err);
  std::vector<json> lg = lines_of(f.read("ctx/agent/coder.d/log"));
  auto signal = std::find_if(lg.begin(), lg.end(), [](const json& e) { return e["type"] == "agent.signal"; });
  REQUIRE(signal != lg.end());
  CHECK(std::none_of(signal, lg.end(), [](const json& e) { return e["type"] == "agent.status"; }));
}

TEST_CASE("a refusal names the agent its supervisor serves, never the environment's CTX_AGENT", "[root][userns]") {
  FloodTree f;
  RunResult r = f.sh("coder",
                     "CTX_AGENT=other /ctx/bin/ctx tool nosuch; CTX_AGENT=other /ctx/bin/ctx tool ../x; "
                     "CTX_AGENT=other /ctx/bin/ctx model openai/gpt-4o x");
  INFO(r.out << r.err);
  std::vector<json> refusals;
  std::istringstream in(r.err);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') refusals.push_back(json::parse(line));
  REQUIRE(refusals.size() == 3);
  CHECK(refusals[0] == json{{"type", "error"},
                            {"code", "EACCES"},
                            {"reason", "agent_policy"},
                            {"tool", "nosuch"},
                            {"agent", "coder"},
                            {"message", "the policy of coder has no 'allow coder_t tool:nosuch execute'"}});
  CHECK(refusals[1]["agent"] == "coder");
  CHECK(refusals[1]["reason"] == "invalid_name");
  CHECK(refusals[2]["agent"] == "coder");
  CHECK(refusals[2]["reason"] == "agent_policy");
}

// The limit's arithmetic without a sandbox: the burst, the rate, and the
// count of drops reported once, a minute after the first of them (a
// sustained flood: one record a minute) or at the end.
TEST_CASE("the rate limit takes the burst and the rate, and reports the drops at most once a minute", "[unit]") {
  using ctx::launcher::kDropReportUs;
  ctx::launcher::RateLimiter l(ctx::launcher::kRequestBurst, ctx::launcher::kRequestsPerMinute);
  std::uint64_t now = 1'000'000;
  for (unsigned i = 0; i < ctx::launcher::kRequestBurst; ++i) CHECK(l.take(now));
  CHECK_FALSE(l.take(now));
  CHECK(l.report_at() == now + kDropReportUs);
  CHECK_FALSE(l.due_report(now + kDropReportUs - 1, false));
  // One token a second, and a flood for 21.5 s: 21 taken, the rest
  // counted.
  static_assert(ctx::launcher::kRequestsPerMinute == 60);
  std::uint64_t taken = 0, dropped = 1;
  for (std::uint64_t t = now + 1000; t <= now + 21'500'000; t += 1000) (l.take(t) ? taken : dropped)++;
  CHECK(taken == 21);
  CHECK(l.due_report(now + kDropReportUs, false) == dropped);
  CHECK_FALSE(l.report_at());
  CHECK_FALSE(l.due_report(now + 2 * kDropReportUs, true));
  // A later drop starts a new count, which the end of the run reports.
  for (std::uint64_t t = now + kDropReportUs; l.take(t);) {
  }
  CHECK(l.due_report(now + kDropReportUs, true) == 1u);
}
