// The user tier (docs/abi.md "User agents"): which tier a launch reads,
// and what load() refuses in home/<U>/agent/<name>.d.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include "agentdir/child.hpp"
#include "agentdir/load.hpp"
#include "agentdir/tier.hpp"
#include "test/support/tempdir.hpp"

using namespace ctx::agentdir;

TEST_CASE("resolve_tier: --user, one tier, both tiers", "[unit]") {
  // --user U always names the user tier of U.
  CHECK(*resolve_tier("/ctx", "coder", 1000u, 0, true, false) == Tier(1000u));
  CHECK(*resolve_tier("/ctx", "coder", 1000u, 0, false, false) == Tier(1000u));
  // Only one tier defines the name: that one.
  CHECK(*resolve_tier("/ctx", "coder", {}, 1000, true, false) == Tier());
  CHECK(*resolve_tier("/ctx", "coder", {}, 1000, false, true) == Tier(1000u));
  // Neither: the system tier, whose load says ENOENT.
  CHECK(*resolve_tier("/ctx", "coder", {}, 1000, false, false) == Tier());
  // Both, without --user: refused, naming both paths.
  auto r = resolve_tier("/ctx", "coder", {}, 1000, true, true);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EEXIST);
  CHECK(r.error().msg ==
        "coder: EEXIST: defined in both tiers, /ctx/agent/coder.d and /ctx/home/1000/agent/coder.d; name the one "
        "to launch with --system or --user 1000, or rename or remove one of them");
}

TEST_CASE("tier names never collide with a system agent's", "[unit]") {
  CHECK(agents_rel({}) == "agent");
  CHECK(agents_rel(999u) == "home/999/agent");
  CHECK(tier_instance("coder", {}) == "coder");
  CHECK(tier_instance("coder", 999u) == "coder.u999");
  CHECK(tier_display("coder", 999u) == "coder@999");
}

TEST_CASE("user_tier_errors: owner must be U, no parent", "[unit]") {
  CHECK(user_tier_errors("coder", 1000, 1000u, false).empty());
  auto e = user_tier_errors("coder", 1000, 1001u, true);
  REQUIRE(e.size() == 2);
  CHECK(e[0].code == EPERM);
  CHECK(e[0].msg ==
        "home/1000/agent/coder.d/owner: EPERM: says 1001, but a user agent in home/1000 is owned by 1000; write "
        "1000 or move the agent to its owner's home");
  CHECK(e[1].code == ENOTSUP);
}

