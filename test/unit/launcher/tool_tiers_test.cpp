// The tool gate's pure decisions (launcher/control/tool_gate.hpp): which
// tiers of the planned CTX_PATH hold tools the gate decides on, and where
// each lies below the CTX root.
#include <catch2/catch.hpp>

#include "launcher/control/tool_gate.hpp"

using ctx::launcher::LaunchPlan;
using ctx::launcher::ToolTier;
using ctx::mountspec::MountStep;

namespace {

MountStep bind(std::string target, std::string source, bool noexec = false) {
  ctx::mountspec::BindStep s;
  s.target = std::move(target);
  s.source = std::move(source);
  s.attrs.noexec = noexec;
  return s;
}

LaunchPlan plan_with(std::string ctx_path) {
  LaunchPlan p;
  p.ctx_root = "/srv/ctx";
  p.env = {"PATH=/usr/bin", "CTX_PATH=" + std::move(ctx_path)};
  ctx::mountspec::RootStep root;
  root.source = "/anchor";
  ctx::mountspec::ViewStep view;
  view.target = "/ctx";
  ctx::mountspec::MaskStep mask;
  mask.target = "/ctx/tool/hidden";
  p.mounts = {root, view, bind("/opt/tools", "/srv/ctx/shared/team/tool", true), bind("/usr/local/bin", "/usr/local/bin"),
              mask};
  return p;
}

std::string shown(const std::vector<ToolTier>& tiers) {
  std::string out;
  for (const auto& t : tiers) out += t.inner + "=" + t.rel + (t.noexec ? "(noexec) " : " ");
  return out;
}

}  // namespace

TEST_CASE("tool tiers: CTX_PATH's entries in the CTX tree, in order, once each", "[unit]") {
  LaunchPlan p =
      plan_with("/ctx/tool:/opt/tools:/usr/local/bin:/ctx/tool/hidden:relative::/ctx/tool:/ctx/home/1000/tool");
  // Outside the CTX root (a bind of /usr/local/bin), under a mask, not
  // absolute, empty or repeated: left out.
  CHECK(shown(ctx::launcher::tool_tiers(p)) ==
        "/ctx/tool=tool /opt/tools=shared/team/tool(noexec) /ctx/home/1000/tool=home/1000/tool ");
  CHECK(shown(ctx::launcher::tool_tiers(plan_with(""))).empty());
}

TEST_CASE("tool tiers: a direct call's tier is any the plan shows from the CTX tree", "[unit]") {
  LaunchPlan p = plan_with("/ctx/tool");
  auto t = ctx::launcher::tier_at(p, "/opt/tools/sub");  // not in CTX_PATH: still a tier the view shows
  REQUIRE(t);
  CHECK(t->rel == "shared/team/tool/sub");
  CHECK(t->noexec);
  t = ctx::launcher::tier_at(p, "/ctx");
  REQUIRE(t);
  CHECK(t->rel.empty());  // the CTX root itself
  CHECK_FALSE(ctx::launcher::tier_at(p, "/usr/local/bin"));
  CHECK_FALSE(ctx::launcher::tier_at(p, "/ctx/tool/hidden/x"));
  CHECK_FALSE(ctx::launcher::tier_at(p, "/etc"));  // only the root's clone covers it
}
