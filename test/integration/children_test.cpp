// Owned child agents, end to end: a parent's runtime asks its supervisor
// with `ctx agent create|start|stop|wait` from inside its sandbox; the
// children run in sandboxes of their own and are cancelled when the
// parent dies. [root] runs with cgroups (root launching for the test
// user), [userns] without (the test user has no writable cgroup here:
// the pidfd and process-group fallback).
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "agentdir/child.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::agent_cgroup;
using ctx::test::CtxTree;
using ctx::test::RunResult;
using ctx::test::TestUser;
using ctx::test::wait_gone;
using nlohmann::json;

namespace {

// A parent agent "coder" that sees /usr, the probe, the CTX root (ro,
// with /ctx/bin/ctx) and its home (rw); its policy lets it create, start
// and stop "rev" and "sub".
struct Family {
  ctx::test::LaunchMode m;
  CtxTree t{m.owner};
  std::string uid = std::to_string(m.owner.uid);
  std::string session_dir(const std::string& agent) const {
    return "ctx/home/" + uid + "/agent/" + agent + "/session/default";
  }

  explicit Family(const std::string& extra_policy = "", ctx::test::LaunchMode mode = ctx::test::launch_mode())
      : m(std::move(mode)) {
    t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
    std::string policy;
    for (const char* child : {"rev", "sub"})
      for (const char* perm : {"create", "start", "stop"})
        policy += std::string("allow coder_t agent:") + child + " " + perm + "\n";
    // As root the family runs with the owner's own ids (iso shared): no
    // user namespace per level.
    t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.root() + "/home/" +
                                    uid + "/agent/coder\t/ctx/home/" + uid + "/agent/coder\trw\tbind,nosuid,nodev\n"},
                      {"policy", policy + extra_policy},
                      {"iso", m.privileged ? "shared\n" : "userns\n"}});
    // The parent's own history, which no child may read.
    t.write(session_dir("coder") + "/messages.jsonl", "{\"role\":\"user\",\"content\":\"secret\"}\n");
  }

  // Runs a shell script as coder's runtime.
  RunResult sh(const std::string& script, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = extra;
    args.insert(args.end(), {"coder", "--", "/bin/sh", "-c", script});
    return t.launch(args, m.as, 90);
  }
  ctx::test::Spawned spawn_sh(const std::string& script, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = extra;
    args.insert(args.end(), {"coder", "--", "/bin/sh", "-c", script});
    return t.spawn(args, m.as);
  }
  std::string read(const std::string& rel) { return t.dir().read(rel); }
  bool exists(const std::string& rel) { return std::filesystem::exists(t.dir() / rel); }
};

// The seed's request shape for a child that sees /usr, the probe and /ctx
// read-only.
std::string request(const std::string& name, const std::string& more = "") {
  return "{\"name\":\"" + name + "\",\"label\":\"" + name +
         "_t\",\"mount\":[[\"/usr\",\"/usr\",\"ro\"],[\"/probe\",\"/probe\",\"ro\"],[\"/ctx\",\"/ctx\",\"ro\"]]" +
         more + "}";
}

std::vector<json> events(Family& f, const std::string& agent) {
  std::vector<json> out;
  std::istringstream in(f.read(f.session_dir(agent) + "/events.jsonl"));
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
  return out;
}

bool has_event(const std::vector<json>& ev, const json& want) {
  for (const auto& e : ev) {
    bool all = true;
    for (const auto& [k, v] : want.items()) all = all && e.contains(k) && e[k] == v;
    if (all) {
      CHECK(e.contains("ts"));
      return true;
    }
  }
  return false;
}

std::vector<std::string> json_lines(const std::string& out) {
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] == '{') v.push_back(line);
  return v;
}

}  // namespace

