// ctx-model-forward (issue 25): run as a CGI program, as the model
// endpoint runs it, against the scripted fake API over http on loopback
// and over https with a test CA; and as a model in its own sandbox
// through `ctx model`. Run as root ([root]) and as the test user
// ([userns]).
#include <catch2/catch.hpp>

#include <chrono>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test/support/facility.hpp"
#include "test/support/fake_api.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::FakeApi;
using ctx::test::RunResult;
using ctx::test::TempDir;
using ctx::test::TestUser;
using nlohmann::json;

namespace {

const std::string kKey = "sk-fwd-test-0123456789";
const std::string kAgentToken = "agent-token-abcdef";

// Who runs the forwarder: root in [root], the test user in [userns].
std::optional<TestUser> runner() {
  if (ctx::test::current_facility() == "root") return std::nullopt;
  auto u = ctx::test::test_user();
  REQUIRE(u);
  return u;
}

// A directory the test user can read (the request body, the CA).
struct Shared {
  TempDir d;
  Shared() { ::chmod(d.path().c_str(), 0755); }
};

std::vector<std::string> anthropic_env(const std::string& url) {
  return {"CTX_UPSTREAM_URL=" + url, "CTX_UPSTREAM_KEY_HEADER=x-api-key", "CTX_UPSTREAM_KEY=" + kKey};
}

// The CGI variables of an agent's POST /v1/messages?beta=true, with the
// agent's token where its SDK puts a key.
std::vector<std::string> cgi_post(std::vector<std::string> env, const std::string& path = "/v1/messages") {
  for (const char* v : {"GATEWAY_INTERFACE=CGI/1.1", "SERVER_PROTOCOL=HTTP/1.1", "REQUEST_METHOD=POST",
                        "QUERY_STRING=beta=true", "CONTENT_TYPE=application/json", "HTTP_ANTHROPIC_VERSION=2023-06-01",
                        "HTTP_USER_AGENT=claude-cli/2.1 (test)", "HTTP_ACCEPT=application/json"})
    env.emplace_back(v);
  env.push_back("PATH_INFO=" + path);
  env.push_back("HTTP_X_API_KEY=" + kAgentToken);
  env.push_back("HTTP_AUTHORIZATION=Bearer " + kAgentToken);
  return env;
}

RunResult forward(const std::vector<std::string>& env, const std::string& body_file = "/dev/null") {
  return ctx::test::run_command(
      {"/bin/sh", "-c", "exec \"$0\" <\"$1\"", ctx::test::built("models/ctx-model-forward"), body_file}, runner(), 60,
      env);
}

std::string error_answer(int status, const std::string& reason, const std::string& type, const std::string& message) {
  return "Status: " + std::to_string(status) + " " + reason + "\r\nContent-Type: application/json\r\n\r\n" +
         nlohmann::ordered_json{{"type", "error"},
                                {"error", {{"type", type}, {"message", "ctx-model-forward: " + message}}}}
             .dump() +
         "\n";
}

// The part of a CGI answer after its header block.
std::string body_of(const std::string& out) {
  std::size_t end = out.find("\r\n\r\n");
  return end == std::string::npos ? "" : out.substr(end + 4);
}

// A loopback port nothing listens on.
int closed_port() {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(s >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(s);
  return ntohs(a.sin_port);
}

}  // namespace

TEST_CASE("ctx-model-forward sends the configured key in the configured header, never the agent's", "[root][userns]") {
  FakeApi api(R"([{"text": "hello from upstream"}])");
  Shared s;
  s.d.write("body", R"({"model":"claude-test","max_tokens":10,"messages":[]})", 0644);

  SECTION("Anthropic: x-api-key") {
    RunResult r = forward(cgi_post(anthropic_env(api.url())), s.d / "body");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.rfind("Status: 200 OK\r\n", 0) == 0);
    CHECK(r.out.find("\r\nContent-Type: application/json\r\n") != std::string::npos);
    CHECK(json::parse(body_of(r.out))["content"][0]["text"] == "hello from upstream");
    auto reqs = api.requests();
    REQUIRE(reqs.size() == 1);
    const json& h = reqs[0]["headers"];
    CHECK(reqs[0]["path"] == "/v1/messages?beta=true");
    CHECK(reqs[0]["body"]["model"] == "claude-test");
    CHECK(h["x-api-key"] == kKey);
    CHECK_FALSE(h.contains("authorization"));
    CHECK(h["anthropic-version"] == "2023-06-01");
    CHECK(h["user-agent"] == "claude-cli/2.1 (test)");
    CHECK(h["accept"] == "application/json");
    CHECK(h["content-type"] == "application/json");
  }
  SECTION("OpenAI: Authorization: Bearer") {
    RunResult r = forward(cgi_post({"CTX_UPSTREAM_URL=" + api.url() + "/v1", "CTX_UPSTREAM_KEY_HEADER=Authorization",
                                    "CTX_UPSTREAM_KEY_PREFIX=Bearer ", "CTX_UPSTREAM_KEY=" + kKey},
                                   "/responses"),
                          s.d / "body");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    auto reqs = api.requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0]["path"] == "/v1/responses?beta=true");
    CHECK(reqs[0]["headers"]["authorization"] == "Bearer " + kKey);
    CHECK_FALSE(reqs[0]["headers"].contains("x-api-key"));
  }
  CHECK(api.log_text().find(kAgentToken) == std::string::npos);
}

