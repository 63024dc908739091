// The runtime's cwd, environment and hostname: exactly what the control
// files say, and nothing of the caller's.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "test/support/launch.hpp"

using ctx::test::CtxTree;
using ctx::test::probe;
using ctx::test::run_probe;
using ctx::test::RunResult;
using nlohmann::json;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

}  // namespace

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
      // No network: the proxy that says so (docs/models.md, "Without network").
      "HTTP_PROXY=http://127.0.0.1:7180",
      "HTTPS_PROXY=http://127.0.0.1:7180",
      "http_proxy=http://127.0.0.1:7180",
      "https_proxy=http://127.0.0.1:7180",
      "NO_PROXY=localhost,127.0.0.1,::1",
      "no_proxy=localhost,127.0.0.1,::1",
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
