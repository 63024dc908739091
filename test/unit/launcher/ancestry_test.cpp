// An owned child's ancestry, with agents given in code (no disk).
#include <catch2/catch.hpp>

#include <map>

#include "launcher/plan/ancestry.hpp"

using ctx::agentdir::AgentSpec;
using ctx::agentdir::IdentitySource;

namespace {

AgentSpec agent(const std::string& name, const std::string& parent, IdentitySource ids) {
  AgentSpec s;
  s.name = name;
  s.ctx_root = "/srv/ctx";
  s.owner = 1000;
  if (!parent.empty()) s.parent = ctx::agentdir::Parent{parent, "default", "r1"};
  s.id_source = ids;
  return s;
}

}  // namespace

TEST_CASE("a child's ids are root's decision only where every ancestor's are", "[unit]") {
  std::map<std::string, AgentSpec> tree{
      {"top", agent("top", "", {true, false, true})},    // root wrote uid and groups, the owner gid
      {"mid", agent("mid", "top", {true, true, true})},  // written by a root supervisor
  };
  auto load = [&](const std::string& n) -> ctx::Result<AgentSpec> {
    auto it = tree.find(n);
    if (it == tree.end()) return ctx::fail(ENOENT, n + ": ENOENT");
    return it->second;
  };
  AgentSpec leaf = agent("leaf", "mid", {true, true, true});
  ctx::launcher::PlanOptions po;
  REQUIRE(ctx::launcher::plan_ancestry(leaf, po, load));
  CHECK(leaf.id_source == IdentitySource{true, false, true});
  CHECK(po.hidden_dirs ==
        std::vector<std::string>{"/srv/ctx/home/1000/agent/mid/session", "/srv/ctx/home/1000/agent/top/session"});
  // An ancestor that cannot be read vouches for nothing.
  tree.erase("top");
  AgentSpec orphan = agent("leaf", "mid", {true, true, true});
  ctx::launcher::PlanOptions po2;
  REQUIRE(ctx::launcher::plan_ancestry(orphan, po2, load));
  CHECK(orphan.id_source == IdentitySource{});
  // A parent that cannot be read: the child is not launched.
  AgentSpec lost = agent("leaf", "gone", {true, true, true});
  ctx::launcher::PlanOptions po3;
  auto r = ctx::launcher::plan_ancestry(lost, po3, load);
  REQUIRE_FALSE(r);
  CHECK(r.error().msg.rfind("leaf: its parent gone cannot be read (gone: ENOENT)", 0) == 0);
}