TEST_CASE("create, start and wait: the child runs in its own sandbox with only its handoff", "[root][userns]") {
  Family f;
  std::string home = "/ctx/home/" + f.uid + "/agent/coder/session/default";
  RunResult r = f.sh("set -e; /ctx/bin/ctx agent create '" + request("rev", ",\"handoff\":\"Task: review\\n\"") +
                     "'; /ctx/bin/ctx agent start rev -- /probe ids read:/handoff/handoff.md write:/handoff/handoff.md "
                     "write:/handoff/result.md write:/handoff/artifact/patch.diff exists:" +
                     home +
                     "/messages.jsonl exists:/ctx/agent/rev.d/label exists:/ctx/agent/coder.d/policy; "
                     "/ctx/bin/ctx agent wait rev");
  INFO(r.out << r.err << (f.exists("ctx/agent/rev.d/mount") ? f.read("ctx/agent/rev.d/mount") : "")
             << (f.exists("ctx/agent/rev.d/log") ? f.read("ctx/agent/rev.d/log") : ""));
  REQUIRE(r.exit_code == 0);
  // The answers of create, start and wait, and the child's probe report,
  // in whatever order the two processes wrote them.
  std::map<std::string, json> got;
  for (const auto& l : json_lines(r.out)) {
    json j = json::parse(l);
    got[j["op"].get<std::string>()] = j;
  }
  REQUIRE(got.size() == 3);
  // The child's output went to its own session, not to its parent's stdout.
  const std::string output = f.read(f.session_dir("rev") + "/output.log");
  auto out = json_lines(output);
  REQUIRE(out.size() == 1);
  got["probe"] = json::parse(out[0]);
  // Without a cgroup (the unprivileged launch here) the parent warned;
  // the child's output holds its runtime's words only.
  CHECK(output.find("ctx-agent-run: warning") == std::string::npos);
  CHECK(got["create"]["ok"] == true);
  CHECK(got["create"]["name"] == "rev");
  CHECK(got["start"]["ok"] == true);
  json seen = got["probe"];
  CHECK(seen["read:/handoff/handoff.md"] == "ok");
  CHECK(seen["write:/handoff/handoff.md"] == "EROFS");
  CHECK(seen["write:/handoff/result.md"] == "ok");
  CHECK(seen["write:/handoff/artifact/patch.diff"] == "ok");
  CHECK(seen["exists:" + home + "/messages.jsonl"] == "ENOENT");  // the parent's sessions are not in its view
  // The child's view shows itself, not its parent (docs/view.md).
  CHECK(seen["exists:/ctx/agent/rev.d/label"] == "yes");
  CHECK(seen["exists:/ctx/agent/coder.d/policy"] == "ENOENT");
  CHECK(got["wait"] == json{{"ok", true}, {"op", "wait"}, {"name", "rev"}, {"exit_status", 0}});

  // The child is an ordinary agent: its control files, owned by coder.
  std::string parent = f.read("ctx/agent/rev.d/parent");
  CHECK(parent.rfind("agent:coder session:default run:r", 0) == 0);
  CHECK(f.read("ctx/agent/rev.d/life") == "owned\n");
  CHECK(f.read("ctx/agent/rev.d/label") == "rev_t\n");
  CHECK(f.read("ctx/agent/rev.d/status") == "dead\n");
  // The coordination directory in the parent's session.
  std::string ctxdir = f.session_dir("coder") + "/context/child/rev/";
  CHECK(f.read(ctxdir + "agent") == "rev\n");
  CHECK(f.read(ctxdir + "handoff.md") == "Task: review\n");
  CHECK(f.read(ctxdir + "result.md") == "probe\n");
  CHECK(f.read(ctxdir + "artifact/patch.diff") == "probe\n");
  CHECK(f.read(ctxdir + "status") == "done\n");
  CHECK(f.read(f.session_dir("rev") + "/state") == "done\n");
  // Seed 003 "Child Session": the launcher's files of the child's own
  // session; messages.jsonl and latest.md are its runtime's (none here).
  for (const char* file : {"created_at", "updated_at", "meta.json", "events.jsonl", "output.log"}) {
    INFO(file);
    CHECK(f.exists(f.session_dir("rev") + "/" + file));
  }
  CHECK(f.exists(f.session_dir("rev") + "/context"));
  CHECK(f.read(f.session_dir("rev") + "/cwd").rfind('/', 0) == 0);
  CHECK(json::parse(f.read(f.session_dir("rev") + "/meta.json"))["agent"] == "rev");
  CHECK_FALSE(f.exists(f.session_dir("rev") + "/messages.jsonl"));
  auto pe = events(f, "coder");
  CHECK(has_event(pe, {{"type", "agent.child.create"}, {"child", "rev"}, {"status", "ok"}}));
  CHECK(has_event(pe, {{"type", "agent.child.start"}, {"child", "rev"}}));
  CHECK(has_event(pe, {{"type", "agent.child.exit"}, {"child", "rev"}, {"exit_status", 0}}));
  CHECK(has_event(events(f, "rev"), {{"type", "agent.stop"}, {"status", "ok"}}));
  CHECK(ctx::test::processes_mentioning(f.t.root()).empty());
}

TEST_CASE("every denial of ctx agent create is EACCES with its reason, and writes nothing", "[root][userns]") {
  Family f("allow coder_t tool:fs.read execute\n");
  auto agents_before = ctx::test::names_in(f.t.root() + "/agent");
  struct Case {
    std::string json;
    std::string reason;
    std::string says;  ///< part of the sentence
  };
  std::vector<Case> cases{
      {request("Bad.Name"), "invalid_name", "Bad.Name"},
      {request("other"), "agent_policy", "agent:other create"},
      {request("rev", ",\"tools\":[\"shell.exec\"]"), "exceeds_parent_policy", "tool:shell.exec"},
      {"{\"name\":\"rev\",\"mount\":[[\"/etc\",\"/etc\",\"ro\"]]}", "mount_not_visible", "/etc"},
      {"{\"name\":\"rev\",\"mount\":[[\"/usr\",\"/usr\",\"rw\"]]}", "mount_widens_access", "/usr"},
      {request("rev", ",\"groups\":[4242]"), "groups_not_subset", "4242"},
  };
  for (const auto& c : cases) {
    RunResult r = f.sh("/ctx/bin/ctx agent create '" + c.json + "'");
    INFO(c.json << "\n" << r.err);
    CHECK(r.exit_code == 13);
    json j = json::parse(r.err.substr(0, r.err.find('\n')));
    CHECK(j["type"] == "error");
    CHECK(j["code"] == "EACCES");
    CHECK(j["reason"] == c.reason);
    CHECK(j["message"].get<std::string>().find(c.says) != std::string::npos);
    CHECK(r.err.find("\nctx agent create: ") != std::string::npos);  // and a sentence for people
    CHECK(ctx::test::names_in(f.t.root() + "/agent") == agents_before);
  }
  // Malformed requests are EINVAL.
  RunResult bad = f.sh("/ctx/bin/ctx agent create '{\"name\":\"rev\",\"colour\":\"red\"}'");
  CHECK(bad.exit_code == 22);
  CHECK(bad.err.find("\"reason\":\"invalid_request\"") != std::string::npos);
  CHECK(bad.err.find("unknown key 'colour'") != std::string::npos);
  // Mount options: the mount file's parser, with its rules.
  for (auto [opts, says] :
       {std::pair{"bind,rbind", "bind and rbind are mutually exclusive"},
        std::pair{"-,nosuid", "'-' must stand alone (it means no option)"},
        std::pair{"nodev,nodev", "option 'nodev' repeated"}, std::pair{"nosuid,,", "empty option (stray ',')"}}) {
    RunResult o =
        f.sh(std::string("/ctx/bin/ctx agent create '{\"name\":\"rev\",\"mount\":[[\"/usr\",\"/usr\",\"ro\",\"") +
             opts + "\"]]}'");
    INFO(opts << ": " << o.err);
    CHECK(o.exit_code == 22);
    CHECK(o.err.find(std::string("mount[0]: ") + says) != std::string::npos);
  }
  // A name that is taken: the second create is refused, the first stays.
  RunResult twice = f.sh("/ctx/bin/ctx agent create '" + request("rev") + "' && /ctx/bin/ctx agent create '" +
                         request("rev", ",\"handoff\":\"other\"") + "'");
  CHECK(twice.exit_code == EEXIST);
  CHECK(twice.err.find("\"reason\":\"exists\"") != std::string::npos);
  // Said with the path the parent sees, not the host's.
  CHECK(twice.err.find("rev: EEXIST: /ctx/agent/rev.d already exists (a child made earlier); delete it first (ctx "
                       "agent delete rev), create it with --replace, or choose another name") != std::string::npos);
  CHECK(twice.err.find(f.t.root()) == std::string::npos);
  CHECK(f.read(f.session_dir("coder") + "/context/child/rev/handoff.md").empty());
  // start and stop are policy-checked too, and only for the parent's own children.
  RunResult start = f.sh("/ctx/bin/ctx agent start other");
  CHECK(start.exit_code == 13);
  CHECK(start.err.find("\"reason\":\"agent_policy\"") != std::string::npos);
  CHECK(start.err.find("lacks 'allow coder_t agent:other start'") != std::string::npos);
  RunResult stray = f.sh("/ctx/bin/ctx agent wait rev");
  CHECK(stray.exit_code == ESRCH);
  CHECK(stray.err.find("has not started it") != std::string::npos);
}

