// User agents (docs/abi.md "User agents"): defined in
// <ctx>/home/<U>/agent/<name>.d, launched in a real sandbox by root (a
// privileged launch) and by the test user itself. ctx-probe reports from
// inside.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;
using ctx::test::TestUser;
using nlohmann::json;

namespace {

using Mode = ctx::test::LaunchMode;
using ctx::test::probe;

// Writes the user agent `name` of uid `u` (owner u, like CtxTree::agent
// otherwise): home/<u>/agent/<name>.d and its home's root.
void user_agent(CtxTree& t, std::uint32_t u, std::uint32_t gid, const std::string& name,
                const std::map<std::string, std::optional<std::string>>& files = {}) {
  const std::string uid = std::to_string(u);
  const std::string home = "ctx/home/" + uid + "/agent/" + name;
  t.mkdir(home + "/root");
  for (const char* l : {"bin", "lib", "lib64", "sbin"})
    (void)::symlink((std::string("usr/") + l).c_str(), (t.dir() / (home + "/root/" + l)).c_str());
  std::map<std::string, std::optional<std::string>> all{
      {"owner", uid + "\n"},
      {"gid", std::to_string(gid) + "\n"},
      {"label", name + "_t\n"},
      {"iso", "userns\n"},
      {"root", t.root() + "/home/" + uid + "/agent/" + name + "/root\n"},
      {"mount", t.base_mounts()},
  };
  for (const auto& [k, v] : files) all[k] = v;
  // The session and mount rules its launches need, as CtxTree::agent adds.
  if (all["label"] && all["mount"])
    all["policy"] = ctx::test::session_policy(CtxTree::label_type(*all["label"])) + all["policy"].value_or("") +
                    CtxTree::mount_rules_for(*all["label"], *all["mount"]);
  t.mkdir(home + ".d");
  for (const auto& [k, v] : all)
    if (v) t.write(home + ".d/" + k, *v);
}

std::set<std::string> env_of(const json& j) { return std::set<std::string>(j["env"].begin(), j["env"].end()); }

}  // namespace

TEST_CASE("a user agent launches from home/<U>/agent with its owner's identity and CTX_HOME", "[root][userns]") {
  Mode m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  user_agent(t, m.owner.uid, m.owner.gid, "ucoder");
  // Only the user tier has it: no --user needed by its owner; root names it.
  std::vector<std::string> args{"ucoder", "--", "/probe", "ids", "env", "hostname"};
  if (m.privileged) args.insert(args.begin(), {"--user", uid});
  json j = probe(t.launch(args, m.as));
  CHECK(j["hostname"] == "ucoder");
  auto env = env_of(j);
  CHECK(env.count("CTX_HOME=/ctx/home/" + uid) == 1);
  CHECK(env.count("HOME=/ctx/home/" + uid + "/agent/ucoder") == 1);
  CHECK(env.count("CTX_AGENT=ucoder") == 1);
  // The supervisor's files are in the user tier's .d, none in agent/.
  const std::string d = t.root() + "/home/" + uid + "/agent/ucoder.d/";
  CHECK(ctx::test::read_file(d + "status") == "dead\n");
  CHECK(ctx::test::read_file(d + "log").find("\"agent.start\"") != std::string::npos);
  struct stat st {};
  CHECK(::lstat((t.root() + "/agent/ucoder.d").c_str(), &st) != 0);
  // Its own identity: the owner's uid, seen as itself in its user namespace.
  CHECK(j["ids"]["uid"][0] == m.owner.uid);
}

TEST_CASE("a user agent's entry in .d/entry is what runs by default", "[root][userns]") {
  Mode m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  user_agent(t, m.owner.uid, m.owner.gid, "uentry",
             {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"}});
  t.write("ctx/home/" + uid + "/agent/uentry.d/entry", "#!/bin/sh\necho \"entry ran as $(id -u) in $CTX_HOME\"\n",
          0755);
  // Through the live view (or its static fallback) and the static view.
  for (const char* view : {"--user", "--static-view"}) {
    std::vector<std::string> args{"--user", uid, "uentry"};
    if (std::string(view) == "--static-view") args.insert(args.begin(), view);
    RunResult r = t.launch(args, m.as);
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "entry ran as " + uid + " in /ctx/home/" + uid + "\n");
  }
}

TEST_CASE("a user agent whose owner is not U is refused", "[root][userns]") {
  Mode m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  user_agent(t, m.owner.uid, m.owner.gid, "uowner", {{"owner", "0\n"}});
  RunResult r = t.launch({"--user", uid, "uowner", "--", "/probe", "ids"}, m.as);
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("home/" + uid + "/agent/uowner.d/owner: EPERM: says 0, but a user agent in home/" + uid +
                   " is owned by " + uid) != std::string::npos);
  CHECK(r.out.empty());
}