TEST_CASE("ctx-model-forward sends each method as itself, with a body where the request has one", "[root][userns]") {
  FakeApi api(R"([{"text": "posted"}])");
  Shared s;
  s.d.write("body", "{}", 0644);
  for (const std::string method : {"GET", "HEAD", "POST"}) {
    std::vector<std::string> env = anthropic_env(api.url());
    env.insert(env.end(), {"GATEWAY_INTERFACE=CGI/1.1", "PATH_INFO=/", "REQUEST_METHOD=" + method});
    env.push_back("CONTENT_LENGTH=2");  // HEAD never sends it
    RunResult r = forward(env, s.d / "body");
    INFO(method << ": " << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.rfind(method == "POST" ? "Status: 404 Not Found\r\n" : "Status: 200 OK\r\n", 0) == 0);
  }
  auto reqs = api.requests();
  REQUIRE(reqs.size() == 3);
  CHECK(reqs[0]["method"] == "GET");
  CHECK(reqs[1]["method"] == "HEAD");
  CHECK(reqs[2]["method"] == "POST");
  CHECK(reqs[2]["body_bytes"] == 2);
  for (const auto& q : reqs) CHECK(q["headers"]["x-api-key"] == kKey);
}

TEST_CASE("ctx-model-forward over https verifies the upstream against the configured CA", "[root][userns]") {
  Shared s;
  ctx::test::TestCert cert = ctx::test::make_test_cert(s.d.path());
  FakeApi api(R"([{"text": "over tls"}])", &cert);
  s.d.write("body", R"({"model":"m"})", 0644);
  std::vector<std::string> env = cgi_post(anthropic_env(api.url()));

  SECTION("trusted through CTX_UPSTREAM_CAINFO") {
    env.push_back("CTX_UPSTREAM_CAINFO=" + cert.cert);
    RunResult r = forward(env, s.d / "body");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(json::parse(body_of(r.out))["content"][0]["text"] == "over tls");
    auto reqs = api.requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0]["headers"]["x-api-key"] == kKey);
  }
  SECTION("not trusted by the system's CAs: a 502 with libcurl's words") {
    RunResult r = forward(env, s.d / "body");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.out == error_answer(502, "Bad Gateway", "api_error",
                                "POST " + api.url() +
                                    "/v1/messages?beta=true: SSL certificate problem: self-signed certificate"));
    CHECK(api.requests().empty());
  }
}

