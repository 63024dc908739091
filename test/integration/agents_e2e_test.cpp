// The real coding-agent CLIs (issue 25) under ctx-agent-run, made by
// `ctx new --template`, against the scripted fake API
// (test/fake_api/fake_api.py) on loopback, launched by root and by the
// unprivileged test user, each owning its agent. [agents]: skipped with
// the reason when the CLIs are not installed (scripts/install-agents).
//
// Until the HTTP model endpoint lands, these run the network-granted
// variant: the template's agent plus `network:default connect`, talking
// to the fake API directly with a test key of its own. The cases with no
// network, through the endpoint and the forwarder, replace it then.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "test/support/facility.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

namespace {

using ctx::test::TestUser;

std::string source(const std::string& rel) {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  return std::string(src) + "/" + rel;
}

// The fake API server, serving a script of turns on an ephemeral port of
// 127.0.0.1; stopped (SIGTERM to its process group) when destroyed.
class FakeApi {
 public:
  explicit FakeApi(const std::string& script) {
    dir_.write("script.json", script);
    proc_ = ctx::test::spawn_command({"/usr/bin/python3", source("test/fake_api/fake_api.py"), "--script",
                                      dir_ / "script.json", "--log", dir_ / "log.jsonl", "--port-file",
                                      dir_ / "port"});
    for (int i = 0; i < 500 && port_ == 0; ++i) {
      std::ifstream in(dir_ / "port");
      if (!(in >> port_)) ::usleep(20000);
    }
    REQUIRE(port_ != 0);
  }
  FakeApi(const FakeApi&) = delete;
  FakeApi& operator=(const FakeApi&) = delete;
  ~FakeApi() {
    ::kill(-proc_.pid, SIGTERM);
    ctx::test::wait_command(proc_, 10);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  /// The requests it received, in order (fake_api.py's log lines).
  std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(dir_ / "log.jsonl");
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

 private:
  ctx::test::TempDir dir_;
  ctx::test::Spawned proc_;
  int port_ = 0;
};

// Runs a shell script as `as` in `home`, with the built ctx first on PATH
// and the CLIs' install dir as CTX_AGENTS_DIR.
ctx::test::RunResult sh_as(const TestUser& as, const ctx::test::TempDir& home, const std::string& script) {
  const std::string path = "PATH=" + ctx::test::built("ctx") + ":/usr/bin:/bin";
  return ctx::test::run_command({"/bin/sh", "-ec", script}, as, 60,
                                {path, "HOME=" + home.path(), "CTX_AGENTS_DIR=" + ctx::test::agents_dir()});
}

// The key the network-granted variant's agent holds itself (no endpoint
// yet to stand a token in its place).
const std::string kTestKey = "test-key-of-the-network-granted-variant";

// The task every case scripts: one shell tool call that writes a file in
// the project, then a final answer.
const std::string kCommand = "echo hello from the tool call > /work/out.txt";

// What a launch left for the checks.
struct Outcome {
  ctx::test::RunResult run;
  std::string out_txt;  // /work/out.txt as the host sees it
  uid_t out_uid = static_cast<uid_t>(-1);
  std::vector<nlohmann::json> requests;
};

// `ctx init` and `ctx new NAME --template T --project` as `as`, the
// network-granted variant's edits (`edit`, a shell script run in the
// CTX root with the fake API's URL as $URL), then a headless launch of
// the CLI with `args`, all in a fresh home of `as`.
Outcome run_template(const TestUser& as, const std::string& tmpl, const std::string& script, const std::string& edit,
                     const std::vector<std::string>& args) {
  FakeApi api(script);
  ctx::test::TempDir home;
  if (::geteuid() == 0) REQUIRE(::chown(home.path().c_str(), as.uid, as.gid) == 0);
  const std::string root = home / "ctx";
  auto made = sh_as(as, home,
                    "cd " + home.path() + "\nmkdir work\nctx init --ctx-root ctx >/dev/null\n" +
                        "ctx new coder --template " + tmpl + " --project work --ctx-root " + root +
                        "\ncd ctx\nURL=" + api.url() + "\n" + edit);
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  Outcome o;
  std::vector<std::string> argv{ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", root, "coder", "--",
                                "/ctx/agent/coder"};
  argv.insert(argv.end(), args.begin(), args.end());
  o.run = ctx::test::run_command(argv, as, 120);
  struct stat st {};
  if (::stat((home / "work/out.txt").c_str(), &st) == 0) {
    o.out_uid = st.st_uid;
    o.out_txt = ctx::test::read_file(home / "work/out.txt");
  }
  o.requests = api.requests();
  return o;
}

std::vector<TestUser> launchers() {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  return {TestUser{0, 0, "root"}, *u};
}

}  // namespace

TEST_CASE("Claude Code from ctx new --template claude-code, network granted, writes /work/out.txt by a real Bash "
          "tool call, as the agent's uid",
          "[agents]") {
  const std::string script = nlohmann::json::array({{{"tool", "Bash"}, {"input", {{"command", kCommand}}}},
                                                    {{"text", "done"}}})
                                 .dump();
  const std::string edit = "sed -i \"s#^ANTHROPIC_BASE_URL=.*#ANTHROPIC_BASE_URL=$URL#\" agent/coder.d/env\n"
                           "echo ANTHROPIC_API_KEY=" +
                           kTestKey +
                           " >> agent/coder.d/env\n"
                           "echo 'allow coder_t network:default connect' >> agent/coder.d/policy\n";
  for (const TestUser& as : launchers()) {
    INFO("launched by " << as.name);
    Outcome o = run_template(as, "claude-code", script, edit, {"-p", "write the file"});
    INFO(o.run.out << o.run.err);
    CHECK(o.run.exit_code == 0);
    CHECK(o.run.out == "done\n");
    CHECK(o.out_txt == "hello from the tool call\n");
    CHECK(o.out_uid == as.uid);
    REQUIRE(o.requests.size() == 2);
    for (const auto& r : o.requests) {
      CHECK(r["method"] == "POST");
      CHECK(r["path"] == "/v1/messages?beta=true");
      CHECK(r["headers"]["x-api-key"] == kTestKey);
    }
    // The second call carries the tool's result.
    CHECK(o.requests[1]["body"].dump().find("\"tool_result\"") != std::string::npos);
  }
}

TEST_CASE("Codex from ctx new --template codex, network granted, writes /work/out.txt by a real exec_command "
          "tool call, as the agent's uid",
          "[agents]") {
  const std::string script = nlohmann::json::array({{{"tool", "exec_command"}, {"input", {{"cmd", kCommand}}}},
                                                    {{"text", "done"}}})
                                 .dump();
  const std::string edit = "sed -i \"s#^base_url = .*#base_url = \\\"$URL/v1\\\"#\" home/*/agent/coder/.codex/config.toml\n"
                           "echo OPENAI_API_KEY=" +
                           kTestKey +
                           " >> agent/coder.d/env\n"
                           "echo 'allow coder_t network:default connect' >> agent/coder.d/policy\n";
  for (const TestUser& as : launchers()) {
    INFO("launched by " << as.name);
    Outcome o = run_template(as, "codex", script, edit, {"exec", "--skip-git-repo-check", "write the file"});
    INFO(o.run.out << o.run.err);
    CHECK(o.run.exit_code == 0);
    CHECK(o.run.out == "done\n");
    CHECK(o.out_txt == "hello from the tool call\n");
    CHECK(o.out_uid == as.uid);
    REQUIRE(o.requests.size() == 2);
    for (const auto& r : o.requests) {
      CHECK(r["method"] == "POST");
      CHECK(r["path"] == "/v1/responses");
      CHECK(r["headers"]["authorization"] == "Bearer " + kTestKey);
    }
    CHECK(o.requests[1]["body"].dump().find("\"function_call_output\"") != std::string::npos);
  }
}
