// A sandbox without network tells its agent why (docs/models.md, "Without
// network"): the HTTP proxy its environment names answers every request
// 403 with the cause and the policy line that would allow it, where the
// agent's tools would otherwise report a failed name lookup.
#include <catch2/catch.hpp>

#include <string>

#include "test/support/launch.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

// Named within the CTX tree, never by the host's path.
std::string refusal() {
  return "ctx-agent-run: EACCES: agent coder has no network: its policy grants none, so nothing beyond the "
         "sandbox's loopback is reachable (name lookups fail for the same reason). This is the sandbox's policy, "
         "not a fault; retrying will not help. To allow it, add 'allow coder_t network:default connect' to the "
         "policy of coder (agent/coder.d/policy in its CTX tree) and launch again.";
}

// How many of the sandbox's processes are the model endpoint.
constexpr const char* kProcesses = "echo endpoints: $(cat /proc/[0-9]*/comm 2>/dev/null | grep -c ctx-model-endpo)";

}  // namespace

TEST_CASE("without network, the HTTP proxy refuses with the cause and the fix", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder");
  RunResult r = t.launch({"coder", "--", "/bin/sh", "-c",
                          std::string(kProcesses) +
                              "; echo \"proxy=$HTTPS_PROXY $HTTP_PROXY $https_proxy $http_proxy no=$NO_PROXY $no_proxy\""
                              "; curl -sS https://example.com/; echo rc=$?"
                              "; curl -sS http://example.com/x; echo rc=$?"
                              "; curl -sS -v https://example.com/ 2>&1 | grep -i '^< x-ctx-refused'"
                              "; /usr/bin/python3 -c 'import urllib.request as u; u.urlopen(\"https://pypi.org/\")' "
                              "2>&1 | tail -1"
                              "; " +
                              kProcesses},
                         m.as);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // Started at the first connection, not before.
  CHECK(r.out.rfind("endpoints: 0\n", 0) == 0);
  CHECK(r.out.find("endpoints: 1\n") != std::string::npos);
  const std::string url = "http://127.0.0.1:7180";
  CHECK(r.out.find("proxy=" + url + " " + url + " " + url + " " + url +
                   " no=localhost,127.0.0.1,::1 localhost,127.0.0.1,::1\n") != std::string::npos);
  // HTTPS: the CONNECT refused (curl says only the status; -v shows why).
  CHECK(r.err.find("curl: (56) CONNECT tunnel failed, response 403\n") != std::string::npos);
  CHECK(r.out.find("rc=56\n") != std::string::npos);
  CHECK(r.out.find("< X-Ctx-Refused: " + refusal()) != std::string::npos);
  // Plain HTTP: the answer's body is the cause and the fix.
  CHECK(r.out.find(refusal() + "\nrc=0\n") != std::string::npos);
  CHECK(r.out.find("urllib.error.URLError: <urlopen error Tunnel connection failed: 403 Forbidden>\n") !=
        std::string::npos);
}

TEST_CASE("the proxy variables: the owner's env file wins, none with the network", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"env", "HTTPS_PROXY=http://proxy.example:3128\nNO_PROXY=.internal\n"}});
  t.agent("netter", {{"policy", "allow netter_t network:default connect\n"}});
  const std::string show = "echo \"[$HTTPS_PROXY][$HTTP_PROXY][$NO_PROXY][$no_proxy]\"";
  RunResult own = t.launch({"coder", "--", "/bin/sh", "-c", show}, m.as);
  REQUIRE(own.exit_code == 0);
  CHECK(own.out == "[http://proxy.example:3128][http://127.0.0.1:7180][.internal][localhost,127.0.0.1,::1]\n");
  RunResult net = t.launch({"netter", "--", "/bin/sh", "-c", show + "; " + kProcesses}, m.as);
  REQUIRE(net.exit_code == 0);
  CHECK(net.out == "[][][][]\nendpoints: 0\n");
}
