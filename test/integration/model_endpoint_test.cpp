// The HTTP model endpoint (docs/models.md, "The HTTP endpoint") from
// inside real sandboxes, launched by root for the test user and by the
// test user: curl inside the agent's sandbox calls models through the
// endpoint, which asks the supervisor's model gate like `ctx model`.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <sstream>

#include <unistd.h>
#include <ctime>

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

// Answers one line, then holds the call open without writing (so no
// SIGPIPE ends it); its sleep is a process to look for, told apart from
// another run's by its length (the [root] and [userns] runs overlap).
std::string endless_model(const std::string& seconds) {
  return "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\necho endless-model-tick\nsleep " + seconds + "\n";
}

// Processes in the pid namespace `ns` (readlink of /proc/<pid>/ns/pid)
// whose command line holds `token`.
std::vector<int> in_namespace(const std::string& token, const std::string& ns) {
  std::vector<int> out;
  for (int pid : ctx::test::processes_mentioning(token)) {
    char buf[64] = {};
    const std::string link = "/proc/" + std::to_string(pid) + "/ns/pid";
    if (::readlink(link.c_str(), buf, sizeof buf - 1) > 0 && ns == buf) out.push_back(pid);
  }
  return out;
}

struct EndpointTree {
  TestUser as;
  CtxTree t;
  std::string uid;
  std::string sleep_for = "30." + std::to_string(::getpid() % 100000) + std::to_string(::time(nullptr) % 1000);

