// The negative statements of seeds 000 and 001 (issue 15, point 6): what a
// CTX root must never grow, and the files that must stay data. Each case
// runs the real programs, as root and as the unprivileged test user, and
// has a control that shows its check would see the thing it rules out.
// docs/conformance.md names these cases in its rows.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "test/support/facility.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::count_of;
using ctx::test::CtxTree;
using ctx::test::RunResult;
using ctx::test::TestUser;

namespace {

namespace fs = std::filesystem;

// Seed 001, "Stable root": the only entries a CTX root may hold.
const std::set<std::string> kStableRoot = {"status", "bin", "model", "agent", "tool", "home", "shared"};

// Seed 001 L172-191 (and 000: audit/, mcp/, spawn/, factory/,
// agent-template/): names that are never root directories, and that
// nothing of ours makes anywhere in a tree.
const std::set<std::string> kNeverRoot = {
    "provider", "format",   "db",    "vector",  "memory", "mcp",   "skill",   "cluster",        "chan",     "job",
    "hook",     "workflow", "audit", "control", "space",  "spawn", "factory", "agent-template", "AGENTS.rc"};

// Every path below dir, relative to it (symbolic links not followed).
std::set<std::string> tree_paths(const std::string& dir) {
  std::set<std::string> out;
  for (auto it = fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied);
       it != fs::recursive_directory_iterator(); ++it)
    out.insert(fs::relative(it->path(), dir).string());
  return out;
}

// The paths of `paths` with a component in kNeverRoot.
std::vector<std::string> never_root_components(const std::set<std::string>& paths) {
  std::vector<std::string> bad;
  for (const auto& p : paths)
    for (const auto& part : fs::path(p))
      if (kNeverRoot.count(part.string())) bad.push_back(p);
  return bad;
}

// The top-level names of a CTX root that are not stable root entries.
std::vector<std::string> unstable_root_entries(const std::string& root) {
  std::vector<std::string> bad;
  for (const auto& n : ctx::test::names_in(root))
    if (!kStableRoot.count(n)) bad.push_back(n);
  return bad;
}

TestUser launcher_for(const TestUser& owner) {
  return ctx::test::current_facility() == "root" ? TestUser{0, 0, "root"} : owner;
}

// A tree with the ctx helper, an agent `coder` that sees the tree at /ctx,
// and a directory `marks` where any script that runs leaves a file.
struct MarkTree {
  TestUser as;
  CtxTree t;
  std::string uid;
  std::string marks;

  explicit MarkTree(const TestUser& owner)
      : as(launcher_for(owner)), t(owner), uid(std::to_string(owner.uid)), marks(t.dir() / "marks") {
    t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
    t.mkdir("marks", 0777);
    REQUIRE(::chmod(marks.c_str(), 0777) == 0);
    t.mkdir("ctx/home/" + uid + "/tool");
  }
  // A script that leaves marks/<name> when something on the host executes
  // it, and says MARK-<name> on stdout and stderr wherever it runs.
  std::string marker(const std::string& name) const {
    return "#!/bin/sh\ntouch " + marks + "/" + name + " 2>/dev/null\necho MARK-" + name + "\necho MARK-" + name +
           " >&2\n";
  }
  void coder(const std::string& extra_mounts, const std::string& policy) {
    t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + extra_mounts},
                      {"policy", policy}});
  }
  RunResult sh(const std::string& cmd) { return t.launch({"coder", "--", "/bin/sh", "-c", cmd}, as); }
  std::vector<std::string> left() const { return ctx::test::names_in(marks); }
};

}  // namespace

TEST_CASE("conformance: the tree checks see an unstable root entry and a name that is never a root directory",
          "[unit]") {
  // The checks the [root][userns] cases below rely on, on a crafted tree:
  // they are not vacuous.
  ctx::test::TempDir d;
  d.mkdir("ctx/agent");
  d.mkdir("ctx/home/1000/agent/coder/session/default");
  CHECK(unstable_root_entries(d / "ctx").empty());
  CHECK(never_root_components(tree_paths(d / "ctx")).empty());
  for (const char* bad : {"audit", "mcp", "spawn", "factory", "agent-template", "provider", "AGENTS.rc"}) {
    ctx::test::TempDir e;
    e.mkdir("ctx/agent");
    e.write(std::string("ctx/") + bad, "");
    CHECK(unstable_root_entries(e / "ctx") == std::vector<std::string>{bad});
    CHECK(never_root_components(tree_paths(e / "ctx")) == std::vector<std::string>{bad});
  }
  d.mkdir("ctx/home/1000/agent/coder/session/default/audit");
  CHECK(never_root_components(tree_paths(d / "ctx")).size() == 1);
}

