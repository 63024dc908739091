// Logs and events (seed 000, "Logs and Events"), end to end: after a
// launch with a tool call and an owned child, every line of every
// events.jsonl and log in the CTX tree has the six keys with a status of
// the vocabulary (docs/launcher.md, "Logs, events and what they never
// hold"), a tool's own .d/log and .d/status record the call, and no
// argument, input or environment value reaches any of them.
#include <catch2/catch.hpp>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* kSecret = "s3cr3t-Tok3n-5e7a";

const std::set<std::string> kStatuses = {"ok",          "error",   "failed",    "denied", "dropped",
                                         "unavailable", "stopped", "cancelled", "dead"};

// coder sees /usr, the probe, the CTX root read-only (with /ctx/bin/ctx)
// and its home; it may run echo.args, plain, linked and dirlinked and
// create, start and stop rev.
struct Tree {
  ctx::test::LaunchMode m = ctx::test::launch_mode();
  CtxTree t{m.owner};
  std::string uid = std::to_string(m.owner.uid);

  Tree() {
    t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
    std::string policy;
    for (const char* tool : {"echo.args", "plain", "linked", "dirlinked"})
      policy += std::string("allow coder_t tool:") + tool + " execute\n";
    for (const char* perm : {"create", "start", "stop"})
      policy += std::string("allow coder_t agent:rev ") + perm + "\n";
    t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.root() + "/home/" +
                                    uid + "/agent/coder\t/ctx/home/" + uid + "/agent/coder\trw\tbind,nosuid,nodev\n"},
                      {"policy", policy},
                      {"iso", m.privileged ? "shared\n" : "userns\n"}});
  }
  RunResult sh(const std::string& script) { return t.launch({"coder", "--", "/bin/sh", "-c", script}, m.as, 90); }
  std::string read(const std::string& rel) { return t.dir().read(rel); }
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  return out;
}

// Every events.jsonl, log and log.1 below the CTX root (never through a
// symlink), and every tool's .d/status.
std::vector<fs::path> record_files(const std::string& root) {
  std::vector<fs::path> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file() || it->is_symlink()) continue;
    const std::string name = it->path().filename();
    const std::string parent = it->path().parent_path().filename();
    const bool tool_status = name == "status" && it->path().parent_path().parent_path().filename() == "tool" &&
                             parent.size() > 2 && parent.substr(parent.size() - 2) == ".d";
    if (name == "events.jsonl" || name == "log" || name == "log.1" || tool_status) out.push_back(it->path());
  }
  return out;
}

void check_shape(const fs::path& file, const std::string& line) {
  INFO(file.string() << ": " << line);
  json j = json::parse(line);
  REQUIRE(j.is_object());
  for (const char* k : {"ts", "type", "agent", "session", "object", "status"}) {
    REQUIRE(j.contains(k));
    CHECK(j[k].is_string());
    CHECK_FALSE(j[k].get<std::string>().empty());
  }
  CHECK(kStatuses.count(j["status"].get<std::string>()) == 1);
  CHECK_FALSE(j.contains("event"));
}

}  // namespace

