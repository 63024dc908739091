// `ctx tool` inside real sandboxes, as root and as the unprivileged user:
// CTX_PATH lookup and each of the four permission layers.
#include <catch2/catch.hpp>
#include <filesystem>

#include <algorithm>

#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "launcher/control/rate_limit.hpp"
#include "test/support/facility.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::first_json_line;
using ctx::test::RunResult;
using ctx::test::TestUser;
using nlohmann::json;

namespace {

struct ToolTree {
  TestUser as;
  CtxTree t;
  std::string home;  // inside the sandbox

  explicit ToolTree(const TestUser& owner, const TestUser& launcher) : as(launcher), t(owner) {
    std::string uid = std::to_string(owner.uid);
    home = "/ctx/home/" + uid;
    t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
    tool("ctx/tool/echo.args", "#!/bin/sh\nprintf 'args:%s\\n' \"$*\"\ncat\n");
    t.mkdir("ctx/home/" + uid + "/tool");
    t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.root() + "/home/" +
                                    uid + "/agent/coder\t/ctx/home/" + uid + "/agent/coder\trw\tbind,nosuid,nodev\n"},
                      {"policy",
                       "allow coder_t tool:echo.args execute\nallow coder_t tool:fenced execute\n"
                       "allow coder_t tool:rooted execute\nallow coder_t tool:twice execute\n"}});
  }
  void tool(const std::string& rel, const std::string& script, unsigned mode = 0755) { t.write(rel, script, mode); }

  // Runs a shell command line inside coder's sandbox.
  RunResult sh(const std::string& cmd) { return t.launch({"coder", "--", "/bin/sh", "-c", cmd}, as); }

  std::string events() {
    return t.dir().read("ctx/home/" + std::to_string(t.owner().uid) + "/agent/coder/session/default/events.jsonl");
  }
};

ToolTree make_tree() {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  TestUser as = ctx::test::current_facility() == "root" ? TestUser{0, 0, "root"} : *u;
  return ToolTree(*u, as);
}

// Sets an access ACL on a directory that gives `uid` no access and keeps
// the mode 0755 for everyone else (the xattr's format: a little-endian
// version 2 header, then sorted {tag, perm, id} entries). False when the
// file system has no ACLs.
bool deny_user(const std::string& dir, uid_t uid) {
  const std::uint32_t undefined = 0xffffffffu;
  const std::uint32_t entries[][3] = {
      {0x01, 7, undefined}, {0x02, 0, uid}, {0x04, 5, undefined}, {0x10, 5, undefined}, {0x20, 5, undefined}};
  std::string acl;
  auto put = [&](std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) acl += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  put(2, 4);
  for (const auto& e : entries) {
    put(e[0], 2);
    put(e[1], 2);
    put(e[2], 4);
  }
  return ::setxattr(dir.c_str(), "system.posix_acl_access", acl.data(), acl.size(), 0) == 0;
}

}  // namespace

// bin/ctx as `ctx init` lays it out (ctx/call_main.cpp): the small static
// program makes the tool call itself and runs the full helper beside it,
// bin/ctx-helper, for every other command line.
TEST_CASE("bin/ctx as ctx init installs it: tool calls by the small program, the rest by the full helper",
          "[root][userns]") {
  ToolTree tt = make_tree();
  tt.t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx-call")), 0755);
  tt.t.write("ctx/bin/ctx-helper", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
  RunResult r = tt.sh(
      "printf 'in put' | /ctx/bin/ctx tool echo.args '{\"k\":1}'; echo rc=$?; "
      "/ctx/bin/ctx --version; /ctx/bin/ctx tool; echo rc=$?; /ctx/bin/ctx tool nosuch; echo rc=$?");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("args:{\"k\":1}\nin putrc=0\n") == 0);
  CHECK(r.out.find("\nctx 0.1.0") != std::string::npos);  // the full helper's
  // The full helper's parser and its messages; a refusal of the small one.
  CHECK(r.err.find("NAME is required") != std::string::npos);
  CHECK(r.out.find("rc=2\n") != std::string::npos);
  CHECK(r.out.find("rc=13\n") != std::string::npos);  // the policy allows no tool of that name
  CHECK(r.err.find("\"code\":\"EACCES\"") != std::string::npos);
  // Without the full helper: the small one says what is missing.
  ::unlink((tt.t.root() + "/bin/ctx-helper").c_str());
  RunResult m = tt.sh("/ctx/bin/ctx --version; echo rc=$?");
  INFO(m.out << m.err);
  CHECK(m.out.find("rc=127") != std::string::npos);
  CHECK(m.err.find("/ctx/bin/ctx-helper") != std::string::npos);
}

TEST_CASE("ctx tool runs an allowed tool with stdin and stdout untouched", "[root][userns]") {
  ToolTree tt = make_tree();
  RunResult r = tt.sh("printf 'in put' | /ctx/bin/ctx tool echo.args '{\"k\":1}'");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "args:{\"k\":1}\nin put");
  json ev;
  std::istringstream lines(tt.events());
  for (std::string line; std::getline(lines, line);)
    if (json::parse(line)["type"] == "tool.call") ev = json::parse(line);
  CHECK(ev["type"] == "tool.call");
  CHECK(ev["object"] == "tool/echo.args");
  CHECK(ev["status"] == "ok");
  CHECK(ev["agent"] == "coder");
  CHECK(ev["session"] == "default");
  CHECK(ev.contains("ts"));
  CHECK(tt.events().find("in put") == std::string::npos);  // no payloads
}