  EndpointTree(const TestUser& owner, const TestUser& launcher, const std::string& extra_policy = "")
      : as(launcher), t(owner), uid(std::to_string(owner.uid)) {
    t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
    t.write("ctx/model/debug/cgi", kCgiModel, 0755);
    t.write("ctx/model/debug/cgi.d/env", "SECRET=from-model-env\n");
    t.write("ctx/model/debug/slow", kSlowModel, 0755);
    t.write("ctx/model/debug/endless", endless_model(sleep_for), 0755);
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
  // A python3 script run inside the sandbox (written into the agent's home).
  RunResult python(const std::string& name, const std::string& code) {
    t.write("ctx/home/" + uid + "/agent/coder/" + name, code);
    return sh("/usr/bin/python3 /ctx/home/" + uid + "/agent/coder/" + name);
  }
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

TEST_CASE("the model endpoint: a model call over HTTP from inside the sandbox runs the model as a CGI program",
          "[root][userns]") {
  EndpointTree m = make_tree();
  RunResult r = m.sh(
      "echo url=$CTX_MODEL_URL; [ \"$ANTHROPIC_API_KEY\" = \"$CTX_MODEL_TOKEN\" ] && echo sdk-key=token; " + kCurl +
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

TEST_CASE("the model endpoint streams: the first line reaches the client before the model exits", "[root][userns]") {
  EndpointTree m = make_tree();
  // Each line's arrival timed as the client reads it (ms); the model
  // sleeps 1 s between its two lines.
  RunResult r = m.sh(kCurl +
                     "-N \"$CTX_MODEL_URL/debug/slow\" | { read -r l1; a=$(date +%s%3N); read -r l2; "
                     "b=$(date +%s%3N); echo $l1; echo $l2; [ $((b - a)) -ge 700 ] && echo first-line-early; }");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "first\nsecond\nfirst-line-early\n");
}

TEST_CASE("the model endpoint keeps a connection alive across calls and answers HEAD / without a model",
          "[root][userns]") {
  EndpointTree m = make_tree();
  RunResult r = m.sh("curl -sS -I \"$CTX_MODEL_URL/\" | tr -d '\\r' | grep -v -i '^date:'; " + kCurl +
                     "-w 'connects=%{num_connects}\\n' \"$CTX_MODEL_URL/main/a\" \"$CTX_MODEL_URL/debug/cgi/b\"");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  const std::string answer =
      "gw=CGI/1.1 proto=HTTP/1.1 method=GET path=/%s query= type=none length=none test=none auth=none key=none "
      "secret=from-model-env body=0\n";
  auto with = [&](const char* p) {
    return answer.substr(0, answer.find("%s")) + p + answer.substr(answer.find("%s") + 2);
  };
  // HEAD / answers 200 with no body; the second call reuses the first's
  // connection (no new connect); the alias `main` is one path segment.
  CHECK(r.out == "HTTP/1.1 200 OK\nContent-Length: 0\n\n" + with("a") + "connects=1\n" + with("b") + "connects=0\n");
  auto calls = m.calls();
  REQUIRE(calls.size() == 2);
  CHECK(calls[0]["object"] == "model/debug/cgi");
  CHECK(calls[0]["alias"] == "model/main");
  CHECK(calls[1]["object"] == "model/debug/cgi");
}

TEST_CASE("the model endpoint streams a 5 MB request body into the model's stdin", "[root][userns]") {
  EndpointTree m = make_tree();
  RunResult r = m.sh("head -c 5000000 /dev/zero | " + kCurl +
                     "-H 'Content-Type: application/octet-stream' --data-binary @- \"$CTX_MODEL_URL/debug/cgi/up\"");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "gw=CGI/1.1 proto=HTTP/1.1 method=POST path=/up query= type=application/octet-stream length=5000000 "
        "test=none auth=none key=none secret=from-model-env body=5000000\n");
}

TEST_CASE("the model endpoint ends the model when its client goes away mid-answer", "[root][userns]") {
  EndpointTree m = make_tree();
  RunResult r = m.sh(
      // The endpoint starts at the first connection: none before the call.
      "readlink /proc/self/ns/pid; cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | "
      "grep -c '^ctx-model-endpoint$'; " +
      kCurl +
      "-N --max-time 1 \"$CTX_MODEL_URL/debug/endless\" | head -n 1; cat /proc/[0-9]*/cmdline 2>/dev/null | "
      "tr '\\0' '\\n' | grep -c '^ctx-model-endpoint$'; sleep 3");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  const std::string ns = r.out.substr(0, r.out.find('\n'));
  CHECK(r.out == ns + "\n0\nendless-model-tick\n1\n");  // one endpoint, in the sandbox
  auto calls = m.calls();
  REQUIRE(calls.size() == 1);
  INFO(calls[0].dump());
  CHECK(calls[0]["object"] == "model/debug/endless");
  CHECK(calls[0]["status"] == "failed");
  CHECK(calls[0]["exit_status"] == 137);
  // Ended by the client's disconnect (at 1 s), not by the agent's exit (4 s).
  CHECK(calls[0]["ms"].get<int>() < 3000);
  CHECK(ctx::test::processes_mentioning(m.sleep_for).empty());
  // The endpoint died with the sandbox.
  CHECK(ns.rfind("pid:[", 0) == 0);
  CHECK(in_namespace("ctx-model-endpoint", ns).empty());
}

TEST_CASE("the model endpoint refuses: no token is 401, a model not granted is 403 and recorded, no CGI header 502",
          "[root][userns]") {
  EndpointTree m = make_tree();
  RunResult r = m.sh(
      "curl -sS -w ' %{http_code}\\n' \"$CTX_MODEL_URL/debug/cgi\"; "
      "curl -sS -w ' %{http_code}\\n' -H 'x-api-key: wrong' \"$CTX_MODEL_URL/debug/cgi\"; " +
      kCurl + "-w ' %{http_code}\\n' \"$CTX_MODEL_URL/openai/gpt-4o/v1/responses\"; " + kCurl +
      "-w ' %{http_code}\\n' \"$CTX_MODEL_URL/debug/plain\"; " + kCurl +
      "-w ' %{http_code}\\n' -H 'X-Bad_Name: 1' \"$CTX_MODEL_URL/debug/cgi\"");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  const std::string no_token =
      "{\"agent\":\"\",\"code\":\"EACCES\",\"error\":{\"message\":\"EACCES: this endpoint needs the launch's token "
      "(CTX_MODEL_TOKEN) as x-api-key or Authorization: Bearer\",\"type\":\"authentication_error\"},"
      "\"reason\":\"token\",\"type\":\"error\"}\n 401\n";
  CHECK(r.out ==
        no_token + no_token +
            "{\"agent\":\"coder\",\"code\":\"EACCES\",\"error\":{\"message\":\"the policy of coder has no 'allow "
            "coder_t model:openai/gpt-4o use'\",\"type\":\"permission_error\"},\"model\":\"openai/gpt-4o\","
            "\"reason\":\"agent_policy\",\"type\":\"error\"}\n 403\n"
            "{\"agent\":\"\",\"code\":\"EPROTO\",\"error\":{\"message\":\"the model wrote no CGI header "
            "block before it exited\",\"type\":\"api_error\"},\"reason\":\"cgi\",\"type\":\"error\"}\n 502\n"
            "{\"agent\":\"\",\"code\":\"EINVAL\",\"error\":{\"message\":\"EINVAL: http: header name 'X-Bad_Name' "
            "is not 1 to 256 of A-Z a-z 0-9 -\",\"type\":\"invalid_request_error\"},"
            "\"reason\":\"invalid_request\",\"type\":\"error\"}\n 400\n");
  auto calls = m.calls();
  REQUIRE(calls.size() == 2);
  CHECK(calls[0]["object"] == "model/openai/gpt-4o");
  CHECK(calls[0]["status"] == "denied");
  CHECK(calls[0]["reason"] == "agent_policy");
  CHECK(calls[1]["object"] == "model/debug/plain");
  CHECK(calls[1]["status"] == "ok");  // the model ran and exited 0; its answer was no CGI response
  bool logged = false;
  for (const auto& l : m.lines("ctx/agent/coder.d/log"))
    logged = logged || (l["type"] == "model.call" && l["object"] == "model/openai/gpt-4o" && l["status"] == "denied");
  CHECK(logged);
}

TEST_CASE(
    "the model endpoint with the host's network: an ephemeral port, and a host process without the token is "
    "refused",
    "[root][userns]") {
  EndpointTree m = make_tree("allow coder_t network:default connect\n");
  auto sp = m.t.spawn({"coder", "--", "/bin/sh", "-c",
                       "echo $CTX_MODEL_URL; " + kCurl +
                           "\"$CTX_MODEL_URL/debug/cgi\" >/dev/null && echo agent-ok; "
                           "sleep 4"},
                      m.as);
  std::string url;
  for (int i = 0; i < 100 && url.find('\n') == std::string::npos; ++i) {
    char buf[256];
    ssize_t n = ::read(sp.out_fd, buf, sizeof buf);
    if (n > 0) url.append(buf, static_cast<std::size_t>(n));
    if (n <= 0) ::usleep(50000);
  }
  std::string line = url.substr(0, url.find('\n'));
  INFO(url);
  CHECK(line.rfind("http://127.0.0.1:", 0) == 0);
  CHECK(line != "http://127.0.0.1:7180");
  RunResult host =
      ctx::test::run_command({"/usr/bin/curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", line + "/debug/cgi"});
  RunResult guess = ctx::test::run_command({"/usr/bin/curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                                            "Authorization: Bearer " + std::string(64, '0'), line + "/debug/cgi"});
  RunResult r = ctx::test::wait_command(sp);
  INFO(r.out << r.err);
  CHECK(host.out == "401");
  CHECK(guess.out == "401");
  CHECK(r.out.find("agent-ok\n") != std::string::npos);
  CHECK(m.calls().size() == 1);
}

TEST_CASE("an agent's own ANTHROPIC_API_KEY stays its own, and ctx check warns that the agent can read it",
          "[root][userns]") {
  EndpointTree m = make_tree();
  m.t.write("ctx/agent/coder.d/env", "ANTHROPIC_API_KEY=sk-ant-real\n");
  RunResult r = m.sh("echo $ANTHROPIC_API_KEY; [ \"$OPENAI_API_KEY\" = \"$CTX_MODEL_TOKEN\" ] && echo openai=token");
  INFO(r.out << r.err);
  CHECK(r.out == "sk-ant-real\nopenai=token\n");
  RunResult c = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", m.t.root(), "coder"}, m.as);
  INFO(c.out << c.err);
  CHECK(c.out.find("warning: coder.d/env: ANTHROPIC_API_KEY: a key here is readable by the agent (its environment, "
                   "/proc); remove it and give the key to the model's own <m>.d/env: the launch sets "
                   "ANTHROPIC_API_KEY to the model endpoint's token\n") != std::string::npos);
}

TEST_CASE("the model gate refuses HTTP metadata sent past the endpoint: a credential header never reaches a model",
          "[root][userns]") {
  EndpointTree m = make_tree();
  // The agent speaks to its control socket itself, with the endpoint's
  // op and a header the endpoint would have withheld.
  const std::string py =
      "import json, os, socket\n"
      "s = socket.socket(socket.AF_UNIX); s.connect('/run/ctx/supervisor')\n"
      "r, w = os.pipe()\n"
      "req = {'op': 'model', 'name': 'debug', 'http': {'protocol': 'HTTP/1.1', 'method': 'GET', 'path': '/cgi',\n"
      "       'headers': [['Authorization', 'Bearer stolen']]}}\n"
      "socket.send_fds(s, [(json.dumps(req) + '\\n').encode()], [r, w, w])\n"
      "os.close(w)\n"
      "a = json.loads(s.makefile().readline())\n"
      "print(a['code'], a['reason'], a['message'])\n"
      "print('model output:', os.read(r, 100))\n";
  RunResult r = m.python("raw.py", py);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "EINVAL invalid_request http: header 'Authorization' is never passed to a model\nmodel output: b''\n");
  auto calls = m.calls();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0]["object"] == "model/debug");
  CHECK(calls[0]["status"] == "error");
  CHECK(calls[0]["reason"] == "invalid_request");
}

TEST_CASE("the model gate runs one model per connection: a second model request on it is EBUSY and recorded",
          "[root][userns]") {
  EndpointTree m = make_tree();
  // Two model requests on one control connection while the first model
  // runs: before the fix the second ran with no record and no reaper.
  const std::string py =
      "import json, os, socket\n"
      "s = socket.socket(socket.AF_UNIX); s.connect('/run/ctx/supervisor')\n"
      "f = s.makefile()\n"
      "outs = []\n"
      "for i in range(2):\n"
      "    r, w = os.pipe()\n"
      "    req = {'op': 'model', 'name': 'debug/slow'}\n"
      "    socket.send_fds(s, [(json.dumps(req) + '\\n').encode()], [r, w, w])\n"
      "    os.close(w)\n"
      "    outs.append(r)\n"
      "a = json.loads(f.readline())\n"
      "print(a.get('code'), a.get('reason'))\n"
      "b = json.loads(f.readline())\n"
      "print(b.get('ok'), b.get('exit_status'))\n"
      "print('second model output:', os.read(outs[1], 100))\n";
  RunResult r = m.python("two.py", py);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "EBUSY busy\nTrue 0\nsecond model output: b''\n");
  auto calls = m.calls();
  REQUIRE(calls.size() == 2);
  CHECK(calls[0]["status"] == "error");
  CHECK(calls[0]["reason"] == "busy");
  CHECK(calls[1]["status"] == "ok");
}