TEST_CASE("conformance: init, a launch, a tool call and a child add no root entry and nothing the seed rules out",
          "[root][userns]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  TestUser as = launcher_for(*u);
  ctx::test::TempDir home;
  if (::geteuid() == 0) REQUIRE(::chown(home.path().c_str(), as.uid, as.gid) == 0);
  const std::string root = home / "ctx";
  const std::string env = "set -e; export PATH=" + ctx::test::built("launcher") + ":" + ctx::test::built("ctx") +
                          ":/usr/bin:/bin CTX_ROOT=" + root + "; ";
  RunResult init = ctx::test::run_command({"/bin/sh", "-c", env + "ctx init --ctx-root \"$CTX_ROOT\""}, as, 60,
                                          {"HOME=" + home.path()});
  INFO(init.out << init.err);
  REQUIRE(init.exit_code == 0);
  // What ctx init makes: stable root entries only, no MCP tool built in.
  CHECK(unstable_root_entries(root).empty());
  auto after_init = tree_paths(root);
  CHECK(never_root_components(after_init).empty());
  for (const auto& p : after_init) CHECK(fs::path(p).filename().string().rfind("mcp.", 0) != 0);
  const auto top_after_init = ctx::test::names_in(root);

  // An agent, a tool call, a child that runs: every process that writes in
  // a tree (ctx new, the supervisor, the helper, the child's supervisor).
  const std::string u_tier = "$CTX_ROOT/home/$(id -u)";
  RunResult run = ctx::test::run_command(
      {"/bin/sh", "-c",
       env + "ctx new hello >/dev/null; printf '#!/bin/sh\\necho \"hello, $1\"\\n' > " + u_tier +
           "/tool/greet; chmod +x " + u_tier +
           "/tool/greet; printf 'allow hello_t tool:greet execute\\nallow hello_t agent:helper create\\n"
           "allow hello_t agent:helper start\\n' >> $CTX_ROOT/agent/hello.d/policy; "
           "ctx-agent-run hello -- sh -c 'ctx tool greet world; "
           "ctx agent create \"{\\\"name\\\":\\\"helper\\\",\\\"mount\\\":[[\\\"/usr\\\",\\\"/usr\\\",\\\"ro\\\"]]}\" "
           ">/dev/null; ctx agent start helper -- /bin/echo helper-ran >/dev/null; ctx agent wait helper'; cat " +
           u_tier + "/agent/helper/session/default/output.log"},
      as, 120, {"HOME=" + home.path()});
  INFO(run.out << run.err);
  REQUIRE(run.exit_code == 0);
  CHECK(run.out.find("hello, world\n") != std::string::npos);  // the tool call ran
  CHECK(run.out.find("helper-ran\n") != std::string::npos);    // so did the child

  // No root entry appeared (seed 000: a supervisor adds no root
  // directory; 001: small root, no other root entries).
  CHECK(ctx::test::names_in(root) == top_after_init);
  CHECK(unstable_root_entries(root).empty());
  // Nowhere an audit/, mcp/, spawn/, factory/, agent-template/, provider/,
  // db/, workflow/, ... or an AGENTS.rc.
  auto after_run = tree_paths(root);
  CHECK(never_root_components(after_run).empty());
  // What appeared is agents (agent/) and per-user state (home/<uid>/):
  // nothing in the system tiers tool/, model/, bin/, nothing in shared/
  // (no collaboration files of ours), no tool materialized anywhere.
  const std::string user_tier = "home/" + std::to_string(as.uid) + "/";
  for (const auto& p : after_run) {
    if (after_init.count(p)) continue;
    INFO(p);
    CHECK((p.rfind("agent/", 0) == 0 || p.rfind(user_tier, 0) == 0));
  }
  // No tool placeholder or copy in the durable tiers: the user tool tier
  // holds what the script wrote there, nothing else.
  std::set<std::string> tools_added;
  for (const auto& p : after_run)
    if (!after_init.count(p) && p.rfind(user_tier + "tool/", 0) == 0) tools_added.insert(p);
  CHECK(tools_added == std::set<std::string>{user_tier + "tool/greet"});
  for (const auto& p : after_init) {
    if (p.rfind("tool/", 0) == 0 || p.rfind("model/", 0) == 0 || p.rfind("shared/", 0) == 0) CHECK(after_run.count(p));
  }
  // The user tier is the user's.
  struct stat st {};
  REQUIRE(::stat((root + "/" + user_tier).c_str(), &st) == 0);
  CHECK(st.st_uid == as.uid);
  CHECK((st.st_mode & 0002) == 0);
  CHECK(ctx::test::processes_mentioning(home.path()).empty());
}