TEST_CASE("stop ends a running child; wait returns its exit status", "[root][userns]") {
  Family f;
  RunResult r = f.sh("set -e; /ctx/bin/ctx agent create '" + request("rev") +
                     "' >/dev/null; /ctx/bin/ctx agent start rev -- /probe notify:READY=1 sleep:30 >/dev/null; "
                     "/ctx/bin/ctx agent stop rev; /ctx/bin/ctx agent wait rev");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 2);
  CHECK(json::parse(lines[0]) == json{{"ok", true}, {"op", "stop"}, {"name", "rev"}, {"exit_status", 128 + SIGTERM}});
  CHECK(json::parse(lines[1]) == json{{"ok", true}, {"op", "wait"}, {"name", "rev"}, {"exit_status", 128 + SIGTERM}});
  CHECK(has_event(events(f, "coder"), {{"type", "agent.child.stop"}, {"child", "rev"}}));
  CHECK(has_event(events(f, "rev"), {{"type", "agent.stop"}, {"status", "stopped"}, {"exit_status", 128 + SIGTERM}}));
  CHECK(f.read("ctx/agent/rev.d/status") == "dead\n");
  CHECK(f.read(f.session_dir("coder") + "/context/child/rev/status") == "stopped\n");
  CHECK(f.read(f.session_dir("rev") + "/state") == "stopped\n");
  // A child that ignores SIGTERM is stopped all the same, after the grace period.
  Family g;
  RunResult s = g.sh("set -e; /ctx/bin/ctx agent create '" + request("rev") +
                         "' >/dev/null; /ctx/bin/ctx agent start rev -- /probe ignore:TERM notify:READY=1 sleep:30 "
                         ">/dev/null; until [ \"$(cat /ctx/agent/rev.d/status)\" = ready ]; do sleep 0.02; done; "
                         "/ctx/bin/ctx agent stop rev",
                     {"--cancel-grace-ms", "200"});
  INFO(s.out << s.err);
  REQUIRE(s.exit_code == 0);
  CHECK(json::parse(json_lines(s.out).back()) ==
        json{{"ok", true}, {"op", "stop"}, {"name", "rev"}, {"exit_status", 128 + SIGKILL}});
}

TEST_CASE("the example tree's agent.create, agent.start and agent.stop are ordinary tools", "[root][userns]") {
  Family f(
      "allow coder_t tool:agent.create execute\nallow coder_t tool:agent.start execute\n"
      "allow coder_t tool:agent.stop execute\n");
  const std::string examples = std::string(std::getenv("CTX_SOURCE_ROOT")) + "/examples/ctx/tool/";
  for (const char* op : {"create", "start", "stop"}) {
    std::string tool = std::string("agent.") + op;
    f.t.write("ctx/tool/" + tool, ctx::test::read_file(examples + tool), 0755);
    for (const char* file : {"name", "description", "schema", "cap", "status"})
      f.t.write("ctx/tool/" + tool + ".d/" + file, ctx::test::read_file(examples + tool + ".d/" + file));
  }
  RunResult r = f.sh("set -e; /ctx/bin/ctx tool agent.create '" + request("rev") +
                     "'; /ctx/bin/ctx tool agent.start '{\"name\":\"rev\",\"command\":[\"/probe\",\"notify:READY=1\","
                     "\"sleep:30\"]}'; echo '{\"name\":\"rev\"}' | /ctx/bin/ctx tool agent.stop");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto lines = json_lines(r.out);
  REQUIRE(lines.size() == 3);
  CHECK(json::parse(lines[0])["op"] == "create");
  CHECK(json::parse(lines[1])["op"] == "start");
  CHECK(json::parse(lines[2]) == json{{"ok", true}, {"op", "stop"}, {"name", "rev"}, {"exit_status", 128 + SIGTERM}});
  auto ev = events(f, "coder");
  for (const char* op : {"create", "start", "stop"})
    CHECK(has_event(ev, {{"type", "tool.call"}, {"object", std::string("tool/agent.") + op}, {"status", "ok"}}));
  // Without the agent grant the tool runs, and the supervisor refuses.
  RunResult denied = f.sh("/ctx/bin/ctx tool agent.create '" + request("other") + "'");
  CHECK(denied.exit_code == 13);
  CHECK(denied.err.find("\"reason\":\"agent_policy\"") != std::string::npos);
}

TEST_CASE("the parent's exit cancels a child that ignores SIGTERM, after the grace period", "[root][userns]") {
  Family f;
  std::string token = "sleep:41." + std::to_string(::getpid());
  auto t0 = std::chrono::steady_clock::now();
  RunResult r =
      f.sh("set -e; /ctx/bin/ctx agent create '" + request("rev") +
               "' >/dev/null; /ctx/bin/ctx agent start rev -- /probe ignore:TERM notify:READY=1 " + token +
               " >/dev/null; until [ \"$(cat /ctx/agent/rev.d/status)\" = ready ]; do sleep 0.02; done; exit 3",
           {"--cancel-grace-ms", "300"});
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  INFO(r.out << r.err);
  CHECK(r.exit_code == 3);
  CHECK(ms >= 300);              // SIGTERM was ignored: the grace period ran out
  CHECK(wait_gone(token, 100));  // gone when the parent's supervisor is
  CHECK(ctx::test::processes_mentioning(f.t.root()).empty());
  // The cancellation sequence, as recorded.
  CHECK(has_event(events(f, "coder"),
                  {{"type", "agent.child.cancel"}, {"parent", "coder"}, {"child", "rev"}, {"reason", "parent_dead"}}));
  auto ce = events(f, "rev");
  CHECK(has_event(ce,
                  {{"type", "agent.stop"}, {"agent", "rev"}, {"status", "cancelled"}, {"exit_status", 128 + SIGKILL}}));
  CHECK(has_event(ce, {{"type", "agent.start"}, {"agent", "rev"}}));  // history stays readable
  CHECK(f.read(f.session_dir("rev") + "/state") == "cancelled\n");
  CHECK(f.read(f.session_dir("coder") + "/context/child/rev/status") == "cancelled\n");
  CHECK(f.read("ctx/agent/rev.d/status") == "dead\n");
  CHECK(f.read("ctx/agent/rev.d/log").find("\"type\":\"agent.cancel\"") != std::string::npos);
}