TEST_CASE("a root launch refuses a user agent's file owned by another user", "[root]") {
  auto owner = ctx::test::test_user();
  REQUIRE(owner);
  CtxTree t(*owner);
  const std::string uid = std::to_string(owner->uid);
  user_agent(t, owner->uid, owner->gid, "uplant");
  // Another user (here: uid owner+1) planted the mount table, giving the
  // agent the host's /etc. Without the trust check the launch runs.
  const std::string planted = t.root() + "/home/" + uid + "/agent/uplant.d/mount";
  REQUIRE(::chown(planted.c_str(), owner->uid + 1, owner->gid) == 0);
  RunResult r = t.launch({"--user", uid, "uplant", "--", "/probe", "ids"}, TestUser{0, 0, "root"});
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("home/" + uid + "/agent/uplant.d/mount: EPERM: owned by uid " + std::to_string(owner->uid + 1) +
                   ", not by root or the owner " + uid) != std::string::npos);
  CHECK(r.out.empty());
  // A group-writable home/<U>/agent is refused the same way.
  REQUIRE(::chown(planted.c_str(), owner->uid, owner->gid) == 0);
  REQUIRE(::chmod((t.root() + "/home/" + uid + "/agent").c_str(), 0775) == 0);
  r = t.launch({"--user", uid, "uplant", "--", "/probe", "ids"}, TestUser{0, 0, "root"});
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("home/" + uid + "/agent: EPERM: writable by group or other") != std::string::npos);
}

TEST_CASE("the same name in both tiers is refused without --user", "[root][userns]") {
  Mode m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  // The caller's own tier (root's home/0 in a root launch).
  const std::string caller = std::to_string(m.as.uid);
  t.agent("both");
  user_agent(t, m.as.uid, m.as.gid, "both");
  RunResult r = t.launch({"both", "--", "/probe", "ids"}, m.as);
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("both: EEXIST: defined in both tiers, " + t.root() + "/agent/both.d and " + t.root() + "/home/" +
                   caller + "/agent/both.d") != std::string::npos);
  CHECK(r.out.empty());
  // Named, the system one runs.
  CHECK(t.launch({"--system", "both", "--", "/probe", "ids"}, m.as).exit_code == 0);
  CHECK(ctx::test::read_file(t.root() + "/agent/both.d/status") == "dead\n");
}

TEST_CASE("a user agent and its system namesake run at once: own lock, status and cgroup", "[root][userns]") {
  Mode m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  t.agent("twin");
  user_agent(t, m.owner.uid, m.owner.gid, "twin");
  auto sys_run =
      t.spawn({"--json-status-fd", "1", "--system", "twin", "--", "/probe", "notify:READY=1", "sleep:30"}, m.as);
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/twin.d/status", "ready\n"));
  RunResult r = t.launch({"--json-status-fd", "1", "--user", uid, "twin", "--", "/probe", "hostname"}, m.as);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);  // not EBUSY: the lock is the user tier's .d
  CHECK(ctx::test::read_file(t.root() + "/home/" + uid + "/agent/twin.d/status") == "dead\n");
  CHECK(ctx::test::read_file(t.root() + "/agent/twin.d/status") == "ready\n");
  json user_started = json::parse(r.out.substr(0, r.out.find('\n')));
  REQUIRE(::kill(sys_run.pid, SIGTERM) == 0);
  RunResult s = ctx::test::wait_command(sys_run, 30);
  json sys_started = json::parse(s.out.substr(0, s.out.find('\n')));
  // With a cgroup, each has its own: agent-twin... and agent-twin.u<U>...
  if (user_started.contains("cgroup") && user_started["cgroup"].is_string() &&
      !user_started["cgroup"].get<std::string>().empty()) {
    std::string uc = user_started["cgroup"], sc = sys_started["cgroup"];
    CHECK(uc != sc);
    CHECK(uc.find("/agent-twin.u" + uid) != std::string::npos);
  }
  CHECK(ctx::test::read_file(t.root() + "/agent/twin.d/status") == "dead\n");
}

