// The real coding-agent CLIs (issue 25) under ctx-agent-run, made by
// `ctx new --template`, with NO network grant: the CLI reaches its model
// only through the endpoint in its sandbox (127.0.0.1:7180), which goes
// through the model gate to the template's forwarding model (its own
// sandbox, cap network), which calls the scripted fake API
// (test/fake_api/fake_api.py) on the host's loopback with the key of its
// .d/env. Launched by root and by the unprivileged test user, each owning
// its agent. [agents]: skipped with the reason when the CLIs are not
// installed (scripts/install-agents).
#include <catch2/catch.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/facility.hpp"
#include "test/support/fake_api.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

namespace {

using ctx::test::TestUser;

// The key the forwarder holds (the model's .d/env); the tool call's probe
// puts it together at run time, so that no command line holds it.
const std::string kKeyHead = "sk-fwd-";
const std::string kKeyTail = "key-of-the-forwarder";
const std::string kKey = kKeyHead + kKeyTail;

// One template's facts.
struct Cli {
  std::string tmpl;                // ctx new --template
  std::string model;               // the model entry it writes
  std::string upstream_suffix;     // appended to the fake API's URL
  std::string tool;                // the tool the fake API calls
  std::string tool_arg;            // the tool's argument holding the command
  std::vector<std::string> args;   // the headless task
  std::string path;                // what the fake API receives
  std::string key_header;          // where it receives the key
  std::string key_prefix;
  std::string result_marker;       // in the second call's body: the tool's result
};

Cli claude() {
  return {"claude-code", "anthropic/api", "", "Bash", "command", {"-p", "write the file"}, "/v1/messages?beta=true",
          "x-api-key", "", "\"tool_result\""};
}

Cli codex() {
  return {"codex", "openai/api", "/v1", "exec_command", "cmd", {"exec", "--skip-git-repo-check", "write the file"},
          "/v1/responses", "authorization", "Bearer ", "\"function_call_output\""};
}

// The tool call: writes /work/out.txt, the agent's token to
// /work/token.txt, and what its probes found to /work/probe.txt: the
// forwarder's key in the environment, under /ctx, the home, /tmp, /run and
// in /proc/*/environ; the network (curl to an address, what the proxy
// answers it, a DNS lookup); a
// host path outside its mounts (the model's .d/env as the host names it).
std::string tool_command(const std::string& outside) {
  return "echo hello from the tool call > /work/out.txt; printf %s \"$CTX_MODEL_TOKEN\" > /work/token.txt; k=" +
         kKeyHead + "; k=${k}" + kKeyTail +
         "; { echo env=$(env | grep -c \"$k\"); grep -rl \"$k\" /ctx \"$HOME\" /tmp /run /proc/[0-9]*/environ "
         "2>/dev/null; curl -fsS -m 5 http://1.1.1.1 >/dev/null 2>&1 && echo curl-ok || echo curl-failed; "
         "echo why=$(curl -s -m 5 http://1.1.1.1 | grep -c 'has no network: its policy grants none'); "
         "getent hosts example.com >/dev/null 2>&1 && echo dns-ok || echo dns-failed; cat " +
         outside + " >/dev/null 2>&1 && echo read-ok || echo read-failed; } > /work/probe.txt";
}

// Runs a shell script as `as` in `home`, with the built ctx first on PATH
// and the CLIs' install dir as CTX_AGENTS_DIR.
ctx::test::RunResult sh_as(const TestUser& as, const ctx::test::TempDir& home, const std::string& script) {
  const std::string path = "PATH=" + ctx::test::built("ctx") + ":/usr/bin:/bin";
  return ctx::test::run_command({"/bin/sh", "-ec", script}, as, 60,
                                {path, "HOME=" + home.path(), "CTX_AGENTS_DIR=" + ctx::test::agents_dir()});
}

// `ctx init` and `ctx new coder --template T --project work` as `as` in a
// fresh home, the model pointed at the fake API with the test's key, and
// `edit` (a shell script run in the CTX root) after that. The model entry
// is the built forwarder itself (the contract allows an entry that is
// the forwarder): the template's entry execs the installed one, which a
// build tree does not have.
struct Project {
  ctx::test::TempDir home;
  std::string root = home / "ctx";
  void make(const TestUser& as, const Cli& c, const std::string& api_url, const std::string& edit) {
    if (::geteuid() == 0) REQUIRE(::chown(home.path().c_str(), as.uid, as.gid) == 0);
    const std::string env = "model/" + c.model + ".d/env";
    auto made = sh_as(as, home,
                      "cd " + home.path() + "\nmkdir work\nctx init --ctx-root ctx >/dev/null\nctx new coder --template " +
                          c.tmpl + " --project work --ctx-root " + root + " >/dev/null\ncd ctx\nsed -i -e 's#^CTX_UPSTREAM_URL=.*#CTX_UPSTREAM_URL=" +
                          api_url + c.upstream_suffix + "#' -e 's#^CTX_UPSTREAM_KEY=.*#CTX_UPSTREAM_KEY=" + kKey + "#' " +
                          env + "\ncp " + ctx::test::built("models/ctx-model-forward") + " model/" + c.model + "\n" +
                          edit);
    INFO(made.out << made.err);
    REQUIRE(made.exit_code == 0);
  }
  std::vector<std::string> argv(const Cli& c) const {
    std::vector<std::string> a{ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", root, "coder", "--",
                               "/ctx/agent/coder"};
    a.insert(a.end(), c.args.begin(), c.args.end());
    return a;
  }
  std::string read(const std::string& rel) const { return ctx::test::read_file(home / rel); }
};

std::string script_of(const Cli& c, const std::string& command) {
  return nlohmann::json::array({{{"tool", c.tool}, {"input", {{c.tool_arg, command}}}}, {{"text", "done"}}}).dump();
}

std::vector<TestUser> launchers() {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  return {TestUser{0, 0, "root"}, *u};
}

void completes_a_task(const Cli& c) {
  for (const TestUser& as : launchers()) {
    INFO("launched by " << as.name);
    Project p;
    // The probe's path outside the mounts: the model's .d/env as the host names it.
    ctx::test::FakeApi api(script_of(c, tool_command(p.root + "/model/" + c.model + ".d/env")));
    p.make(as, c, api.url(), "");
    auto run = ctx::test::run_command(p.argv(c), as, 180);
    INFO(run.out << run.err);
    CHECK(run.exit_code == 0);
    CHECK(run.out == "done\n");
    CHECK(p.read("work/out.txt") == "hello from the tool call\n");
    struct stat st {};
    REQUIRE(::stat((p.home / "work/out.txt").c_str(), &st) == 0);
    CHECK(st.st_uid == as.uid);
    CHECK(p.read("work/probe.txt") == "env=0\ncurl-failed\nwhy=1\ndns-failed\nread-failed\n");
    const std::string token = p.read("work/token.txt");
    CHECK(token.size() == 64);
    const auto requests = api.requests();
    REQUIRE(requests.size() == 2);
    for (const auto& r : requests) {
      CHECK(r["method"] == "POST");
      CHECK(r["path"] == c.path);
      CHECK(r["headers"][c.key_header] == c.key_prefix + kKey);
      CHECK(r.dump().find(token) == std::string::npos);  // the agent's token never leaves the endpoint
    }
    CHECK(requests[1]["body"].dump().find(c.result_marker) != std::string::npos);
    CHECK(api.log_text().find(token) == std::string::npos);
  }
}

}  // namespace