TEST_CASE("conformance: AGENTS.rc, a tool's origin and MCP or skill config files are data: never run, never a grant",
          "[root][userns]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  MarkTree m(*u);
  // Hostile files: each runs a marker if anything executes it, and claims
  // a grant if anything reads it as one.
  m.t.write("ctx/AGENTS.rc", m.marker("agents-rc") + "export CTX_PATH=/ctx/evil\n", 0755);
  m.t.write("ctx/home/" + m.uid + "/AGENTS.rc", m.marker("home-agents-rc"), 0755);
  m.t.write("ctx/tool/greet", "#!/bin/sh\necho \"hello, $1\"\n", 0755);
  m.t.write("ctx/tool/greet.d/origin", m.marker("origin") + "# allow coder_t tool:greet execute\n", 0755);
  m.t.write("project/.mcp.json", "{\"mcpServers\":{\"github\":{\"command\":\"" + m.marks +
                                     "/../project/server\",\"tools\":"
                                     "[\"search_issues\"]}}}\n");
  m.t.write("project/server", m.marker("mcp-server"), 0755);
  m.t.write("project/config.toml", "[tools]\nallow = [\"greet\"]\n");
  m.t.write("project/skill/SKILL.md", "allow coder_t tool:greet execute\n");
  const std::string project = m.t.dir() / "project";
  // The controls: each marker leaves its file when it is run.
  for (const std::string& script : {m.t.root() + "/AGENTS.rc", m.t.root() + "/home/" + m.uid + "/AGENTS.rc",
                                    m.t.root() + "/tool/greet.d/origin", project + "/server"})
    REQUIRE(ctx::test::run_command({script}, m.t.owner()).exit_code == 0);
  REQUIRE(m.left() == std::vector<std::string>{"agents-rc", "home-agents-rc", "mcp-server", "origin"});
  for (const auto& n : m.left()) REQUIRE(::unlink((m.marks + "/" + n).c_str()) == 0);

  // Without a grant in coder's policy the claims grant nothing; the MCP
  // config names no tool.
  m.coder(project + "\t/work\tro\tbind,nosuid,nodev,noexec\n", "");
  RunResult denied = m.sh(
      "cat /work/.mcp.json >/dev/null && echo config-visible; /ctx/bin/ctx tool greet x; echo rc=$?; "
      "/ctx/bin/ctx tool mcp.github.search_issues; echo rc=$?; echo \"path=$CTX_PATH\"");
  INFO(denied.out << denied.err);
  CHECK(denied.exit_code == 0);
  CHECK(denied.out.find("config-visible\n") != std::string::npos);  // an ordinary file in the view
  CHECK(denied.out.find("hello") == std::string::npos);
  CHECK(count_of(denied.out, "rc=13\n") == 2);
  CHECK(denied.out.find("/ctx/evil") == std::string::npos);
  // With the grant, the tool runs; origin still does not.
  m.coder(project + "\t/work\tro\tbind,nosuid,nodev,noexec\n", "allow coder_t tool:greet execute\n");
  RunResult allowed = m.sh("/ctx/bin/ctx tool greet x; echo rc=$?");
  INFO(allowed.out << allowed.err);
  CHECK(allowed.out == "hello, x\nrc=0\n");
  CHECK(m.left().empty());
  for (const auto& out : {denied.out, denied.err, allowed.out, allowed.err})
    CHECK(out.find("MARK-") == std::string::npos);
  CHECK(m.t.dir().read("ctx/home/" + m.uid + "/agent/coder/session/default/events.jsonl").find("origin") ==
        std::string::npos);
}