TEST_CASE("load reads a user agent from home/<U>/agent, strictly", "[fs]") {
  ctx::test::TempDir t;
  const std::string me = std::to_string(::getuid());
  const std::string d = "home/" + me + "/agent/coder.d/";
  t.mkdir("agent");
  t.write(d + "owner", me + "\n");
  t.write(d + "gid", "0\n");
  t.write(d + "entry", "#!/bin/sh\n", 0755);
  LoadOptions user;
  user.user = ::getuid();
  auto s = load(t.path(), "coder", user);
  REQUIRE(s);
  CHECK(s->tier_user == Tier(::getuid()));
  CHECK(s->root == t.path() + "/home/" + me + "/agent/coder/root");
  // Not a system agent: the system tier has no coder.
  CHECK(load(t.path(), "coder").error().code == ENOENT);
  CHECK(*find_tier(t.path(), "coder", {}, ::getuid()) == Tier(::getuid()));
  SECTION("entry is stat'ed, unknown in the system tier") {
    auto l = read_control_files(t.path(), "coder", nullptr, ::getuid());
    REQUIRE(l);
    CHECK(l->stats.count("entry") == 1);
    CHECK(l->files.count("entry") == 0);
    CHECK(l->unknown.empty());
    CHECK(l->parents.size() == 2);
  }
  SECTION("a symlink on the way is refused") {
    t.mkdir("elsewhere/agent");
    ::rename((t / ("home/" + me + "/agent")).c_str(), (t / "elsewhere/agent2").c_str());
    t.symlink(t / "elsewhere/agent2", "home/" + me + "/agent");
    auto r = load(t.path(), "coder", user);
    REQUIRE_FALSE(r);
    CHECK((r.error().code == ENOTDIR || r.error().code == ELOOP));
    CHECK(r.error().msg.find("a symlink on the way to a user agent is refused") != std::string::npos);
  }
  SECTION("a symlinked entry is refused") {
    ::unlink((t / (d + "entry")).c_str());
    t.symlink("/bin/sh", d + "entry");
    auto r = load(t.path(), "coder", user);
    REQUIRE_FALSE(r);
    CHECK(r.error().msg == "coder.d/entry: EINVAL: not a regular file (a symlink is refused)");
  }
  SECTION("a parent file is ENOTSUP") {
    t.write(d + "parent", "agent:lead\n");
    auto r = load(t.path(), "coder", user);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ENOTSUP);
  }
  SECTION("another owner is EPERM, whoever loads") {
    t.write(d + "owner", std::to_string(::getuid() + 1) + "\n");
    auto r = load(t.path(), "coder", user);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EPERM);
  }
  SECTION("a group-writable home/<U>/agent is refused by a privileged load") {
    ::chmod((t / ("home/" + me + "/agent")).c_str(), 0775);
    LoadOptions strict = user;
    strict.require_trusted_files = true;
    auto r = load(t.path(), "coder", strict);
    REQUIRE_FALSE(r);
    CHECK(r.error().msg == "home/" + me + "/agent: EPERM: writable by group or other (mode 0775); chmod go-w it");
  }
  SECTION("both tiers: ambiguous") {
    t.mkdir("agent/coder.d");
    CHECK(find_tier(t.path(), "coder", {}, ::getuid()).error().code == EEXIST);
    CHECK(*find_tier(t.path(), "coder", ::getuid(), ::getuid()) == Tier(::getuid()));
  }
}

TEST_CASE("a privileged load refuses a user agent's file owned by another user", "[root]") {
  ctx::test::TempDir t;
  const std::string d = "home/1000/agent/coder.d/";
  t.mkdir("agent");
  t.write(d + "owner", "1000\n");
  t.write(d + "gid", "1000\n");
  t.write(d + "entry", "#!/bin/sh\n", 0755);
  for (const char* p : {"home/1000", "home/1000/agent", "home/1000/agent/coder.d", "home/1000/agent/coder.d/owner",
                        "home/1000/agent/coder.d/gid", "home/1000/agent/coder.d/entry"})
    REQUIRE(::chown((t / p).c_str(), 1000, 1000) == 0);
  LoadOptions strict;
  strict.user = 1000;
  strict.require_trusted_files = true;
  CHECK(load(t.path(), "coder", strict));
  REQUIRE(::chown((t / (d + "entry")).c_str(), 1001, 1001) == 0);
  auto r = load(t.path(), "coder", strict);
  REQUIRE_FALSE(r);
  CHECK(r.error().msg ==
        "home/1000/agent/coder.d/entry: EPERM: owned by uid 1001, not by root or the owner 1000; chown it");
  REQUIRE(::chown((t / (d + "entry")).c_str(), 1000, 1000) == 0);
  REQUIRE(::chown((t / "home/1000/agent").c_str(), 1001, 1001) == 0);
  r = load(t.path(), "coder", strict);
  REQUIRE_FALSE(r);
  CHECK(r.error().msg == "home/1000/agent: EPERM: owned by uid 1001, not by root or the owner 1000; chown it");
}

TEST_CASE("a user agent has no owned children nor parent (v0)", "[unit]") {
  AgentSpec parent, child;
  parent.name = "lead";
  child.name = "kid";
  parent.tier_user = 1000u;
  auto r = check_child(parent, child);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ENOTSUP);
  parent.tier_user.reset();
  child.tier_user = 1000u;
  CHECK(check_child(parent, child).error().code == ENOTSUP);
}