// A child runtime that forks a grandchild which traps SIGTERM: the
// grandchild says it is armed in refs.jsonl and, on SIGTERM, writes
// result.md and exits; the runtime, on SIGTERM, waits for it and exits 7.
// Only a SIGTERM that reaches every process of the child's sandbox (seed
// 003, step 4) writes the marker: one to the runtime alone leaves the
// grandchild looping until the grace period's SIGKILL.
const char* const kTermScript =
    "sh -c 'trap \"echo term > /handoff/result.md; exit 0\" TERM; echo armed > /handoff/refs.jsonl; "
    "while :; do sleep 0.05; done' &\n"
    "trap 'wait $!; exit 7' TERM\n"
    "wait $!\n";

TEST_CASE("cancelling a child sends SIGTERM to its whole sandbox, not only to its runtime", "[root][userns]") {
  for (const char* how : {"stop", "parent_dead"}) {
    DYNAMIC_SECTION(how) {
      Family f;
      f.t.write("ctx/bin/term.sh", kTermScript, 0755);
      std::string ctxdir = "/ctx/home/" + f.uid + "/agent/coder/session/default/context/child/rev";
      std::string end = std::string(how) == "stop" ? "/ctx/bin/ctx agent stop rev" : "exit 3";
      RunResult r = f.sh("set -e; /ctx/bin/ctx agent create '" + request("rev") +
                             "' >/dev/null; /ctx/bin/ctx agent start rev -- /bin/sh /ctx/bin/term.sh >/dev/null; "
                             "until [ -s " +
                             ctxdir + "/refs.jsonl ]; do sleep 0.02; done; " + end,
                         {"--cancel-grace-ms", "5000"});
      INFO("exit " << r.exit_code << " out " << r.out << " err " << r.err
                   << (f.exists("ctx/agent/rev.d/log") ? f.read("ctx/agent/rev.d/log") : ""));
      REQUIRE(f.exists("ctx/agent/rev.d/log"));
      std::string host_ctxdir = f.session_dir("coder") + "/context/child/rev/";
      CHECK(f.read(host_ctxdir + "refs.jsonl") == "armed\n");
      CHECK(f.read(host_ctxdir + "result.md") == "term\n");  // the grandchild got SIGTERM
      if (std::string(how) == "stop") {
        REQUIRE(r.exit_code == 0);
        CHECK(json::parse(json_lines(r.out).back()) ==
              json{{"ok", true}, {"op", "stop"}, {"name", "rev"}, {"exit_status", 7}});
      } else {
        CHECK(r.exit_code == 3);
        CHECK(f.read(f.session_dir("coder") + "/context/child/rev/status") == "cancelled\n");
        CHECK(has_event(events(f, "rev"), {{"type", "agent.stop"}, {"status", "cancelled"}, {"exit_status", 7}}));
      }
      CHECK(wait_gone(f.t.root()));
    }
  }
}

// Seed 000 "Attenuation": a child's label never makes it more than its
// parent. Tool x's own policy admits the child's type rev_t but not the
// parent's coder_t; tool y's admits both. The parent holds both grants
// and passes them on: the child runs y, and x is refused by the tool
// policy layer, naming the ancestor's type.
TEST_CASE("a tool whose own policy admits the child's label but not its parent's does not run for the child",
          "[root][userns]") {
  Family f("allow coder_t tool:x execute\nallow coder_t tool:y execute\n");
  f.t.write("ctx/tool/x", "#!/bin/sh\necho ran-x\n", 0755);
  f.t.write("ctx/tool/x.d/policy", "allow rev_t tool:x execute\n");
  f.t.write("ctx/tool/y", "#!/bin/sh\necho ran-y\n", 0755);
  f.t.write("ctx/tool/y.d/policy", "allow rev_t tool:y execute\nallow coder_t tool:y execute\n");
  f.t.write("ctx/bin/calls.sh",
            "/ctx/bin/ctx tool x; echo \"x=$?\"; /ctx/bin/ctx tool y; echo \"y=$?\"; ls /ctx/tool\n", 0755);
  RunResult r = f.sh("set -e; /ctx/bin/ctx agent create '" + request("rev", ",\"tools\":[\"x\",\"y\"]") +
                     "' >/dev/null; /ctx/bin/ctx agent start rev -- /bin/sh /ctx/bin/calls.sh >/dev/null; "
                     "/ctx/bin/ctx agent wait rev");
  std::string out = f.exists(f.session_dir("rev") + "/output.log") ? f.read(f.session_dir("rev") + "/output.log") : "";
  INFO(r.out << r.err << out);
  REQUIRE(r.exit_code == 0);
  CHECK(out.find("ran-x") == std::string::npos);
  CHECK(out.find("x=13\n") != std::string::npos);
  CHECK(out.find("\"reason\":\"tool_policy\"") != std::string::npos);
  CHECK(out.find("'allow coder_t tool:x execute' for rev's ancestor type coder_t") != std::string::npos);
  CHECK(out.find("ran-y\ny=0\n") != std::string::npos);
  // The view shows y and not x to the child.
  CHECK(out.find("\ny\n") != std::string::npos);
  CHECK(out.find("\nx\n") == std::string::npos);
  CHECK(has_event(events(f, "rev"), {{"type", "tool.call"}, {"object", "tool/x"}, {"status", "denied"}}));
  // ctx explain on the host answers the same for the child.
  RunResult ex = ctx::test::run_command(
      {ctx::test::built("ctx/ctx"), "explain", "--ctx-root", f.t.root(), "rev", "tool:x", "execute"});
  INFO(ex.out << ex.err);
  CHECK(ex.exit_code == 1);
  CHECK(ex.out.find("rev tool:x execute: denied") != std::string::npos);
  CHECK(ex.out.find("for rev's ancestor type coder_t") != std::string::npos);
  RunResult ey = ctx::test::run_command(
      {ctx::test::built("ctx/ctx"), "explain", "--ctx-root", f.t.root(), "rev", "tool:y", "execute"});
  INFO(ey.out << ey.err);
  CHECK(ey.exit_code == 0);
}