TEST_CASE("ctx-model-forward relays a stream as it comes, its environment no longer holding the key",
          "[root][userns]") {
  // Seven events, 0.6 s apart.
  FakeApi api(R"([{"text": ["one", "two", "three"], "delay": 0.6}])");
  Shared s;
  s.d.write("body", R"({"model":"m","stream":true})", 0644);
  std::vector<std::string> env = cgi_post(anthropic_env(api.url()));
  const auto start = std::chrono::steady_clock::now();
  ctx::test::Spawned p = ctx::test::spawn_command(
      {"/bin/sh", "-c", "exec \"$0\" <\"$1\"", ctx::test::built("models/ctx-model-forward"), s.d / "body"}, runner(),
      env);
  std::string out, environ_seen;
  double first_event = -1, end = -1;
  while (true) {
    pollfd pfd{p.out_fd, POLLIN, 0};
    REQUIRE(::poll(&pfd, 1, 20000) == 1);
    char buf[4096];
    ssize_t n = ::read(p.out_fd, buf, sizeof buf);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (n <= 0) {
      end = t;
      break;
    }
    out.append(buf, static_cast<std::size_t>(n));
    if (first_event < 0 && out.find("event: message_start\n") != std::string::npos) {
      first_event = t;
      // The forwarder (sh exec'd it) is sending: what its /proc shows.
      environ_seen = ctx::test::read_file("/proc/" + std::to_string(p.pid) + "/environ");
    }
  }
  RunResult r = ctx::test::wait_command(p, 10);
  INFO(out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(out.rfind("Status: 200 OK\r\n", 0) == 0);
  CHECK(out.find("\r\nContent-Type: text/event-stream\r\n") != std::string::npos);
  CHECK(out.find("event: message_stop\n") != std::string::npos);
  REQUIRE(first_event >= 0);
  CHECK(end - first_event > 2.5);  // the six other events took 3.6 s
  // Its own environment block, read while it ran: the configuration is
  // there, the key wiped.
  CHECK(environ_seen.find("CTX_UPSTREAM_URL=" + api.url()) != std::string::npos);
  CHECK(environ_seen.find(kKey) == std::string::npos);
}

TEST_CASE("ctx-model-forward stops when its client goes away, in the middle of a stream", "[root][userns]") {
  FakeApi api(R"([{"text": ["one", "two", "three"], "delay": 0.6}])");
  Shared s;
  s.d.write("body", R"({"model":"m","stream":true})", 0644);
  ctx::test::Spawned p = ctx::test::spawn_command(
      {"/bin/sh", "-c", "exec \"$0\" <\"$1\"", ctx::test::built("models/ctx-model-forward"), s.d / "body"}, runner(),
      cgi_post(anthropic_env(api.url())));
  std::string out;
  while (out.find("event: message_start\n") == std::string::npos) {
    pollfd pfd{p.out_fd, POLLIN, 0};
    REQUIRE(::poll(&pfd, 1, 20000) == 1);
    char buf[4096];
    ssize_t n = ::read(p.out_fd, buf, sizeof buf);
    REQUIRE(n > 0);
    out.append(buf, static_cast<std::size_t>(n));
  }
  // The endpoint closes the pipe when the agent hangs up.
  const auto gone = std::chrono::steady_clock::now();
  ::close(p.out_fd);
  p.out_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  RunResult r = ctx::test::wait_command(p, 10);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - gone).count();
  CHECK(r.exit_code == 1);
  CHECK(r.err == "ctx-model-forward: writing the answer to stdout: write: EPIPE\n");
  CHECK(took < 2.0);  // at the next event's write, not at the stream's end 3 s later
}

TEST_CASE("ctx-model-forward streams a 5 MB body up, with its length or chunked", "[root][userns]") {
  FakeApi api(R"([{"text": "big"}])");
  Shared s;
  std::string body = R"({"model":"m","pad":")" + std::string(5 * 1024 * 1024 - 22, 'x') + "\"}";
  REQUIRE(body.size() == 5 * 1024 * 1024);
  s.d.write("body", body, 0644);
  RunResult sum = ctx::test::run_command({"/usr/bin/sha256sum", s.d / "body"});
  const std::string sha = sum.out.substr(0, 64);
  std::vector<std::string> env = cgi_post(anthropic_env(api.url()));

  SECTION("CONTENT_LENGTH given") {
    env.push_back("CONTENT_LENGTH=" + std::to_string(body.size()));
    RunResult r = forward(env, s.d / "body");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    auto reqs = api.requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0]["headers"]["content-length"] == "5242880");
    CHECK(reqs[0]["body_bytes"] == 5242880);
    CHECK(reqs[0]["body_sha256"] == sha);
  }
  SECTION("no CONTENT_LENGTH: sent chunked") {
    RunResult r = forward(env, s.d / "body");
    INFO(r.out << r.err);
    CHECK(r.exit_code == 0);
    auto reqs = api.requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0]["headers"]["transfer-encoding"] == "chunked");
    CHECK(reqs[0]["body_bytes"] == 5242880);
    CHECK(reqs[0]["body_sha256"] == sha);
  }
}