TEST_CASE("ctx tool decides from the launch, not from the runtime's environment; the tool it hands over is read-only",
          "[root][userns]") {
  ToolTree tt = make_tree();
  tt.tool("ctx/tool/shell.exec", "#!/bin/sh\necho shell-ran\n");  // coder's policy has no allow for it
  // The agent's own home (rw) gets a forged CTX tree: a policy that allows
  // everything, and a tier with a tool of its own. Pointing CTX_ROOT,
  // CTX_PATH and CTX_AGENT at it changes nothing.
  std::string forged = tt.home + "/agent/coder/forged";
  RunResult r = tt.sh("mkdir -p " + forged + "/agent/coder.d " + forged + "/tool && " + "printf 'coder_t\\n' > " +
                      forged + "/agent/coder.d/label && " + "printf 'allow coder_t tool:* execute\\n' > " + forged +
                      "/agent/coder.d/policy && " + "printf '#!/bin/sh\\necho forged-ran\\n' > " + forged +
                      "/tool/mine && chmod 755 " + forged + "/tool/mine && cp -r " + forged + "/agent/coder.d " +
                      forged + "/agent/other.d; " + "CTX_ROOT=" + forged + " CTX_PATH=" + forged +
                      "/tool:/ctx/tool /ctx/bin/ctx tool shell.exec; " + "echo rc=$?; CTX_ROOT=" + forged +
                      " CTX_PATH=" + forged + "/tool CTX_AGENT=other " + "/ctx/bin/ctx tool mine; echo rc=$?");
  INFO(r.out << r.err);
  CHECK(r.out.find("shell-ran") == std::string::npos);
  CHECK(r.out.find("forged-ran") == std::string::npos);
  CHECK(r.out.find("rc=13\nrc=13\n") != std::string::npos);
  // An allowed tool arrives as a descriptor of a read-only mount: a tool
  // (run as the agent, which here owns the file) that writes to itself
  // through that descriptor, or changes its mode, is refused.
  const std::string self_writer =
      "#!/bin/sh\n( echo appended >> \"$0\" ) 2>/dev/null; echo write=$?\n"
      "chmod 777 \"$0\" 2>/dev/null; echo chmod=$?\n";
  tt.tool("ctx/tool/echo.args", self_writer);
  RunResult w = tt.sh("/ctx/bin/ctx tool echo.args");
  INFO(w.out << w.err);
  CHECK(w.exit_code == 0);
  CHECK(w.out.find("write=") != std::string::npos);
  CHECK(w.out.find("write=0") == std::string::npos);
  CHECK(w.out.find("chmod=1") != std::string::npos);
  CHECK(tt.t.dir().read("ctx/tool/echo.args") == self_writer);
  struct stat st {};
  REQUIRE(::stat((tt.t.root() + "/tool/echo.args").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
}

TEST_CASE("ctx tool: each layer refuses with its reason", "[root][userns]") {
  ToolTree tt = make_tree();
  // agent policy
  tt.tool("ctx/tool/shell.exec", "#!/bin/sh\necho ran\n");
  RunResult p = tt.sh("/ctx/bin/ctx tool shell.exec");
  CHECK(p.exit_code == 13);
  json j = first_json_line(p.err);
  CHECK(j["code"] == "EACCES");
  CHECK(j["reason"] == "agent_policy");
  CHECK(p.err.substr(p.err.find('\n') + 1) ==
        "ctx tool: shell.exec: EACCES: the policy of coder has no 'allow coder_t tool:shell.exec execute'\n");
  CHECK(p.out.empty());
  // The tool's own policy and the mode bits for the agent's ids (an
  // execute bit for the group only, while the agent is the file's owner):
  // the agent view does not show such a tool, but the supervisor, which
  // decides every ctx tool call, names the layer that refuses.
  tt.tool("ctx/tool/fenced", "#!/bin/sh\necho ran\n");
  tt.t.write("ctx/tool/fenced.d/policy", "allow reviewer_t tool:fenced execute\n");
  tt.tool("ctx/tool/rooted", "#!/bin/sh\necho ran\n", 0010);
  for (auto [hidden, reason] : {std::pair{"fenced", "tool_policy"}, std::pair{"rooted", "mode"}}) {
    RunResult h = tt.sh(std::string("/ctx/bin/ctx tool ") + hidden);
    CHECK(h.exit_code == 13);
    CHECK(first_json_line(h.err)["reason"] == reason);
    CHECK(h.out.empty());
  }
  RunResult why = ctx::test::run_command(
      {ctx::test::built("ctx/ctx"), "explain", "--ctx-root", tt.t.root(), "coder", "tool:fenced", "execute"});
  CHECK(why.exit_code == 1);
  CHECK(why.out.find("tool:fenced execute: denied") != std::string::npos);
  // unknown and invalid names: a name the policy allows but no tier has
  // is ENOENT; without the allow it is EACCES either way (seed 000)
  RunResult nf = tt.sh("/ctx/bin/ctx tool twice");
  CHECK(nf.exit_code == 2);
  CHECK(first_json_line(nf.err)["reason"] == "not_found");
  CHECK(nf.err.find("no executable twice in /ctx/tool:/ctx/home/") != std::string::npos);  // where it looked
  RunResult np = tt.sh("/ctx/bin/ctx tool nosuch");
  CHECK(np.exit_code == 13);
  CHECK(first_json_line(np.err)["reason"] == "agent_policy");
  RunResult bad = tt.sh("/ctx/bin/ctx tool ../x");
  CHECK(bad.exit_code == 22);
  CHECK(first_json_line(bad.err)["reason"] == "invalid_name");
  std::string ev = tt.events();
  CHECK(
      ev.find(
          "\"object\":\"tool/shell.exec\",\"reason\":\"agent_policy\",\"session\":\"default\",\"status\":\"denied\"") !=
      std::string::npos);
}

TEST_CASE("ctx tool: a noexec mount refuses", "[root][userns]") {
  ToolTree tt = make_tree();
  std::string uid = std::to_string(tt.t.owner().uid);
  tt.tool("ctx/home/" + uid + "/tool/echo.args", "#!/bin/sh\necho home\n");
  tt.t.agent("coder",
             {{"mount", tt.t.base_mounts() + tt.t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + tt.t.root() + "/home/" +
                            uid + "/tool\t/ctx/home/" + uid + "/tool\tro\tbind,noexec\n" + tt.t.root() + "/home/" +
                            uid + "/agent/coder\t/ctx/home/" + uid + "/agent/coder\trw\tbind\n"},
              {"path", "/ctx/home/" + uid + "/tool\n/ctx/tool\n"},
              {"policy", "allow coder_t tool:echo.args execute\n"}});
  RunResult r = tt.sh("/ctx/bin/ctx tool echo.args");
  CHECK(r.exit_code == 13);
  CHECK(first_json_line(r.err)["reason"] == "noexec_mount");
}

TEST_CASE("ctx tool: CTX_PATH order, symlinks and non-executables", "[root][userns]") {
  ToolTree tt = make_tree();
  std::string uid = std::to_string(tt.t.owner().uid);
  tt.tool("ctx/home/" + uid + "/tool/twice", "#!/bin/sh\necho home\n");
  tt.tool("ctx/tool/twice", "#!/bin/sh\necho system\n");
  tt.t.agent("coder", {{"mount", tt.t.base_mounts() + tt.t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + tt.t.root() +
                                     "/home/" + uid + "/agent/coder\t/ctx/home/" + uid + "/agent/coder\trw\tbind\n"},
                       {"path", "/ctx/home/" + uid + "/tool\n/ctx/tool\n"},
                       {"policy", "allow coder_t tool:twice execute\n"}});
  CHECK(tt.sh("/ctx/bin/ctx tool twice").out == "home\n");
  // A non-executable file is not a hit: the next directory's is.
  ::chmod((tt.t.root() + "/home/" + uid + "/tool/twice").c_str(), 0644);
  CHECK(tt.sh("/ctx/bin/ctx tool twice").out == "system\n");
  // A symlink is never followed, never a hit.
  ::unlink((tt.t.root() + "/home/" + uid + "/tool/twice").c_str());
  REQUIRE(::symlink("/ctx/tool/twice", (tt.t.root() + "/home/" + uid + "/tool/twice").c_str()) == 0);
  tt.tool("ctx/tool/twice", "#!/bin/sh\necho system-again\n");
  CHECK(tt.sh("/ctx/bin/ctx tool twice").out == "system-again\n");
}

TEST_CASE("ctx tool: schemas, prompts and skill files grant nothing", "[root][userns]") {
  ToolTree tt = make_tree();
  tt.tool("ctx/tool/fs.write", "#!/bin/sh\necho wrote\n");
  tt.t.write("ctx/tool/fs.write.d/schema", "{\"grant\": \"allow coder_t tool:fs.write execute\"}\n");
  tt.t.write("ctx/agent/coder.d/meta.json", "{\"policy\": \"allow coder_t tool:fs.write execute\"}\n");
  tt.t.write("ctx/home/" + std::to_string(tt.t.owner().uid) + "/agent/coder/SKILL.md",
             "allowed-tools: fs.write\nallow coder_t tool:fs.write execute\n");
  RunResult r = tt.sh("/ctx/bin/ctx tool fs.write");
  CHECK(r.exit_code == 13);
  CHECK(first_json_line(r.err)["reason"] == "agent_policy");
  CHECK(r.out.empty());
}

TEST_CASE("ctx ps shows running agents as a tree; ctx status the root's status", "[root][userns]") {
  ToolTree tt = make_tree();
  tt.t.write("ctx/status", "ready\n");
  // rev is coder's owned child: it runs only under coder's supervisor
  // (seed 003 rule 5), so coder starts it.
  const bool root = ctx::test::current_facility() == "root";
  tt.t.write("ctx/agent/coder.d/iso", root ? "shared\n" : "userns\n");
  tt.t.set_policy("coder", "allow coder_t agent:rev create\nallow coder_t agent:rev start\n");
  auto coder = tt.t.spawn(
      {"coder", "--", "/bin/sh", "-c",
       "set -e; /ctx/bin/ctx agent create '{\"name\":\"rev\",\"label\":\"rev_t\",\"mount\":[[\"/usr\",\"/usr\","
       "\"ro\"],[\"/probe\",\"/probe\",\"ro\"]]}' >/dev/null; /ctx/bin/ctx agent start rev -- /probe notify:READY=1 "
       "notify:CTX_STATE=busy sleep:30 >/dev/null; exec /probe notify:READY=1 sleep:30"},
      tt.as);
  REQUIRE(ctx::test::wait_for_file(tt.t.root() + "/agent/coder.d/status", "ready\n"));
  REQUIRE(ctx::test::wait_for_file(tt.t.root() + "/agent/rev.d/status", "busy\n"));
  std::string rev_pid = tt.t.dir().read("ctx/agent/rev.d/pid");
  rev_pid.pop_back();
  RunResult ps = ctx::test::run_command({ctx::test::built("ctx/ctx"), "ps", "--ctx-root", tt.t.root()});
  INFO(ps.out);
  CHECK(ps.exit_code == 0);
  std::istringstream lines(ps.out);
  std::vector<std::string> l;
  for (std::string x; std::getline(lines, x);) l.push_back(x);
  REQUIRE(l.size() == 3);
  CHECK(l[1].rfind("coder ", 0) == 0);
  CHECK(l[1].find(" ready ") != std::string::npos);
  CHECK(l[1].find(" " + std::to_string(coder.pid) + " ") != std::string::npos);
  CHECK(l[2].rfind("  `-rev ", 0) == 0);
  CHECK(l[2].find(" busy ") != std::string::npos);
  CHECK(l[2].find(" " + rev_pid + " ") != std::string::npos);
  if (root) {
    CHECK(l[1].find("/cortexfs/user-" + std::to_string(tt.t.owner().uid) + "/agent-coder-") != std::string::npos);
  } else {
    CHECK(l[1].substr(l[1].size() - 3) == "  -");
  }
  RunResult st = ctx::test::run_command({ctx::test::built("ctx/ctx"), "status", "--ctx-root", tt.t.root()});
  CHECK(st.exit_code == 0);
  CHECK(st.out == "ready\n");
  ::kill(coder.pid, SIGTERM);  // its child is cancelled with it
  ctx::test::wait_command(coder, 30);
  CHECK(tt.t.dir().read("ctx/agent/rev.d/status") == "dead\n");
  RunResult after = ctx::test::run_command({ctx::test::built("ctx/ctx"), "ps", "--ctx-root", tt.t.root()});
  CHECK(after.out == "AGENT                    SESSION      STATUS         PID   UPTIME  CGROUP\n");
}

TEST_CASE("the example tree's tools work through the helper inside a sandbox", "[root][userns]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  TestUser as = ctx::test::current_facility() == "root" ? TestUser{0, 0, "root"} : *u;
  ctx::test::TempDir d;
  const std::string root = ctx::test::install_example(d.path(), *u);
  // The example's reviewer is coder's owned child, which only coder's
  // supervisor may start (seed 003 rule 5); here it runs on its own to
  // show its policy.
  std::filesystem::remove(root + "/agent/reviewer.d/parent");
  auto run = [&](const std::string& agent, const std::string& cmd) {
    return ctx::test::run_command(
        {ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", root, agent, "--", "/bin/sh", "-c", cmd}, as, 60);
  };
  RunResult w =
      run("coder",
          "ctx tool fs.write '{\"path\":\"/work/note.txt\",\"content\":\"from coder\"}' && "
          "ctx tool fs.read '{\"path\":\"/work/note.txt\"}' && echo '{\"cmd\":\"pwd\"}' | ctx tool shell.exec && "
          "{ echo hi | /ctx/model/debug/echo; echo model=$?; }");
  INFO(w.err);
  CHECK(w.exit_code == 0);
  // A model is never run from the agent's view with the agent's rights.
  CHECK(w.out == "from coder\n/work\nmodel=126\n");
  // The reviewer may read, not write or run shell commands.
  RunResult r = run("reviewer",
                    "ctx tool fs.read '{\"path\":\"/shared/project-a/data/note.txt\"}'; "
                    "ctx tool fs.write '{\"path\":\"/tmp/x\",\"content\":\"y\"}'; echo \"write=$?\"; "
                    "ctx tool shell.exec '{\"cmd\":\"id\"}'; echo \"shell=$?\"");
  CHECK(r.out == "from coder\nwrite=13\nshell=13\n");
  CHECK(r.err.find("\"reason\":\"agent_policy\",\"tool\":\"fs.write\"") != std::string::npos);
}

TEST_CASE("the direct forms are gated: a tool tier in the sandbox shows only what the agent may run",
          "[root][userns]") {
  ToolTree tt = make_tree();
  std::string uid = std::to_string(tt.t.owner().uid);
  tt.tool("ctx/tool/shell.exec", "#!/bin/sh\necho ran\n");  // no allow in coder's policy
  tt.t.write("ctx/tool/shell.exec.d/schema", "{}\n");
  tt.tool("ctx/tool/fenced", "#!/bin/sh\necho ran\n");  // coder's policy allows it, its own does not
  tt.t.write("ctx/tool/fenced.d/policy", "allow reviewer_t tool:fenced execute\n");
  tt.t.write("ctx/tool/README", "not a tool\n");
  REQUIRE(::symlink("echo.args", (tt.t.root() + "/tool/link").c_str()) == 0);
  // A directory inside the tier is not a tool: the view does not have it,
  // so nothing can be bound there.
  tt.t.mkdir("ctx/tool/extra");
  tt.t.write("extra-src/marker", "x\n");
  std::string own_home = tt.t.root() + "/home/" + uid + "/agent/coder\t/ctx/home/" + uid + "/agent/coder\trw\tbind\n";
  tt.t.agent("coder", {{"mount", tt.t.base_mounts() + tt.t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" +
                                     tt.t.dir().path() + "/extra-src\t/ctx/tool/extra\tro\tbind\n" + own_home}});
  RunResult into = tt.t.launch({"coder", "--", "/bin/true"}, tt.as);
  CHECK(into.exit_code == 125);
  CHECK(into.err.find("coder.d/mount:4: " + tt.t.dir().path() +
                      "/extra-src -> /ctx/tool/extra: mkdirat extra: EROFS") != std::string::npos);
  // The same tier a second time, at /mirror: hidden there too.
  tt.t.agent("coder", {{"mount", tt.t.base_mounts() + tt.t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + tt.t.root() +
                                     "\t/mirror\tro\trbind,nosuid,nodev\n" + tt.t.root() + "/home/" + uid +
                                     "/agent/coder\t/ctx/home/" + uid + "/agent/coder\trw\tbind,nosuid,nodev\n"},
                       {"policy", "allow coder_t tool:echo.args execute\nallow coder_t tool:fenced execute\n"}});
  RunResult r = tt.t.launch(
      {"coder", "--", "/probe", "exec:/ctx/tool/echo.args", "exec:/ctx/tool/shell.exec", "exec:/ctx/tool/fenced",
       "exists:/ctx/tool/link", "exists:/ctx/tool/README", "exists:/ctx/tool/shell.exec.d/schema",
       "exists:/ctx/tool/fenced.d/policy", "exec:/mirror/tool/shell.exec", "exec:/mirror/tool/echo.args",
       "write:/ctx/tool/new", "exists:/ctx/tool/extra"},
      tt.as);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  json j = json::parse(ctx::test::probe_json_line(r.out));
  CHECK(j["exec:/ctx/tool/echo.args"] == "ok");
  CHECK(j["exec:/ctx/tool/shell.exec"] == "ENOENT");  // layer 3 refuses: not in the view
  CHECK(j["exec:/ctx/tool/fenced"] == "ENOENT");      // layer 4 refuses
  CHECK(j["exists:/ctx/tool/link"] == "ENOENT");      // a symlink is never a tool
  // Nothing of a tool the view does not show, and nothing but tools.
  CHECK(j["exists:/ctx/tool/README"] == "ENOENT");
  CHECK(j["exists:/ctx/tool/shell.exec.d/schema"] == "ENOENT");
  CHECK(j["exists:/ctx/tool/fenced.d/policy"] == "ENOENT");
  CHECK(j["exec:/mirror/tool/shell.exec"] == "ENOENT");
  CHECK(j["exec:/mirror/tool/echo.args"] == "ok");
  CHECK(j["write:/ctx/tool/new"] == "EROFS");
  CHECK(j["exists:/ctx/tool/extra"] == "ENOENT");
  // The direct form of an allowed tool: arguments and stdin pass through,
  // and the call is recorded like one through ctx tool, once.
  std::string before = tt.events();
  RunResult d = tt.sh("printf 'in put' | /ctx/tool/echo.args '{\"k\":1}'");
  CHECK(d.exit_code == 0);
  CHECK(d.out == "args:{\"k\":1}\nin put");
  std::string added = tt.events().substr(before.size());
  CHECK(added.find("\"object\":\"tool/echo.args\"") != std::string::npos);
  CHECK(added.find("\"status\":\"ok\"") != std::string::npos);
  auto calls = [](const std::string& ev) {
    std::size_t n = 0;
    for (auto pos = ev.find("\"type\":\"tool.call\""); pos != std::string::npos;
         pos = ev.find("\"type\":\"tool.call\"", pos + 1))
      ++n;
    return n;
  };
  CHECK(calls(added) == 1);
  before = tt.events();
  CHECK(tt.sh("/ctx/bin/ctx tool echo.args '{}' </dev/null").out == "args:{}\n");
  added = tt.events().substr(before.size());
  CHECK(calls(added) == 1);
  // ctx tool names the layer for the ones the projection leaves out.
  CHECK(first_json_line(tt.sh("/ctx/bin/ctx tool shell.exec").err)["reason"] == "agent_policy");
  CHECK(first_json_line(tt.sh("/ctx/bin/ctx tool fenced").err)["reason"] == "tool_policy");
  // Nothing durable was created in the tier on the host.
  CHECK(ctx::test::names_in(tt.t.root() + "/tool") == std::vector<std::string>{"README", "echo.args", "extra", "fenced",
                                                                               "fenced.d", "link", "shell.exec",
                                                                               "shell.exec.d"});
}

// A flood of tool requests (refused ones need no grant) is answered with
// EAGAIN past a burst, not recorded: the events, the log and the
// supervisor's time stay bounded (the agent's one rate limit,
// launcher/control/rate_limit.hpp; flood_test.cpp has the floods of model calls).
// Every recorded call is in <name>.d/log too, which the agent cannot write.
TEST_CASE("tool calls are rate-limited and recorded where the agent cannot write", "[root][userns]") {
  ToolTree tt = make_tree();
  RunResult r = tt.sh(
      "exec python3 -c '\n"
      "import socket, time\n"
      "s = socket.socket(socket.AF_UNIX); s.connect(\"/run/ctx/supervisor\"); f = s.makefile()\n"
      "t = time.time(); limited = 0\n"
      "for i in range(600):\n"
      "    s.sendall(b\"{\\\"op\\\":\\\"tool\\\",\\\"name\\\":\\\"nosuch\\\"}\\n\")\n"
      "    limited += \"rate_limited\" in f.readline()\n"
      "print(limited, time.time() - t)\n'");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  std::istringstream in(r.out);
  int limited = 0;
  double seconds = 0;
  in >> limited >> seconds;
  std::string added = tt.events();
  std::size_t recorded = 0;
  for (auto p = added.find("\"type\":\"tool.call\""); p != std::string::npos;
       p = added.find("\"type\":\"tool.call\"", p + 1))
    ++recorded;
  // The burst, then the rate for the time the flood took, and no more.
  CHECK(recorded <= ctx::launcher::kRequestBurst +
                        static_cast<std::size_t>(ctx::launcher::kRequestsPerMinute * (seconds + 1) / 60) + 1);
  CHECK(recorded + static_cast<std::size_t>(limited) == 600);
  if (seconds < 5) CHECK(limited > 0);
  std::string log = tt.t.dir().read("ctx/agent/coder.d/log");
  CHECK(log.find("\"object\":\"tool/nosuch\"") != std::string::npos);
  CHECK(log.find("\"type\":\"tool.call\"") != std::string::npos);
}

// The control server decodes every request once; a tool or model request
// it refuses is still its gate's to answer and record, as before the
// decoder was one (launcher/control/server.hpp).
TEST_CASE("malformed tool and model requests are answered and recorded by their gates", "[root][userns]") {
  ToolTree tt = make_tree();
  tt.t.write("ctx/home/" + std::to_string(tt.t.owner().uid) + "/agent/coder/req.py", R"(import socket
s = socket.socket(socket.AF_UNIX); s.connect("/run/ctx/supervisor"); f = s.makefile()
for line in [r'{"op":"tool","name":"echo.args","x":1}', r'{"op":"tool"}', r'{"op":"model","nam":"x"}',
             r'{"op":"model","name":"debug/echo"}', r'{"op":"fly"}']:
    s.sendall(line.encode() + b"\n")
    print(f.readline(), end="")
)");
  RunResult r = tt.sh("exec python3 " + tt.home + "/agent/coder/req.py");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  auto refusal = [](const std::string& op, const std::string& message, bool named) {
    json j{{"agent", "coder"}, {"code", "EINVAL"}, {"message", message},
           {"ok", false},      {"op", op},         {"reason", "invalid_request"}};
    if (named) j["name"] = "";
    return j.dump() + "\n";
  };
  CHECK(r.out ==
        refusal("tool", "unknown key 'x' in tool", true) + refusal("tool", "tool needs \"name\", a string", true) +
            refusal("model", "unknown key 'nam' in model", true) +
            refusal("model", "model needs the caller's stdin, stdout and stderr", true) +
            refusal("fly", "EINVAL: unknown op 'fly' (create, start, stop, wait, delete, model, tool)", false));
  std::string calls;
  std::istringstream in(tt.events());
  for (std::string line; std::getline(in, line);) {
    json e = json::parse(line);
    if (e["type"] == "tool.call" || e["type"] == "model.call")
      calls += e["type"].get<std::string>() + " " + e["object"].get<std::string>() + " " +
               e["status"].get<std::string>() + " " + e["reason"].get<std::string>() + "\n";
  }
  CHECK(calls ==
        "tool.call tool error invalid_request\ntool.call tool error invalid_request\n"
        "model.call model error invalid_request\nmodel.call model error invalid_request\n");
}

// In a root launch the supervisor is root; it reads the tree as the owner,
// as the view does: a tool whose .d/ the owner may not read is not decided
// on what the owner cannot see (it is refused, as the view hides it).
// Root could read each of these .d/ and would run the tool: the first
// call shows it (a .d/ of root's that the owner may read is no refusal by
// itself); the second is refused by an ACL that the view's rules, which
// read mode bits, cannot see: only the kernel, asked with the owner's
// file-system ids, refuses it.
TEST_CASE("a root supervisor decides ctx tool with the owner's rights to the tree", "[root]") {
  ToolTree tt = make_tree();
  tt.t.set_policy("coder", "allow coder_t tool:locked execute\n");
  tt.tool("ctx/tool/locked", "#!/bin/sh\necho locked-ran\n");
  tt.t.write("ctx/tool/locked.d/policy", "allow coder_t tool:locked execute\n");
  const std::string meta = tt.t.root() + "/tool/locked.d";
  REQUIRE(::chown((meta + "/policy").c_str(), 0, 0) == 0);
  REQUIRE(::chown(meta.c_str(), 0, 0) == 0);
  RunResult open = tt.sh("/ctx/bin/ctx tool locked; echo rc=$?");
  INFO(open.out << open.err);
  CHECK(open.out == "locked-ran\nrc=0\n");
  const std::string refused =
      "{\"agent\":\"coder\",\"code\":\"EACCES\",\"message\":\"the tool's own policy (locked.d/policy) has no "
      "'allow coder_t tool:locked execute'\",\"reason\":\"tool_policy\",\"tool\":\"locked\",\"type\":\"error\"}";
  // An ACL entry that denies the owner; the mode stays 0755.
  REQUIRE(deny_user(meta, tt.t.owner().uid));
  struct stat st {};
  REQUIRE(::stat(meta.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  RunResult acl = tt.sh("/ctx/bin/ctx tool locked; echo rc=$?");
  INFO(acl.out << acl.err);
  CHECK(acl.out == "rc=13\n");
  CHECK(first_json_line(acl.err).dump() == refused);
  REQUIRE(::removexattr(meta.c_str(), "system.posix_acl_access") == 0);
  // Mode bits the owner lacks.
  REQUIRE(::chmod(meta.c_str(), 0700) == 0);
  RunResult r = tt.sh("/ctx/bin/ctx tool locked; echo rc=$?");
  INFO(r.out << r.err);
  CHECK(r.out == "rc=13\n");
  CHECK(first_json_line(r.err).dump() == refused);
  REQUIRE(::chmod(meta.c_str(), 0755) == 0);  // for the tree's removal
}

// `ctx tool NAME [JSON]` skips the command-line parser when nothing in it
// is the parser's to read (ctx/main.cpp, plain_tool_call); every form
// reads as the parser reads it: the same argument reaches the tool, and
// what the parser refuses it still refuses, with its own words.
TEST_CASE("ctx tool's command line reads the same with and without the parser", "[root][userns]") {
  ToolTree tt = make_tree();
  RunResult r = tt.sh(
      "c=/ctx/bin/ctx; $c tool echo.args '{\"k\":[1,2]}' </dev/null; $c tool echo.args </dev/null; "
      "$c tool echo.args '[1]' </dev/null; $c tool echo.args '[]' </dev/null; echo end");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  // "[...]" is the parser's list syntax: "[1]" reaches the tool as 1.
  CHECK(r.out == "args:{\"k\":[1,2]}\nargs:\nargs:1\nargs:\nend\n");
  for (const auto& [cmd, err] :
       {std::pair<std::string, std::string>{"tool", "NAME is required\nRun with --help for more information.\n"},
        {"tool echo.args a b", "JSON: At Most 1 required but received 2\nRun with --help for more information.\n"},
        {"tool echo.args '[1,2]'", "JSON: At Most 1 required but received 2\nRun with --help for more information.\n"},
        {"tool -x echo.args", "The following argument was not expected: -x\nRun with --help for more information.\n"},
        {"tool -- echo.args", "NAME is required\nRun with --help for more information.\n"}}) {
    RunResult e = tt.sh("exec /ctx/bin/ctx " + cmd);
    INFO(cmd);
    CHECK(e.exit_code == 2);
    CHECK(e.out == "");
    CHECK(e.err == err);
  }
}

namespace {

// A shell word of `a`, as it is.
std::string quoted(const std::string& a) {
  std::string q = "'";
  for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A shell line that runs `bin CALL` (an optional leading CTX_SUPERVISOR=
// moved before bin) and keeps its stdout, stderr and exit status as
// DIR/oK.out, .err and .rc.
std::string run_call(const std::string& dir, const std::string& bin, const std::string& call, int k) {
  const std::string out = dir + "/o" + std::to_string(k);
  std::string env, rest = call;
  if (rest.rfind("CTX_SUPERVISOR=", 0) == 0) {
    env = rest.substr(0, rest.find(' ') + 1);
    rest = rest.substr(rest.find(' ') + 1);
  }
  return "( " + env + bin + " " + rest + " >" + out + ".out 2>" + out + ".err; echo $? >" + out + ".rc ); ";
}

// The shell line that prints every kept call of DIR, and the parser of
// its output: K -> "RC\nSTDOUT STDERR" (as the files hold them).
std::string dump_calls(const std::string& dir) {
  return "cd " + dir +
         " && for f in o*.rc; do b=${f%.rc}; printf '\\n@@%s\\n' \"$b\"; cat $b.rc $b.out $b.err; done; printf "
         "'\\n@@end\\n'";
}
std::map<int, std::string> parse_calls(const std::string& out) {
  std::map<int, std::string> results;
  std::istringstream in(out);
  std::string line;
  int current = -1;
  while (std::getline(in, line) && line != "@@end") {
    if (line.size() > 3 && line.rfind("@@o", 0) == 0 && std::all_of(line.begin() + 3, line.end(), ::isdigit)) {
      current = std::stoi(line.substr(3));
      continue;
    }
    results[current] += line + "\n";
  }
  results.erase(-1);                                // the newline before the first
  for (auto& [n, text] : results) text.pop_back();  // the newline before the next
  return results;
}

// Answers no supervisor sends (no tool, not JSON, unknown codes, escapes,
// no newline), one per connection of the stand-in, in order, and the
// calls that receive them.
std::vector<std::string> stand_in_answers() {
  return {
      R"({"ok":true,"op":"tool","name":"echo.args"})"
      "\n",
      "not json\n",
      R"({"ok":false,"code":"EACCES","reason":"r\u0001","message":"m\u202e\ud83d\ude00 \"q\"","agent":"a\u00e9"})"
      "\n",
      R"({"ok":false,"code":"EWHAT"})"
      "\n",
      R"({"ok":false,"code":"ENOTSUP","agent":7})"
      "\n",
      R"({"ok":false})",
      R"( { "exit_status" : 7 , "ok" : true } )"
      "\n",
      R"({"ok":true,"exit_status":300})"
      "\n",
      R"({"ok":true})"
      "\n",
      "",
      R"({"ok":false,"code":"ECANCELED","message":"stopping"}trailing)"
      "\n",
  };
}
std::vector<std::string> stand_in_calls_list() {
  return {"tool echo.args", "tool echo.args", "tool echo.args", "tool x", "model m", "tool x",
          "model m",        "model m",        "model m",        "tool x", "tool x"};
}

}  // namespace

// bin/ctx's small program (ctx/call_bare.cpp on x86-64 and arm64) against
// the full helper, command line by command line in one sandbox: the same
// standard output, standard error and exit status. Answers of the real
// supervisor, and then a stand-in's that no supervisor sends (no tool,
// not JSON, unknown codes, escapes, no newline), reached by CTX_SUPERVISOR.
TEST_CASE("bin/ctx's small program answers every call as the full helper does", "[root][userns]") {
  ToolTree tt = make_tree();
  tt.t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx-call")), 0755);
  tt.t.write("ctx/bin/ctx-helper", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
  // One connection per answer, in order; each answer is written as given.
  const std::string w = tt.home + "/agent/coder/eq";  // the agent's own, writable
  const std::string host_w = "ctx/home/" + std::to_string(tt.t.owner().uid) + "/agent/coder/eq";
  tt.t.write(host_w + "/in", "in put", 0644);
  tt.t.write(host_w + "/stand-in.py",
             "import socket, sys\n"
             "s = socket.socket(socket.AF_UNIX)\n"
             "s.bind(sys.argv[1]); s.listen(8)\n"
             "open(sys.argv[1] + '.up', 'w').close()\n"
             "for a in sys.argv[2:]:\n"
             "    c, _ = s.accept(); c.recv(65536); c.sendall(a.encode('utf-8', 'surrogateescape')); c.close()\n",
             0644);
  const std::string long_path = "/tmp/" + std::string(120, 's');
  const std::vector<std::string> calls = {
      "tool echo.args '{\"k\":1}' < " + w + "/in",
      "tool echo.args",
      "tool nosuch",
      "tool 'bad name!'",
      "tool \"$(printf 'a\\001\\342\\200\\256b\\303\\251')\"",
      "tool \"$(printf 'x\\377y')\"",
      "tool fenced",
      "model nosuch '{}'",
      "model nosuch",
      "model nosuch \"$(head -c 70000 /dev/zero | tr '\\0' a)\"",
      "CTX_SUPERVISOR=/nowhere tool echo.args",
      "CTX_SUPERVISOR=@nowhere model m",
      "CTX_SUPERVISOR=" + long_path + " tool echo.args",
      // A request longer than the supervisor takes (64 KiB): its refusal.
      "tool \"$(head -c 70000 /dev/zero | tr '\\0' a)\"",
  };
  const std::vector<std::string> answers = stand_in_answers();
  const std::vector<std::string> stand_in_calls = stand_in_calls_list();
  REQUIRE(answers.size() == stand_in_calls.size());
  std::string script;
  int k = 0;
  for (const auto& c : calls) {
    script += run_call(w, "/ctx/bin/ctx", c, k++);
    script += run_call(w, "/ctx/bin/ctx-helper", c, k++);
  }
  for (const char* bin : {"/ctx/bin/ctx", "/ctx/bin/ctx-helper"}) {
    script += "rm -f " + w + "/f.sock " + w + "/f.sock.up; python3 " + w + "/stand-in.py " + w + "/f.sock";
    for (const auto& a : answers) script += " " + quoted(a);
    script += " & while [ ! -e " + w + "/f.sock.up ]; do sleep 0.01; done; ";
    for (const auto& c : stand_in_calls) script += run_call(w, "CTX_SUPERVISOR=" + w + "/f.sock " + bin, c, k++);
    script += "wait; ";
  }
  script += dump_calls(w);
  RunResult r = tt.sh(script);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  std::map<int, std::string> results = parse_calls(r.out);
  INFO(r.out);
  REQUIRE(results.size() == static_cast<std::size_t>(k));
  for (std::size_t i = 0; i < calls.size(); ++i) {
    INFO(calls[i]);
    if (i == 5 && CTX_CALL_BARE) {
      // A name that is not UTF-8: the full helper's request ends it by an
      // exception (SIGABRT); the small program built without a C library
      // refuses it, in JSON (the other one, ctx/call_main.cpp, is the
      // full helper's code and ends as it does).
      const std::string& small = results[static_cast<int>(2 * i)];
      CHECK(small.rfind("22\n", 0) == 0);
      CHECK(small.find("\"code\":\"EINVAL\"") != std::string::npos);
      CHECK(small.find("\"tool\":\"x\\ufffdy\"") != std::string::npos);
      CHECK(small.find("ctx tool: x\\xffy: EINVAL: EINVAL: the call's name or directory is not UTF-8") !=
            std::string::npos);
      continue;
    }
    CHECK(results[static_cast<int>(2 * i)] == results[static_cast<int>(2 * i + 1)]);
  }
  const int base = static_cast<int>(2 * calls.size());
  for (std::size_t i = 0; i < answers.size(); ++i) {
    INFO(answers[i] << " to " << stand_in_calls[i]);
    CHECK(results[base + static_cast<int>(i)] == results[base + static_cast<int>(answers.size() + i)]);
  }
  // The comparison says something: the calls succeeded, were refused and
  // failed in the ways listed.
  CHECK(results[0] == "0\nargs:{\"k\":1}\nin put");
  CHECK(results[4].find("\"code\":\"EACCES\"") != std::string::npos);
  CHECK(results[base + 6].rfind("7\n", 0) == 0);
  CHECK(results[base + 1].find("EIO: the supervisor closed the connection without an answer") != std::string::npos);
  CHECK(results[base + 2].find("\\u202e\\ud83d\\ude00") != std::string::npos);
  CHECK(results[base + 8] == "1\n");  // a model call allowed with no exit status: 1, nothing said
  CHECK(results[base + 0].find("EIO: the supervisor allowed the call but sent no tool") != std::string::npos);
  CHECK(results[base + 5].find("\"code\":\"EIO\"") != std::string::npos);
}