// Three levels: coder starts rev, whose runtime starts sub; all stay up
// until the test kills coder's runtime or coder's supervisor.
TEST_CASE("SIGKILL of the parent's runtime or supervisor leaves no descendant and no cgroup", "[root][userns]") {
  for (const char* victim : {"runtime", "supervisor"}) {
    DYNAMIC_SECTION(victim) {
      Family f;
      std::string token = "sleep:42." + std::to_string(::getpid()) + victim;
      f.t.write("ctx/bin/rev-run",
                "#!/usr/bin/sh\nset -e\n/ctx/bin/ctx agent create '" + request("sub") +
                    "' >/dev/null\n/ctx/bin/ctx agent start sub -- /probe ignore:TERM notify:READY=1 " + token +
                    " >/dev/null\nexec /probe notify:READY=1 " + token + "\n",
                0755);
      auto sp = f.spawn_sh("set -e; /ctx/bin/ctx agent create '" +
                               request("rev", ",\"agents\":{\"sub\":[\"create\",\"start\"]}") +
                               "' >/dev/null; /ctx/bin/ctx agent start rev -- /ctx/bin/rev-run >/dev/null; exec /probe "
                               "notify:READY=1 " +
                               token,
                           {"--cancel-grace-ms", "200", "--json-status-fd", "1"});
      for (const char* a : {"coder", "rev", "sub"})
        REQUIRE(ctx::test::wait_for_file(f.t.root() + "/agent/" + a + ".d/status", "ready\n", 20000));
      // Each of coder, rev and sub: a supervisor, its watchdog, the
      // sandbox's init and its agent view's server, forked from its
      // supervisor (their command lines name the CTX root).
      CHECK(ctx::test::processes_mentioning(f.t.root()).size() == 3 * 4);
      CHECK_FALSE(ctx::test::processes_mentioning(token).empty());
      if (std::string(victim) == "runtime") {
        // The sandbox's init is the runtime's host-side face: its death
        // ends the runtime and the pid namespace.
        char buf[4096];
        ssize_t n = ::read(sp.out_fd, buf, sizeof buf);
        REQUIRE(n > 0);
        std::string got(buf, static_cast<std::size_t>(n));
        json started = json::parse(got.substr(0, got.find('\n')));
        REQUIRE(::kill(started["pid"].get<int>(), SIGKILL) == 0);
      } else {
        REQUIRE(::kill(sp.pid, SIGKILL) == 0);
      }
      RunResult r = ctx::test::wait_command(sp, 30);
      CHECK(r.exit_code == 128 + SIGKILL);
      CHECK(wait_gone(token));
      CHECK(wait_gone(f.t.root()));
      if (std::string(victim) == "supervisor")  // coder's watchdog said why
        CHECK(f.read("ctx/agent/coder.d/log").find("\"reason\":\"supervisor_killed\"") != std::string::npos);
      for (const char* a : {"coder", "rev", "sub"}) {
        INFO(a);
        CHECK(f.read(std::string("ctx/agent/") + a + ".d/status") == "dead\n");
        CHECK_FALSE(f.exists(std::string("ctx/agent/") + a + ".sock"));
      }
      CHECK(
          has_event(events(f, "coder"), {{"type", "agent.child.cancel"}, {"child", "rev"}, {"reason", "parent_dead"}}));
      CHECK(has_event(events(f, "rev"), {{"type", "agent.child.cancel"}, {"child", "sub"}, {"reason", "parent_dead"}}));
      CHECK(has_event(events(f, "rev"), {{"type", "agent.stop"}, {"status", "cancelled"}}));
      CHECK(has_event(events(f, "sub"), {{"type", "agent.stop"}, {"status", "cancelled"}}));
      if (f.m.privileged) CHECK_FALSE(std::filesystem::exists(agent_cgroup(f.t, "coder").value()));
    }
  }
}

TEST_CASE("a child's cgroup lies below its parent's: <agent>/child/<name>/runtime", "[cgroup]") {
  auto owner = ctx::test::test_user();
  REQUIRE(owner);
  Family f("", {true, TestUser{0, 0, "root"}, *owner});
  std::string token = "sleep:43." + std::to_string(::getpid());
  auto sp = f.spawn_sh("set -e; /ctx/bin/ctx agent create '" + request("rev") +
                       "' >/dev/null; /ctx/bin/ctx agent start rev -- /probe notify:READY=1 " + token +
                       " >/dev/null; exec /probe notify:READY=1 " + token);
  REQUIRE(ctx::test::wait_for_file(f.t.root() + "/agent/rev.d/status", "ready\n", 20000));
  REQUIRE(ctx::test::wait_for_file(f.t.root() + "/agent/coder.d/status", "ready\n", 20000));
  std::string cg = agent_cgroup(f.t, "coder").value();
  CHECK(ctx::test::read_file(cg + "/cgroup.procs").empty());
  CHECK(ctx::test::read_file(cg + "/child/cgroup.procs").empty());
  CHECK(ctx::test::read_file(cg + "/child/rev/cgroup.procs").empty());  // no internal process
  CHECK_FALSE(ctx::test::read_file(cg + "/child/rev/runtime/cgroup.procs").empty());
  CHECK_FALSE(ctx::test::read_file(cg + "/runtime/cgroup.procs").empty());
  REQUIRE(::kill(sp.pid, SIGTERM) == 0);
  RunResult r = ctx::test::wait_command(sp, 30);
  CHECK(r.exit_code == 128 + SIGTERM);
  CHECK(wait_gone(token));
  CHECK_FALSE(std::filesystem::exists(cg));
}

