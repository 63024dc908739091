// `ctx model` (issue 12) from inside real sandboxes, launched by root for
// the test user and by the test user: the model runs in a sandbox of its
// own with its credentials, and sees nothing of the agent's.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "test/support/facility.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
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
    t.write("ctx/model/debug/fenced.d/policy", "allow other_t model:debug/fenced use\n");
    t.write("data/f", "project\n");
    t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.dir().path() +
                                    "/data\t/work\trw\tbind,nosuid,nodev\n"},
                      {"policy",
                       "allow coder_t model:debug/echo use\nallow coder_t model:debug/spy use\n"
                       "allow coder_t model:debug/fenced use\nallow coder_t tool:fs.read execute\n"}});
  }
  RunResult sh(const std::string& cmd) { return t.launch({"coder", "--", "/bin/sh", "-c", cmd}, as); }
};

ModelTree make_tree() {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  TestUser as = ctx::test::current_facility() == "root" ? TestUser{0, 0, "root"} : *u;
  return ModelTree(*u, as);
}

nlohmann::json first_json_line(const std::string& err) { return nlohmann::json::parse(err.substr(0, err.find('\n'))); }

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
  std::string log = m.t.dir().read("ctx/agent/coder.d/log");
  CHECK(log.find("\"event\":\"model.call\",\"object\":\"model/debug/spy\",\"status\":\"ok\"") != std::string::npos);
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