TEST_CASE("Claude Code with no network writes /work/out.txt by a real Bash tool call through the endpoint and the "
          "forwarder; the fake API gets the forwarder's key, the tool call finds no key and no network",
          "[agents]") {
  completes_a_task(claude());
}

TEST_CASE("Codex with no network writes /work/out.txt by a real exec_command tool call through the endpoint and the "
          "forwarder; the fake API gets the forwarder's key, the tool call finds no key and no network",
          "[agents]") {
  completes_a_task(codex());
}

namespace {

// No `use` grant of its model (another model granted, so that the
// endpoint runs): the endpoint answers 403, the CLI reports it, the
// agent's .d/log records the call denied, the fake API sees nothing.
ctx::test::RunResult refused(const Cli& c, const TestUser& as) {
  Project p;
  ctx::test::FakeApi api(script_of(c, "true"));
  p.make(as, c, api.url(), "sed -i 's#model:" + c.model + " use#model:other/model use#' agent/coder.d/policy\n"
         "echo CLAUDE_CODE_MAX_RETRIES=0 >> agent/coder.d/env\n");
  auto run = ctx::test::run_command(p.argv(c), as, 90);
  CHECK(api.requests().empty());
  const std::string log = p.read("ctx/agent/coder.d/log");
  INFO(log);
  CHECK(log.find("\"object\":\"model/" + c.model + "\",\"reason\":\"agent_policy\"") != std::string::npos);
  CHECK(log.find("\"session\":\"default\",\"status\":\"denied\"") != std::string::npos);
  CHECK(log.find("\"type\":\"model.call\"") != std::string::npos);
  return run;
}

}  // namespace