TEST_CASE("a child never sees a submount that its parent's non-recursive bind hides", "[root]") {
  Family f;
  f.t.mkdir("src/sub");
  std::string src = f.t.dir().path() + "/src";
  f.t.agent("coder", {{"mount", f.t.base_mounts() + f.t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + f.t.root() +
                                    "/home/" + f.uid + "/agent/coder\t/ctx/home/" + f.uid +
                                    "/agent/coder\trw\tbind,nosuid,nodev\n" + src + "\t/data\tro\tbind\n"},
                      {"policy",
                       "allow coder_t agent:rev create\nallow coder_t agent:rev start\n"
                       "allow coder_t agent:sub create\nallow coder_t agent:sub start\n"},
                      {"iso", "shared\n"}});
  const std::string base = R"([["/usr","/usr","ro"],["/probe","/probe","ro"],)";
  f.t.write("ctx/bin/parent-run",
            "#!/bin/sh\n"
            "/ctx/bin/ctx agent create '{\"name\":\"rev\",\"mount\":" +
                base + R"(["/data","/data","ro"]]}')" +
                " >/dev/null\n"
                "/ctx/bin/ctx agent start rev -- /probe exists:/data/sub exists:/data/sub/marker >/dev/null\n"
                "/ctx/bin/ctx agent wait rev >/dev/null\n"
                "/ctx/bin/ctx agent create '{\"name\":\"sub\",\"mount\":" +
                base + R"(["/data/sub","/x","ro"]]}')" +
                " >/dev/null\n"
                "/ctx/bin/ctx agent start sub -- /probe exists:/x/marker >/dev/null 2>&1\n"
                "echo start=$?\n",
            0755);
  // The submount is made in a private mount namespace of a helper that
  // then runs the launcher: the host's mounts stay untouched.
  std::string script = "set -e; mount --make-rprivate /; mount -t tmpfs -o size=64k tmpfs " + src + "/sub; touch " +
                       src + "/sub/marker; exec " + ctx::test::built("launcher/ctx-agent-run") + " --ctx-root " +
                       f.t.root() + " coder -- /ctx/bin/parent-run";
  RunResult r =
      ctx::test::run_command({"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  auto lines = json_lines(f.read(f.session_dir("rev") + "/output.log"));
  REQUIRE(lines.size() == 1);
  CHECK(json::parse(lines[0]) == json{{"exists:/data/sub", "yes"}, {"exists:/data/sub/marker", "ENOENT"}});
  CHECK(r.out.find("start=5") != std::string::npos);  // EIO: its launch failed
  CHECK(f.read("ctx/agent/sub.d/log")
            .find("lies on another mount than " + src + ", which the parent binds without its submounts") !=
        std::string::npos);
}

TEST_CASE("a child's mounts, handoff and root never follow a symlink its parent planted", "[root][userns]") {
  Family f;
  f.t.mkdir("secret", 0700);
  f.t.write("secret/file", "TOPSECRET\n", 0600);
  std::string secret = f.t.dir().path() + "/secret";
  std::string home = "/ctx/home/" + f.uid + "/agent/coder";
  std::string ctxdir = home + "/session/default/context/child/sub";
  f.t.write(
      "ctx/bin/parent-run",
      "#!/bin/sh\n"
      "ln -s " +
          secret + " " + home +
          "/esc\n"
          "/ctx/bin/ctx agent create '{\"name\":\"rev\",\"mount\":[[\"/usr\",\"/usr\",\"ro\"],[\"/probe\",\"/probe\",\"ro\"],"
          "[\"" +
          home +
          "/esc\",\"/esc\",\"ro\"]]}' >/dev/null && echo created=rev\n"
          "/ctx/bin/ctx agent start rev -- /probe read:/esc/file >/dev/null 2>&1; echo rev=$?\n"
          "/ctx/bin/ctx agent create '" +
          request("sub") +
          "' >/dev/null && echo created=sub\n"
          "rm -r " +
          ctxdir + "/artifact && ln -s " + secret + " " + ctxdir +
          "/artifact\n"
          "/ctx/bin/ctx agent start sub -- /probe read:/handoff/artifact/file >/dev/null 2>&1; echo sub=$?\n",
      0755);
  RunResult r = f.t.launch({"coder", "--", "/ctx/bin/parent-run"}, f.m.as);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "created=rev\nrev=5\ncreated=sub\nsub=5\n");  // both launches fail: EIO
  CHECK(r.out.find("TOPSECRET") == std::string::npos);
  // rev's source lies in its parent's home, which rev's agent view does
  // not have (and the view never follows a symlink).
  CHECK(f.read("ctx/agent/rev.d/log")
            .find("the agent view at /esc: EACCES: rev's agent view has no home/" + f.uid + "/agent/coder/esc") !=
        std::string::npos);
  CHECK(f.read("ctx/agent/sub.d/log").find("/artifact: EACCES: reaches through a symbolic link below " + f.t.root()) !=
        std::string::npos);
}

TEST_CASE("start re-checks the child: another owner's agent or a widened child is refused", "[root][userns]") {
  Family f("allow coder_t agent:stray start\n");
  // An agent of another owner that names coder as its parent.
  f.t.agent("stray", {{"owner", "65534\n"}, {"gid", "65534\n"}, {"parent", "agent:coder\n"}, {"iso", "uid\n"}});
  if (f.m.privileged)  // root's files pass a privileged launch's trust check: the parent check must refuse
    for (const auto& n : ctx::test::names_in(f.t.root() + "/agent/stray.d"))
      REQUIRE(::chown((f.t.root() + "/agent/stray.d/" + n).c_str(), 0, 0) == 0);
  if (f.m.privileged) REQUIRE(::chown((f.t.root() + "/agent/stray.d").c_str(), 0, 0) == 0);
  RunResult stray = f.sh("/ctx/bin/ctx agent start stray");
  INFO(stray.err);
  CHECK(stray.exit_code == 13);
  CHECK(stray.err.find("\"reason\":\"not_owned\"") != std::string::npos);
  CHECK(stray.err.find("stray.d/owner: EACCES: is 65534 but the parent coder's is " + f.uid) != std::string::npos);
  // A child whose policy grew after create.
  RunResult made = f.sh("/ctx/bin/ctx agent create '" + request("rev") + "'");
  REQUIRE(made.exit_code == 0);
  f.t.set_policy("rev", "allow rev_t network:default connect\n");
  RunResult wide = f.sh("/ctx/bin/ctx agent start rev -- /probe ids");
  INFO(wide.err);
  CHECK(wide.exit_code == 13);
  CHECK(wide.err.find("\"reason\":\"exceeds_parent_policy\"") != std::string::npos);
  CHECK_FALSE(f.exists(f.session_dir("rev") + "/output.log"));  // nothing was started
}

// Seed 003 rule 5: an owned child (a `parent` file naming an agent; life
// owned) runs only under its parent's supervisor, which cancels it with
// the parent. Launched directly, or with a forged --owned-by, it is
// refused before anything is made.
TEST_CASE("an owned child cannot be launched outside its parent's supervisor", "[root][userns]") {
  Family f;
  RunResult made = f.sh("/ctx/bin/ctx agent create '" + request("rev") + "'");
  REQUIRE(made.exit_code == 0);
  const std::string want = f.t.root() +
                           "/agent/rev.d/parent:1: EPERM: rev is owned by agent coder (life owned): "
                           "start it from coder (ctx agent start rev), so that it is cancelled with its parent; ";
  RunResult direct = f.t.launch({"rev", "--", "/probe", "ids"}, f.m.as);
  INFO(direct.out << direct.err);
  CHECK(direct.exit_code == 125);
  CHECK(direct.err.rfind("ctx-agent-run: " + want + "it was launched directly", 0) == 0);
  RunResult forged = f.t.launch({"--owned-by", "1", "rev", "--", "/probe", "ids"}, f.m.as);
  INFO(forged.err);
  CHECK(forged.exit_code == 125);
  CHECK(forged.err.find(want + "--owned-by 1 is not the process that started it") != std::string::npos);
  CHECK_FALSE(f.exists(f.session_dir("rev") + "/output.log"));  // nothing ran
  CHECK_FALSE(f.exists("ctx/agent/rev.d/status"));
  // Its parent starts it.
  RunResult ok = f.sh("set -e; /ctx/bin/ctx agent start rev -- /probe ids >/dev/null; /ctx/bin/ctx agent wait rev");
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(json::parse(json_lines(ok.out).back())["exit_status"] == 0);
}

// Seed 003 "Handoff Protocol": the create request's input references and
// output contract land beside handoff.md (input.jsonl, output.md), read-only
// for the child; bad ones are refused with a reason and write nothing.
TEST_CASE("a create request's inputs and output contract reach the child's handoff, strictly checked",
          "[root][userns]") {
  Family f;
  RunResult r = f.sh("set -e; /ctx/bin/ctx agent create '" +
                     request("rev", ",\"inputs\":[\"/usr/bin\",\"/ctx/bin/ctx\"],\"output\":\"A patch.\\n\"") +
                     "' >/dev/null; /ctx/bin/ctx agent start rev -- /probe read:/handoff/input.jsonl "
                     "read:/handoff/output.md write:/handoff/output.md write:/handoff/input.jsonl >/dev/null; "
                     "/ctx/bin/ctx agent wait rev");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::string ctxdir = f.session_dir("coder") + "/context/child/rev/";
  CHECK(f.read(ctxdir + "input.jsonl") ==
        "{\"parent_path\":\"/usr/bin\",\"path\":\"/usr/bin\"}\n"
        "{\"parent_path\":\"/ctx/bin/ctx\",\"path\":\"/ctx/bin/ctx\"}\n");
  CHECK(f.read(ctxdir + "output.md") == "A patch.\n");
  auto out = json_lines(f.read(f.session_dir("rev") + "/output.log"));
  REQUIRE(out.size() == 1);
  json seen = json::parse(out[0]);
  CHECK(seen["read:/handoff/input.jsonl"] == "ok");
  CHECK(seen["read:/handoff/output.md"] == "ok");
  CHECK(seen["write:/handoff/output.md"] == "EROFS");
  CHECK(seen["write:/handoff/input.jsonl"] == "EROFS");

  const std::pair<std::string, std::string> bad[] = {
      {",\"inputs\":[\"usr/bin\"]", "\"reason\":\"invalid_request\""},
      {",\"inputs\":[\"/usr/../etc\"]", "\"reason\":\"invalid_request\""},
      {",\"inputs\":[\"/usr/bin/\"]", "\"reason\":\"invalid_request\""},
      {",\"inputs\":[\"/usr\\u0000x\"]", "\"reason\":\"invalid_request\""},
      {",\"inputs\":\"/usr\"", "\"reason\":\"invalid_request\""},
      {",\"inputs\":[\"/etc/passwd\"]", "\"reason\":\"input_not_visible\""},
      {",\"output\":7", "\"reason\":\"invalid_request\""},
      {",\"output\":\"a\\u0000b\"", "\"reason\":\"invalid_request\""},
  };
  for (const auto& [more, reason] : bad) {
    RunResult b = f.sh("/ctx/bin/ctx agent create '" + request("sub", more) + "'");
    INFO(more << "\n" << b.err);
    CHECK(b.exit_code != 0);
    CHECK(b.err.find(reason) != std::string::npos);
    CHECK_FALSE(f.exists("ctx/agent/sub.d"));
  }
  std::string big(ctx::agentdir::kMaxHandoffText + 1, 'x');
  RunResult b = f.sh("/ctx/bin/ctx agent create '" + request("sub", ",\"output\":\"" + big + "\"") + "'");
  CHECK(b.exit_code == 22);
  CHECK(b.err.find("output is longer than 65536 bytes") != std::string::npos);
  CHECK_FALSE(f.exists("ctx/agent/sub.d"));
}

TEST_CASE("a child whose parent cannot be read is not launched", "[root][userns]") {
  Family f;
  f.t.agent("orphan", {{"parent", "agent:gone session:default\n"}});
  RunResult r = f.t.launch({"orphan", "--", "/probe", "ids"}, f.m.as);
  CHECK(r.exit_code == 125);
  CHECK(r.err.rfind("ctx-agent-run: orphan: its parent gone cannot be read (", 0) == 0);
  CHECK(r.err.find("remove orphan.d/parent to run it as an agent of its own\n") != std::string::npos);
}

TEST_CASE("a create answer names the child's context directory as the parent sees it", "[root][userns]") {
  Family f;
  RunResult r = f.sh("set -e; c=$(/ctx/bin/ctx agent create '" + request("rev") +
                     "'); echo \"$c\"; d=$(printf '%s' \"$c\" | sed 's/.*\"context\":\"\\([^\"]*\\)\".*/\\1/'); "
                     "cat \"$d/status\"");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto lines = json_lines(r.out);
  REQUIRE(!lines.empty());
  CHECK(json::parse(lines[0])["context"] == "/ctx/home/" + f.uid + "/agent/coder/session/default/context/child/rev");
  CHECK(r.out.find("\ncreated\n") != std::string::npos);  // read through that path from inside
}

TEST_CASE("a SIGKILLed parent is marked dead only after its cancelled children have ended", "[root][userns]") {
  // Without cgroups ([userns] here) the watchdog waits for the children's
  // supervisors through their pidfds; it used to mark the parent dead at
  // once while a child that ignores SIGTERM was still in its grace period.
  Family f;
  std::string token = "sleep:43." + std::to_string(::getpid());
  auto sp = f.spawn_sh("set -e; /ctx/bin/ctx agent create '" + request("rev") +
                           "' >/dev/null; /ctx/bin/ctx agent start rev -- /probe ignore:TERM notify:READY=1 " + token +
                           " >/dev/null; exec /probe notify:READY=1 " + token,
                       {"--cancel-grace-ms", "1500"});
  for (const char* a : {"coder", "rev"})
    REQUIRE(ctx::test::wait_for_file(f.t.root() + "/agent/" + a + ".d/status", "ready\n", 20000));
  REQUIRE(::kill(sp.pid, SIGKILL) == 0);
  REQUIRE(ctx::test::wait_for_file(f.t.root() + "/agent/coder.d/status", "dead\n", 20000));
  // The moment the parent is dead, its child is too.
  CHECK(f.read("ctx/agent/rev.d/status") == "dead\n");
  CHECK(has_event(events(f, "rev"), {{"type", "agent.stop"}, {"status", "cancelled"}}));
  RunResult r = ctx::test::wait_command(sp, 30);
  CHECK(r.exit_code == 128 + SIGKILL);
  CHECK(wait_gone(f.t.root()));
}

// A parent run again meets the child its first run made: create says
// EEXIST with the way out; delete removes a stopped child (entry, .d,
// home, coordination directory) and records it; create --replace does
// both in one request. A running child, another agent and a name the
// policy does not let the parent create are never deleted.
TEST_CASE("a parent run twice: its child is deleted, or replaced, and made again", "[root][userns]") {
  Family f;
  const std::string home = "ctx/home/" + f.uid + "/agent/rev";
  const std::string context = f.session_dir("coder") + "/context/child/rev";
  const std::string first = "/ctx/bin/ctx agent create '" + request("rev", ",\"handoff\":\"first\\n\"") +
                            "' >/dev/null && /ctx/bin/ctx agent start rev -- /probe ids >/dev/null && "
                            "/ctx/bin/ctx agent wait rev >/dev/null";
  RunResult r1 = f.sh(first);
  INFO(r1.out << r1.err);
  REQUIRE(r1.exit_code == 0);
  REQUIRE(f.exists(home + "/session/default/output.log"));
  // The same run again: EEXIST, and the way out.
  RunResult r2 = f.sh(first);
  CHECK(r2.exit_code == EEXIST);
  CHECK(r2.err.find("rev: EEXIST: /ctx/agent/rev.d already exists (a child made earlier); delete it first (ctx agent "
                    "delete rev), create it with --replace, or choose another name") != std::string::npos);
  // delete: everything of the child goes, and the parent's events say so.
  RunResult del = f.sh("/ctx/bin/ctx agent delete rev");
  INFO(del.out << del.err);
  CHECK(del.exit_code == 0);
  CHECK(json::parse(del.out) == json{{"ok", true}, {"op", "delete"}, {"name", "rev"}});
  for (const std::string& gone : std::vector<std::string>{"ctx/agent/rev", "ctx/agent/rev.d", home, context}) {
    INFO(gone);
    CHECK_FALSE(f.exists(gone));
  }
  CHECK(has_event(events(f, "coder"), {{"type", "agent.child.delete"}, {"object", "agent/rev"}, {"status", "ok"}}));
  CHECK(f.sh(first).exit_code == 0);  // and the first run's script works again
  // --replace: the earlier child is deleted and the new one made, in one request.
  RunResult rep = f.sh("/ctx/bin/ctx agent create --replace '" + request("rev", ",\"handoff\":\"second\\n\"") + "'");
  INFO(rep.out << rep.err);
  CHECK(rep.exit_code == 0);
  CHECK(f.read(context + "/handoff.md") == "second\n");
  CHECK_FALSE(f.exists(home + "/session"));  // the first child's history went with it
  // A running child is not deleted, nor replaced.
  RunResult busy = f.sh(
      "/ctx/bin/ctx agent start rev -- /probe sleep:20 >/dev/null; /ctx/bin/ctx agent delete rev; echo \"rc=$?\"; "
      "/ctx/bin/ctx agent create --replace '" +
      request("rev") + "'; echo \"rc=$?\"; /ctx/bin/ctx agent stop rev >/dev/null");
  INFO(busy.out << busy.err);
  CHECK(busy.out.find("rc=16\n") != std::string::npos);
  CHECK(busy.out.rfind("rc=16\n") != busy.out.find("rc=16\n"));  // twice
  CHECK(busy.err.find("rev: EBUSY: it runs; stop it first (ctx agent stop rev)") != std::string::npos);
  CHECK(f.exists("ctx/agent/rev.d/label"));
  // Only with the right that makes it, and only the parent's own child.
  f.t.agent("sub");
  RunResult other = f.sh("/ctx/bin/ctx agent delete other; echo \"rc=$?\"; /ctx/bin/ctx agent delete sub");
  INFO(other.out << other.err);
  CHECK(other.out.find("rc=13\n") != std::string::npos);
  CHECK(other.err.find("lacks 'allow coder_t agent:other create'") != std::string::npos);
  CHECK(other.exit_code == 13);
  CHECK(other.err.find("\"reason\":\"not_owned\"") != std::string::npos);
  CHECK(f.exists("ctx/agent/sub.d/label"));
}
