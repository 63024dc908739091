// The ids a runtime runs with, per iso mode, and the ids a launch refuses:
// those not delegated to the caller, and in a root launch those the owner
// is not entitled to.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

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

// The lines of /proc/self/uid_map with the padding folded: "in out count".
std::vector<std::string> map_lines(const json& text) {
  std::vector<std::string> out;
  std::istringstream in(text.get<std::string>());
  std::string a, b, c;
  while (in >> a >> b >> c) out.push_back(a + " " + b + " " + c);
  return out;
}

}  // namespace

TEST_CASE("iso userns: namespace-local ids mapped to the owner", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"uid", "1000\n"}, {"gid", "1000\n"}});
  json j = probe(run_probe(t, m, "coder", {"ids", "uid_map", "gid_map"}));
  CHECK(j["ids"]["uid"] == json{1000, 1000, 1000});
  CHECK(j["ids"]["gid"] == json{1000, 1000, 1000});
  // Seen from outside (the map's outer column): the owner.
  CHECK(map_lines(j["uid_map"]) == std::vector<std::string>{"1000 " + std::to_string(m.owner.uid) + " 1"});
  CHECK(map_lines(j["gid_map"]) == std::vector<std::string>{"1000 " + std::to_string(m.owner.gid) + " 1"});
}

TEST_CASE("iso shared: the owner's own host ids", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"iso", "shared\n"}});
  json j = probe(run_probe(t, m, "coder", {"ids", "caps"}));
  CHECK(j["ids"]["uid"] == json{m.owner.uid, m.owner.uid, m.owner.uid});
  CHECK(j["ids"]["gid"] == json{m.owner.gid, m.owner.gid, m.owner.gid});
  CHECK(j["ids"]["groups"] == json::array());
  // No capability, the bounding set's included, whichever namespace the
  // runtime ends up in.
  for (const char* k : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    INFO(k);
    CHECK(j["caps"][k] == "0000000000000000");
  }
}

TEST_CASE("iso uid: the agent's own host uid, gid and groups", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  // 2000001.. lies in the range scripts/setup delegates to the test user.
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "2000001\n"}, {"gid", "2000002\n"}, {"groups", "2000003\n"}});
  RunResult r = run_probe(t, m, "coder", {"ids", "caps"});
  INFO(r.err);
  json j = probe(r);
  CHECK(j["ids"]["uid"] == json{2000001, 2000001, 2000001});
  CHECK(j["ids"]["gid"] == json{2000002, 2000002, 2000002});
  CHECK(j["ids"]["groups"] == json{2000003});
  for (const char* k : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    INFO(k);
    CHECK(j["caps"][k] == "0000000000000000");
  }
}

TEST_CASE("iso uid outside the delegated range fails with the fix", "[userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "5000\n"}});
  RunResult r = run_probe(t, m, "coder", {"ids"});
  CHECK(r.exit_code == 125);
  CHECK(r.err == "ctx-agent-run: coder: iso uid: uid 5000 is not delegated to uid " + std::to_string(m.owner.uid) +
                     " in /etc/subuid; add a range that holds it\n");
}

TEST_CASE("a root launch refuses ids the owner is not entitled to", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  const std::string etc = t.base_mounts() + "/etc\t/hostetc\tro\tbind\n";
  const std::string owner = std::to_string(m.owner.uid);
  const std::string tail =
      "; a root launch gives an agent only ids its owner is entitled to unless root owns the file: ";
  // uid 0 in a uid file the owner wrote: refused before anything runs.
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "0\n"}, {"gid", std::to_string(m.owner.gid) + "\n"}, {"mount", etc}});
  RunResult root_uid = run_probe(t, m, "coder", {"ids", "read:/hostetc/shadow"});
  CHECK(root_uid.exit_code == 125);
  CHECK(root_uid.err == "ctx-agent-run: coder.d/uid: EPERM: uid 0 is neither the owner (" + owner +
                            ") nor in the owner's /etc/subuid ranges" + tail + "write " + owner +
                            ", delegate the uid to the owner in /etc/subuid, or have root own coder.d/uid\n");
  CHECK_FALSE(std::filesystem::exists(t.root() + "/agent/coder.d/pid"));
  // Another user's uid.
  t.agent("coder", {{"iso", "uid\n"}, {"uid", std::to_string(m.owner.uid + 1) + "\n"}, {"mount", etc}});
  CHECK(run_probe(t, m, "coder", {"ids"}).err.find("coder.d/uid: EPERM: uid " + std::to_string(m.owner.uid + 1)) !=
        std::string::npos);
  // gid 42 or groups 0 42: shadow's group is within reach otherwise.
  for (const char* iso : {"shared\n", "uid\n"}) {
    t.agent("coder", {{"iso", iso}, {"uid", owner + "\n"}, {"gid", "42\n"}, {"mount", etc}});
    RunResult g = run_probe(t, m, "coder", {"ids"});
    INFO(iso << g.err);
    CHECK(g.exit_code == 125);
    CHECK(g.err.find("ctx-agent-run: coder.d/gid: EPERM: gid 42 is not the owner's primary group") == 0);
  }
  for (const char* iso : {"shared\n", "uid\n", "userns\n"}) {
    t.agent("coder", {{"iso", iso},
                      {"uid", owner + "\n"},
                      {"gid", std::to_string(m.owner.gid) + "\n"},
                      {"groups", "0\n42\n"},
                      {"mount", etc}});
    RunResult g = run_probe(t, m, "coder", {"ids"});
    INFO(iso << g.err);
    CHECK(g.exit_code == 125);
    CHECK(g.err.find("ctx-agent-run: coder.d/groups: EPERM: gid 0 is not the owner's primary group") == 0);
  }
  // The same files owned by root are root's decision: the launch runs with
  // those ids, and the agent reads what they reach (the attack the check
  // closes for owner-written files).
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "0\n"}, {"gid", "0\n"}, {"groups", "42\n"}, {"mount", etc}});
  for (const char* f : {"uid", "gid", "groups"})
    REQUIRE(::chown((t.root() + "/agent/coder.d/" + f).c_str(), 0, 0) == 0);
  json j = probe(run_probe(t, m, "coder", {"ids", "read:/hostetc/shadow"}));
  CHECK(j["ids"]["uid"] == json{0, 0, 0});
  CHECK(j["read:/hostetc/shadow"] == "ok");
}