TEST_CASE("every event and log line has ts, type, agent, session, object and a status; none holds a secret",
          "[root][userns]") {
  Tree f;
  f.t.write("ctx/tool/echo.args", "#!/bin/sh\nprintf 'args:%s\\n' \"$*\"\ncat\n", 0755);
  // The tool's owner asks for its records by making the files.
  f.t.write("ctx/tool/echo.args.d/log", "");
  f.t.write("ctx/tool/echo.args.d/status", "");
  const std::string secret = kSecret;
  const std::string request =
      "{\"name\":\"rev\",\"label\":\"rev_t\",\"mount\":[[\"/usr\",\"/usr\",\"ro\"],[\"/probe\","
      "\"/probe\",\"ro\"],[\"/ctx\",\"/ctx\",\"ro\"]]}";
  RunResult r = f.sh("set -e; export TOKEN=" + secret + "; printf '" + secret +
                     "-input' | /ctx/bin/ctx tool echo.args '{\"q\":\"" + secret +
                     "\"}'; /ctx/bin/ctx tool nosuch '{}' || true; /ctx/bin/ctx agent create '" + request +
                     "' >/dev/null; /ctx/bin/ctx agent start rev -- /probe notify:READY=1 sleep:30 " + secret +
                     " >/dev/null; /ctx/bin/ctx agent stop rev >/dev/null; /ctx/bin/ctx agent wait rev >/dev/null");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("args:{\"q\":\"" + secret + "\"}") != std::string::npos);  // the tool got it

  std::set<std::string> types;
  std::size_t files = 0;
  for (const fs::path& p : record_files(f.t.root())) {
    const std::string text = ctx::test::read_file(p.string());
    INFO(p.string());
    CHECK(text.find(secret) == std::string::npos);
    for (const std::string& line : lines_of(text)) {
      check_shape(p, line);
      types.insert(json::parse(line)["type"].get<std::string>());
    }
    ++files;
  }
  CHECK(files >= 6);  // coder's and rev's log and events, the tool's log and status
  for (const char* t : {"agent.start", "agent.exec", "agent.stop", "tool.call", "agent.child.create",
                        "agent.child.start", "agent.child.stop", "agent.child.exit"})
    CHECK(types.count(t) == 1);

  // The child's events name it as their object.
  for (const std::string& line : lines_of(f.read("ctx/home/" + f.uid + "/agent/coder/session/default/events.jsonl"))) {
    json j = json::parse(line);
    if (j["type"].get<std::string>().rfind("agent.child.", 0) == 0) CHECK(j["object"] == "agent/rev");
  }

  // The tool's own files: one line for the one call that reached it (the
  // unknown tool reached none), and the same facts in status.
  auto tlog = lines_of(f.read("ctx/tool/echo.args.d/log"));
  REQUIRE(tlog.size() == 1);
  json call = json::parse(tlog[0]);
  CHECK(call["type"] == "tool.call");
  CHECK(call["object"] == "tool/echo.args");
  CHECK(call["agent"] == "coder");
  CHECK(call["session"] == "default");
  CHECK(call["status"] == "ok");
  CHECK(call["via"] == "ctx tool");
  CHECK(f.read("ctx/tool/echo.args.d/status") == tlog[0] + "\n");
  // agent.start: the runtime and its argument count, never the arguments.
  bool start_seen = false;
  for (const std::string& line : lines_of(f.read("ctx/agent/coder.d/log"))) {
    json j = json::parse(line);
    if (j["type"] != "agent.start") continue;
    start_seen = true;
    CHECK(j["runtime"] == "/bin/sh");
    CHECK(j["argc"] == 3);
    CHECK_FALSE(j.contains("argv"));
  }
  CHECK(start_seen);
}

TEST_CASE("a tool without .d/log and .d/status gets none: the supervisor never creates files in a tool's directory",
          "[root][userns]") {
  Tree f;
  f.t.write("ctx/tool/plain", "#!/bin/sh\nexit 0\n", 0755);
  f.t.mkdir("ctx/tool/plain.d");
  RunResult r = f.sh("/ctx/bin/ctx tool plain '{}'");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(fs::is_empty(f.t.dir() / "ctx/tool/plain.d"));
  CHECK(f.read("ctx/home/" + f.uid + "/agent/coder/session/default/events.jsonl").find("\"object\":\"tool/plain\"") !=
        std::string::npos);
}

// Attack: a tool's log or status, or its whole .d/, is a symbolic link to
// a file its planter wants written (here one the owner can write, in the
// CTX tree). The supervisor opens the .d/ beneath the CTX root without
// following a link and log and status with O_NOFOLLOW: nothing reaches
// the target, and the call itself goes on.
TEST_CASE("a tool's .d/log, .d/status or .d/ that is a symlink is never followed", "[root][userns]") {
  Tree f;
  f.t.write("ctx/victim", "");
  f.t.write("ctx/elsewhere/log", "");
  f.t.write("ctx/elsewhere/status", "");
  f.t.write("ctx/tool/linked", "#!/bin/sh\nexit 0\n", 0755);
  f.t.mkdir("ctx/tool/linked.d");
  f.t.write("ctx/tool/dirlinked", "#!/bin/sh\nexit 0\n", 0755);
  f.t.dir().symlink(f.t.root() + "/victim", "ctx/tool/linked.d/log");
  f.t.dir().symlink(f.t.root() + "/victim", "ctx/tool/linked.d/status");
  f.t.dir().symlink(f.t.root() + "/elsewhere", "ctx/tool/dirlinked.d");
  // A linked .d/ is an unreadable tool policy: the call is refused
  // (tool_policy), after it reached the tool, so its records are tried.
  RunResult r =
      f.sh("set -e; /ctx/bin/ctx tool linked '{}'; /ctx/bin/ctx tool dirlinked '{}' 2>/dev/null || echo refused=$?");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "refused=13\n");
  CHECK(f.read("ctx/victim").empty());
  CHECK(f.read("ctx/elsewhere/log").empty());
  CHECK(f.read("ctx/elsewhere/status").empty());
  const std::string ev = f.read("ctx/home/" + f.uid + "/agent/coder/session/default/events.jsonl");
  CHECK(ev.find("\"object\":\"tool/linked\"") != std::string::npos);
  CHECK(ev.find("\"object\":\"tool/dirlinked\"") != std::string::npos);
}