TEST_CASE("Claude Code with no grant of its model reports the endpoint's 403, recorded denied", "[agents]") {
  for (const TestUser& as : launchers()) {
    INFO("launched by " << as.name);
    auto run = refused(claude(), as);
    INFO(run.out << run.err);
    CHECK(run.exit_code == 1);
    CHECK(run.out ==
          "Failed to authenticate. API Error: 403 the policy of coder has no 'allow coder_t model:anthropic/api use'\n");
  }
}

TEST_CASE("Codex with no grant of its model reports the endpoint's 403, recorded denied", "[agents]") {
  for (const TestUser& as : launchers()) {
    INFO("launched by " << as.name);
    auto run = refused(codex(), as);
    INFO(run.out << run.err);
    CHECK(run.exit_code == 1);
    CHECK(run.out == "");
    CHECK(run.err.find("ERROR: unexpected status 403 Forbidden: the policy of coder has no 'allow coder_t "
                       "model:openai/api use'") != std::string::npos);
  }
}

namespace {

// The processes below `pid`, by their parents in /proc.
std::set<int> descendants(int pid) {
  std::set<int> out{pid};
  for (bool grew = true; grew;) {
    grew = false;
    DIR* d = ::opendir("/proc");
    REQUIRE(d != nullptr);
    while (dirent* e = ::readdir(d)) {
      const int p = std::atoi(e->d_name);
      if (p <= 0 || out.count(p) != 0) continue;
      std::ifstream in("/proc/" + std::to_string(p) + "/stat");
      std::string stat;
      std::getline(in, stat);
      const auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 2));
      char state = 0;
      int ppid = 0;
      rest >> state >> ppid;
      if (out.count(ppid) != 0) grew = out.insert(p).second || grew;
    }
    ::closedir(d);
  }
  return out;
}

bool all_gone(const std::set<int>& pids, int timeout_ms) {
  for (int waited = 0;; waited += 50) {
    bool any = false;
    for (int p : pids) any = any || ::kill(p, 0) == 0;
    if (!any) return true;
    if (waited >= timeout_ms) return false;
    ::usleep(50000);
  }
}

}  // namespace

TEST_CASE("SIGKILL of the supervisor while the forwarder streams an answer leaves no process, mount or endpoint",
          "[agents]") {
  for (const Cli& c : {claude(), codex()}) {
    for (const TestUser& as : launchers()) {
      INFO(c.tmpl << " launched by " << as.name);
      Project p;
      // One slow answer: 40 deltas, 1 s apart.
      ctx::test::FakeApi api(
          nlohmann::json::array({{{"text", std::vector<std::string>(40, "slow ")}, {"delay", 1}}}).dump());
      p.make(as, c, api.url(), "");
      auto sp = ctx::test::spawn_command(p.argv(c), as);
      for (int i = 0; i < 600 && api.requests().empty(); ++i) ::usleep(50000);
      REQUIRE_FALSE(api.requests().empty());
      ::usleep(1500000);  // the answer streams
      const std::set<int> tree = descendants(sp.pid);
      // The supervisor, its watchdog, the sandbox's init, the view's server,
      // the CLI, the endpoint, the model's sandbox and the forwarder at least.
      CHECK(tree.size() >= 8);
      REQUIRE(::kill(sp.pid, SIGKILL) == 0);
      auto r = ctx::test::wait_command(sp, 30);
      CHECK(r.exit_code == 128 + SIGKILL);
      CHECK(all_gone(tree, 10000));
      CHECK(ctx::test::read_file("/proc/self/mountinfo").find(p.home.path()) == std::string::npos);
      CHECK(ctx::test::processes_mentioning(p.root).empty());
    }
  }
}
