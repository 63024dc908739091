// The HTTP model endpoint (docs/models.md, "The HTTP endpoint") from
// inside real sandboxes, launched by root for the test user and by the
// test user: curl inside the agent's sandbox calls models through the
// endpoint, which asks the supervisor's model gate like `ctx model`.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include "test/support/facility.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;
using ctx::test::TestUser;

namespace {

// A CGI model that tells what it got: its variables, the body's size.
constexpr const char* kCgiModel =
    "#!/bin/sh\n"
    "n=$(wc -c)\n"
    "printf 'Status: 201 Created\\r\\nContent-Type: text/plain\\r\\nX-Model: %s\\r\\n\\r\\n' \"$CTX_MODEL\"\n"
    "echo \"gw=$GATEWAY_INTERFACE proto=$SERVER_PROTOCOL method=$REQUEST_METHOD path=$PATH_INFO "
    "query=$QUERY_STRING type=${CONTENT_TYPE-none} length=${CONTENT_LENGTH-none} test=${HTTP_X_TEST-none} "
    "auth=${HTTP_AUTHORIZATION-none} key=${HTTP_X_API_KEY-none} secret=$SECRET body=$n\"\n";

// Prints a line, sleeps, prints another: a streamed answer.
constexpr const char* kSlowModel =
    "#!/bin/sh\n"
    "printf 'Content-Type: text/event-stream\\n\\n'\n"
    "echo first\n"
    "sleep 1\n"
    "echo second\n";

// Streams for ever (until its caller goes away): a process to look for.
constexpr const char* kEndlessModel =
    "#!/bin/sh\n"
    "printf 'Content-Type: text/plain\\n\\n'\n"
    "while :; do echo endless-model-tick; sleep 0.2; done\n";

struct EndpointTree {
  TestUser as;
  CtxTree t;
  std::string uid;

  EndpointTree(const TestUser& owner, const TestUser& launcher, const std::string& extra_policy = "")
      : as(launcher), t(owner), uid(std::to_string(owner.uid)) {
    t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
    t.write("ctx/model/debug/cgi", kCgiModel, 0755);
    t.write("ctx/model/debug/cgi.d/env", "SECRET=from-model-env\n");
    t.write("ctx/model/debug/slow", kSlowModel, 0755);
    t.write("ctx/model/debug/endless", kEndlessModel, 0755);
    t.write("ctx/model/debug/plain", "#!/bin/sh\necho no header block\n", 0755);
    t.write("ctx/model/openai/gpt-4o", kCgiModel, 0755);
    t.dir().symlink("/ctx/model/debug/cgi", "ctx/model/main");
    t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"},
                      {"policy",
                       "allow coder_t model:debug/cgi use\nallow coder_t model:debug/slow use\n"
                       "allow coder_t model:debug/endless use\nallow coder_t model:debug/plain use\n"
                       "allow coder_t model:main use\n" +
                           extra_policy}});
  }
  std::vector<nlohmann::json> lines(const std::string& rel) {
    std::vector<nlohmann::json> out;
    std::istringstream in(t.dir().read(rel));
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }
  std::vector<nlohmann::json> calls() {
    std::vector<nlohmann::json> out;
    for (auto& e : lines("ctx/home/" + uid + "/agent/coder/session/default/events.jsonl"))
      if (e["type"] == "model.call") out.push_back(e);
    return out;
  }
  RunResult sh(const std::string& cmd) { return t.launch({"coder", "--", "/bin/sh", "-c", cmd}, as); }
};

EndpointTree make_tree(const std::string& extra_policy = "") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  TestUser as = ctx::test::current_facility() == "root" ? TestUser{0, 0, "root"} : *u;
  return EndpointTree(*u, as, extra_policy);
}

// curl with the token, quiet, failing on no HTTP error.
const std::string kCurl = "curl -sS -H \"x-api-key: $CTX_MODEL_TOKEN\" ";

}  // namespace

TEST_CASE("the model endpoint: a model call over HTTP from inside the sandbox runs the model as a CGI program", "[root][userns]") {
  EndpointTree m = make_tree();
  RunResult r = m.sh("echo url=$CTX_MODEL_URL; [ \"$ANTHROPIC_API_KEY\" = \"$CTX_MODEL_TOKEN\" ] && echo sdk-key=token; " +
                     kCurl +
                     "-i -H 'X-Test: yes' -H \"Authorization: Bearer $CTX_MODEL_TOKEN\" -H 'Content-Type: "
                     "application/json' --data-binary '{\"q\":1}' \"$CTX_MODEL_URL/debug/cgi/v1/messages?beta=true\" "
                     "| tr -d '\\r' | grep -v -i '^date:'");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "url=http://127.0.0.1:7180\nsdk-key=token\n"
        "HTTP/1.1 201 Created\n"
        "Content-Type: text/plain\n"
        "X-Model: debug/cgi\n"
        "Transfer-Encoding: chunked\n"
        "\n"
        "gw=CGI/1.1 proto=HTTP/1.1 method=POST path=/v1/messages query=beta=true type=application/json length=7 "
        "test=yes auth=none key=none secret=from-model-env body=7\n");
  auto calls = m.calls();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0]["object"] == "model/debug/cgi");
  CHECK(calls[0]["status"] == "ok");
  CHECK(calls[0]["exit_status"] == 0);
}