TEST_CASE("a user agent's extra instance: its records, socket and cgroup leaf in its own tier", "[root][userns]") {
  Mode m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  user_agent(t, m.owner.uid, m.owner.gid, "utwin");
  const std::string d = t.root() + "/home/" + uid + "/agent/utwin.d/";
  auto primary =
      t.spawn({"--json-status-fd", "1", "--user", uid, "utwin", "--", "/probe", "notify:READY=1", "sleep:30"}, m.as);
  REQUIRE(ctx::test::wait_for_file(d + "instance/default/status", "ready\n", 60000));
  RunResult r = t.launch(
      {"--json-status-fd", "1", "--user", uid, "--session", "review", "utwin", "--", "/probe", "hostname"}, m.as);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(ctx::test::read_file(d + "instance/review/status") == "dead\n");
  CHECK(ctx::test::read_file(d + "status") == "ready\n");  // the primary's
  struct stat st {};
  CHECK(::lstat((t.root() + "/home/" + uid + "/agent/utwin.sock").c_str(), &st) == 0);
  CHECK(::lstat((t.root() + "/home/" + uid + "/agent/utwin@review.sock").c_str(), &st) != 0);
  // The launcher's report and the probe's line share stdout, in either order.
  auto started_of = [](const std::string& out) {
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
      if (auto j = json::parse(l, nullptr, false); j.is_object() && j.value("event", "") == "started") return j;
    return json();
  };
  json extra_started = started_of(r.out);
  REQUIRE(::kill(primary.pid, SIGTERM) == 0);
  RunResult p = ctx::test::wait_command(primary, 30);
  json primary_started = started_of(p.out);
  REQUIRE(primary_started.is_object());
  CHECK(ctx::test::read_file(d + "status") == "dead\n");
  // With a cgroup: agent-utwin.u<U>...@review beside agent-utwin.u<U>...
  if (primary_started["cgroup"].is_string()) {
    std::string pc = primary_started["cgroup"];
    REQUIRE(pc.size() > 8);
    CHECK(pc.find("/agent-utwin.u" + uid) != std::string::npos);
    CHECK(extra_started["cgroup"] == pc.substr(0, pc.size() - 8) + "@review/runtime");
  }
}

TEST_CASE("CTX_HOME is the owner's home even when the runtime uid is not the owner's (iso uid)", "[root][userns]") {
  Mode m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  // 2000001 lies in the range scripts/setup delegates to the test user.
  t.agent("isocoder", {{"iso", "uid\n"}, {"uid", "2000001\n"}, {"gid", "2000002\n"}});
  user_agent(t, m.owner.uid, m.owner.gid, "isouser", {{"iso", "uid\n"}, {"uid", "2000001\n"}, {"gid", "2000002\n"}});
  for (const std::string& agent : {std::string("isocoder"), std::string("isouser")}) {
    INFO(agent);
    std::vector<std::string> args{agent, "--", "/probe", "ids", "env"};
    if (agent == "isouser") args.insert(args.begin(), {"--user", uid});
    json j = probe(t.launch(args, m.as));
    CHECK(j["ids"]["uid"] == json{2000001, 2000001, 2000001});
    // Not home/2000001: that uid has no home tree; the sessions and state
    // are the owner's (docs/launcher.md "Environment").
    auto env = env_of(j);
    CHECK(env.count("CTX_HOME=/ctx/home/" + uid) == 1);
    CHECK(env.count("CTX_PATH=/ctx/tool:/ctx/home/" + uid + "/tool") == 1);
    CHECK(env.count("HOME=/ctx/home/" + uid + "/agent/" + agent) == 1);
  }
}

TEST_CASE("an owned child is always the system agent, even when the caller has a user agent of its name",
          "[root][userns]") {
  Mode m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
  std::string policy;
  for (const char* perm : {"create", "start", "stop"}) policy += std::string("allow lead_t agent:rev ") + perm + "\n";
  t.agent("lead", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.root() + "/home/" +
                                 uid + "/agent/lead\t/ctx/home/" + uid + "/agent/lead\trw\tbind,nosuid,nodev\n"},
                   {"policy", policy},
                   {"iso", m.privileged ? "shared\n" : "userns\n"}});
  // The launching user's own tier has a "rev" too (in a root launch the
  // children's supervisors run as root: home/0).
  user_agent(t, m.as.uid, m.as.gid, "rev");
  const std::string req =
      "{\"name\":\"rev\",\"label\":\"rev_t\",\"mount\":[[\"/usr\",\"/usr\",\"ro\"],[\"/probe\",\"/probe\",\"ro\"]]}";
  RunResult r = t.launch({"lead", "--", "/bin/sh", "-c",
                          "set -e; /ctx/bin/ctx agent create '" + req +
                              "'; /ctx/bin/ctx agent start rev -- /probe ids; /ctx/bin/ctx agent wait rev"},
                         m.as, 90);
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("\"exit_status\":0") != std::string::npos);
  CHECK(ctx::test::read_file(t.root() + "/agent/rev.d/status") == "dead\n");
  // The user agent was not touched.
  struct stat st {};
  CHECK(::lstat((t.root() + "/home/" + std::to_string(m.as.uid) + "/agent/rev.d/status").c_str(), &st) != 0);
}