TEST_CASE("ctx-model-forward answers 502 in the API's JSON, naming the cause and never the key", "[root][userns]") {
  const std::string down = "http://127.0.0.1:" + std::to_string(closed_port());

  SECTION("the upstream is down") {
    RunResult r = forward(cgi_post(anthropic_env(down)));
    INFO(r.out << r.err);
    CHECK(r.exit_code == 1);
    // libcurl counts the milliseconds it tried ("after 0 ms").
    const std::string out = std::regex_replace(r.out, std::regex("after [0-9]+ ms"), "after N ms");
    CHECK(out == error_answer(502, "Bad Gateway", "api_error",
                              "POST " + down + "/v1/messages?beta=true: Failed to connect to 127.0.0.1 port " +
                                  down.substr(17) + " after N ms: Couldn't connect to server"));
    CHECK(r.out.find(kKey) == std::string::npos);
    CHECK(r.err.empty());
  }
  SECTION("no CTX_UPSTREAM_KEY") {
    RunResult r = forward(cgi_post({"CTX_UPSTREAM_URL=" + down, "CTX_UPSTREAM_KEY_HEADER=x-api-key"}));
    CHECK(r.exit_code == 1);
    CHECK(r.out == error_answer(502, "Bad Gateway", "api_error",
                                "CTX_UPSTREAM_KEY is not set: put the API key in the model's .d/env "
                                "(CTX_UPSTREAM_KEY=...)"));
  }
  SECTION("no CTX_UPSTREAM_URL") {
    RunResult r = forward(cgi_post({"CTX_UPSTREAM_KEY_HEADER=x-api-key", "CTX_UPSTREAM_KEY=" + kKey}));
    CHECK(r.out == error_answer(502, "Bad Gateway", "api_error",
                                "CTX_UPSTREAM_URL is not set: name the upstream API in the model's .d/env "
                                "(CTX_UPSTREAM_URL=https://api.anthropic.com)"));
  }
  SECTION("plain http to a host that is not loopback") {
    RunResult r = forward(cgi_post(anthropic_env("http://192.0.2.1:8080")));
    CHECK(r.out == error_answer(502, "Bad Gateway", "api_error",
                                "CTX_UPSTREAM_URL http://192.0.2.1:8080: plain http is allowed only to a loopback "
                                "host (127.0.0.1, ::1, localhost); use https"));
    CHECK(r.out.find(kKey) == std::string::npos);
  }
}

TEST_CASE("ctx-model-forward keeps the agent's path beneath the upstream URL: the key goes to no other host",
          "[root][userns]") {
  // The upstream, and a server the agent would like the key sent to.
  FakeApi api(R"([{"text": "upstream"}])");
  FakeApi thief(R"([{"text": "stolen"}])", nullptr, "127.0.0.2");
  // http://127.0.0.1:P + "@127.0.0.2:Q/v1/messages" would name the host
  // 127.0.0.2 and make "127.0.0.1:P" its user information.
  const std::string away = "@127.0.0.2:" + std::to_string(thief.port()) + "/v1/messages";
  const std::string dots = "PATH_INFO has a '.' or '..' segment: the path stays beneath the upstream URL";
  for (auto [base, path, message] :
       {std::tuple{api.url(), away, std::string("PATH_INFO must start with '/'")},
        std::tuple{api.url() + "/v1", std::string("/../../v1/messages"), dots},
        std::tuple{api.url() + "/v1", std::string("/%2e%2E/admin"), dots},
        std::tuple{api.url() + "/v1", std::string("/messages#x"),
                   std::string("PATH_INFO holds a character that is not allowed in a URL path")}}) {
    RunResult r = forward(cgi_post(anthropic_env(base), path));
    INFO(base << " + " << path << ": " << r.out << r.err);
    CHECK(r.exit_code == 1);
    CHECK(r.out == error_answer(400, "Bad Request", "invalid_request_error", message));
  }
  CHECK(thief.requests().empty());
  CHECK(api.requests().empty());
}