TEST_CASE("the model endpoint passes no Proxy header: a model never gets HTTP_PROXY from the agent",
          "[root][userns]") {
  EndpointTree m = make_tree();
  m.t.write("ctx/model/debug/cgi",
            "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'\necho \"proxy=${HTTP_PROXY-none} "
            "forwarded=${HTTP_FORWARDED-none} test=${HTTP_X_TEST-none}\"\n",
            0755);
  RunResult r = m.sh(kCurl + "-H 'Proxy: http://127.0.0.1:9' -H 'Forwarded: for=x' -H 'X-Test: yes' "
                             "\"$CTX_MODEL_URL/debug/cgi/v1/messages\"");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "proxy=none forwarded=none test=yes\n");
}

TEST_CASE("the model endpoint refuses a request with two lengths: the model is never told another length than it reads",
          "[root][userns]") {
  EndpointTree m = make_tree();
  const std::string py =
      "import os, socket\n"
      "s = socket.create_connection(('127.0.0.1', 7180))\n"
      "tok = os.environ['CTX_MODEL_TOKEN']\n"
      "s.sendall(('POST /debug/cgi/v1/messages HTTP/1.1\\r\\nHost: x\\r\\nx-api-key: ' + tok +\n"
      "           '\\r\\nContent-Length: 4\\r\\nContent-Length: 2\\r\\n\\r\\nabcd').encode())\n"
      "print(s.recv(200).decode().split('\\r\\n')[0])\n";
  RunResult r = m.python("twolen.py", py);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "HTTP/1.1 400 Bad Request\n");
  CHECK(m.calls().empty());
}