TEST_CASE("conformance: CTX_PATH finds tools only: a model or agent name in a tool tier is neither", "[root][userns]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  MarkTree m(*u);
  // In the system tool tier (on coder's CTX_PATH): an executable named like
  // a model and an agent-shaped object named helper.
  m.t.write("ctx/tool/echo-model", "#!/bin/sh\necho tool-ran\n", 0755);
  m.t.write("ctx/tool/helper", m.marker("helper"), 0755);
  m.t.write("ctx/tool/helper.d/label", "helper_t\n");
  m.t.write("ctx/tool/helper.d/owner", m.uid + "\n");
  m.t.write("ctx/tool/helper.d/parent", "agent:coder\n");
  m.t.write("ctx/tool/helper.d/life", "owned\n");
  // The control for models: a model in the model tier runs.
  m.t.write("ctx/model/real", "#!/bin/sh\necho model-ran\n", 0755);
  m.coder("",
          "allow coder_t tool:echo-model execute\nallow coder_t model:echo-model use\nallow coder_t model:real use\n"
          "allow coder_t agent:helper start\nallow coder_t agent:helper read\n");
  RunResult r = m.sh(
      "echo \"path=$CTX_PATH\"; /ctx/bin/ctx model real </dev/null; echo rc=$?; "
      "/ctx/bin/ctx model echo-model </dev/null; echo rc=$?; /ctx/bin/ctx agent start helper; echo rc=$?; "
      "/ctx/bin/ctx tool echo-model; echo rc=$?");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("path=/ctx/tool:/ctx/home/" + m.uid + "/tool\n") != std::string::npos);
  CHECK(r.out.find("model-ran\nrc=0\n") != std::string::npos);
  CHECK(r.out.find("rc=2\n") != std::string::npos);  // ctx model: ENOENT, not the tool
  CHECK(count_of(r.out, "tool-ran\n") == 1);         // only ctx tool ran it
  CHECK(r.out.find("tool-ran\nrc=0\n") != std::string::npos);
  CHECK(m.left().empty());
  CHECK(r.out.find("MARK-") == std::string::npos);
  CHECK(r.err.find("MARK-") == std::string::npos);
  CHECK(!m.t.dir().read("ctx/home/" + m.uid + "/agent/coder/session/default/events.jsonl").empty());
  CHECK(!fs::exists(m.t.root() + "/home/" + m.uid + "/agent/helper"));  // helper never started
}

TEST_CASE("conformance: a tool's .d/ is the one beside the executable found, not a same-named one in another tier",
          "[root][userns]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  MarkTree m(*u);
  // The system tier (first on CTX_PATH) has twin.d/ with a policy that
  // refuses coder, but no executable twin; the user tier has the tool.
  const std::string refuse = "allow other_t tool:twin execute\n";
  m.t.write("ctx/tool/twin.d/policy", refuse);
  m.t.write("ctx/home/" + m.uid + "/tool/twin", "#!/bin/sh\necho twin-ran\n", 0755);
  m.coder("", "allow coder_t tool:twin execute\n");
  RunResult r = m.sh("/ctx/bin/ctx tool twin; echo rc=$?");
  INFO(r.out << r.err);
  CHECK(r.out == "twin-ran\nrc=0\n");
  // The control: the same policy beside the executable refuses.
  m.t.write("ctx/home/" + m.uid + "/tool/twin.d/policy", refuse);
  RunResult c = m.sh("/ctx/bin/ctx tool twin; echo rc=$?");
  INFO(c.out << c.err);
  CHECK(c.out == "rc=13\n");
  CHECK(c.err.find("\"reason\":\"tool_policy\"") != std::string::npos);
}

TEST_CASE("conformance: status follows the runtime through start, ready, busy, idle, stopping and dead",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  const std::string status = t.root() + "/agent/coder.d/status";
  auto sp = t.spawn({"coder", "--", "/probe", "sleep:1", "notify:READY=1", "sleep:1", "notify:CTX_STATE=busy",
                     "sleep:1", "notify:CTX_STATE=idle", "sleep:1", "notify:STOPPING=1", "sleep:1"},
                    m.as);
  CHECK(ctx::test::wait_for_file(status, "start\n"));
  CHECK(ctx::test::wait_for_file(status, "ready\n"));
  CHECK(ctx::test::wait_for_file(status, "busy\n"));
  CHECK(ctx::test::wait_for_file(status, "idle\n"));
  CHECK(ctx::test::wait_for_file(status, "stopping\n"));
  RunResult r = ctx::test::wait_command(sp, 30);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(ctx::test::read_file(status) == "dead\n");
}