TEST_CASE("ctx model through ctx-model-forward: the model's sandbox with cap network holds the key, the agent none",
          "[root][userns]") {
  FakeApi api(R"([{"text": "hello via ctx model"}])");
  TempDir certs;
  ctx::test::TestCert cert = ctx::test::make_test_cert(certs.path());
  FakeApi tls(R"([{"text": "hello over tls"}])", &cert);
  auto u = ctx::test::test_user();
  REQUIRE(u);
  const TestUser as = ctx::test::current_facility() == "root" ? TestUser{0, 0, "root"} : *u;
  ctx::test::CtxTree t(*u);
  t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
  const std::string forwarder = ctx::test::read_file(ctx::test::built("models/ctx-model-forward"));
  const std::string anthropic = "CTX_UPSTREAM_KEY_HEADER=x-api-key\nCTX_UPSTREAM_KEY=" + kKey + "\n";
  const std::string defaults =
      "CTX_UPSTREAM_DEFAULT_PATH=/v1/messages\nCTX_UPSTREAM_HEADER_ANTHROPIC_VERSION=2023-06-01\n";
  for (const char* m : {"anthropic/fwd", "anthropic/tls", "anthropic/nopath"}) {
    t.write(std::string("ctx/model/") + m, forwarder, 0755);
    t.write(std::string("ctx/model/") + m + ".d/cap", "network\n");
  }
  t.write("ctx/model/anthropic/fwd.d/env",
          "# the key: this file only, mode 0600\nCTX_UPSTREAM_URL=" + api.url() + "\n" + anthropic + defaults, 0600);
  // Verified against a CA in the model's own .d/ (read-only in its sandbox).
  t.write("ctx/model/anthropic/tls.d/ca.pem", ctx::test::read_file(cert.cert));
  t.write("ctx/model/anthropic/tls.d/env",
          "CTX_UPSTREAM_URL=" + tls.url() + "\nCTX_UPSTREAM_CAINFO=/ctx/model/anthropic/tls.d/ca.pem\n" + anthropic +
              defaults,
          0600);
  t.write("ctx/model/anthropic/nopath.d/env", "CTX_UPSTREAM_URL=" + api.url() + "\n" + anthropic, 0600);
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"},
                    {"policy",
                     "allow coder_t model:anthropic/fwd use\nallow coder_t model:anthropic/tls use\n"
                     "allow coder_t model:anthropic/nopath use\n"}});
  RunResult r =
      t.launch({"coder", "--", "/bin/sh", "-c",
                "for m in fwd tls; do a=$(/ctx/bin/ctx model anthropic/$m "
                "'{\"model\":\"m\",\"max_tokens\":5,\"messages\":[]}'); echo \"$m rc=$?\"; echo \"$a\"; done; "
                "/ctx/bin/ctx model anthropic/nopath x; echo \"nopath rc=$?\"; env | grep -c sk-fwd-test; true"},
               as);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  std::vector<std::string> lines;
  std::istringstream in(r.out);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  REQUIRE(lines.size() == 6);
  CHECK(lines[0] == "fwd rc=0");
  CHECK(json::parse(lines[1])["content"][0]["text"] == "hello via ctx model");
  CHECK(lines[2] == "tls rc=0");
  CHECK(json::parse(lines[3])["content"][0]["text"] == "hello over tls");
  CHECK(lines[4] == "nopath rc=1");
  CHECK(lines[5] == "0");  // no key in the agent's environment
  CHECK(r.err ==
        "ctx-model-forward: no REQUEST_METHOD (not an HTTP call) and no CTX_UPSTREAM_DEFAULT_PATH: to serve `ctx "
        "model`, set CTX_UPSTREAM_DEFAULT_PATH in the model's .d/env (e.g. /v1/messages)\n");
  for (const FakeApi* server : {&api, &tls}) {
    auto reqs = server->requests();
    REQUIRE(reqs.size() == 1);
    CHECK(reqs[0]["method"] == "POST");
    CHECK(reqs[0]["path"] == "/v1/messages");
    CHECK(reqs[0]["headers"]["x-api-key"] == kKey);
    CHECK(reqs[0]["headers"]["anthropic-version"] == "2023-06-01");
    CHECK(reqs[0]["headers"]["content-type"] == "application/json");
    CHECK(reqs[0]["body"]["max_tokens"] == 5);
  }
  // The records hold facts, never the key.
  const std::string log = t.dir().read("ctx/agent/coder.d/log");
  CHECK(log.find("\"object\":\"model/anthropic/fwd\"") != std::string::npos);
  for (const std::string& rel : {std::string("ctx/agent/coder.d/log"), std::string("ctx/model/anthropic/fwd.d/log"),
                                 "ctx/home/" + std::to_string(u->uid) + "/agent/coder/session/default/events.jsonl"})
    CHECK(t.dir().read(rel).find(kKey) == std::string::npos);
}

TEST_CASE("ctx-model-forward sends no more of the body than CONTENT_LENGTH: nothing of the agent's follows as a second "
          "request",
          "[root][userns]") {
  FakeApi api(R"([{"text": "one"}])");
  Shared s;
  // The stated length covers the JSON; what follows on stdin would be an
  // agent-written request on the upstream connection, without the key.
  s.d.write("body", "{\"a\":1}GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 0644);
  std::vector<std::string> env = cgi_post(anthropic_env(api.url()));
  env.push_back("CONTENT_LENGTH=7");
  RunResult r = forward(env, s.d / "body");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  auto reqs = api.requests();
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0]["body_bytes"] == 7);
  CHECK(reqs[0]["path"] == "/v1/messages?beta=true");
}
