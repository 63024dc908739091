#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "policy/policy.hpp"
#include "test/support/tempdir.hpp"

using namespace ctx::policy;

namespace {


Policy parsed(const std::string& text) {
  auto p = Policy::parse("p", text);
  REQUIRE(p);
  return *p;
}

}  // namespace

TEST_CASE("policy corpus: every bad policy fails with its exact message", "[unit]") {
  std::string dir = ctx::test::data_dir() + "/policy/bad/";
  auto cases = ctx::test::names_in(dir, ".policy");
  REQUIRE(cases.size() >= 20);
  for (const auto& c : cases) {
    INFO(c);
    std::string want = ctx::test::read_file(dir + c + ".err");
    want.pop_back();
    auto r = Policy::parse("coder.d/policy", ctx::test::read_file(dir + c + ".policy"));
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EINVAL);
    CHECK(r.error().msg == want);
  }
}

TEST_CASE("policy corpus: good policies parse and format back", "[unit]") {
  std::string dir = ctx::test::data_dir() + "/policy/good/";
  for (const auto& c : ctx::test::names_in(dir, ".policy")) {
    INFO(c);
    Policy p = parsed(ctx::test::read_file(dir + c + ".policy"));
    std::string out;
    for (const auto& r : p.rules()) out += format_rule(r) + "\n";
    CHECK(out == ctx::test::read_file(dir + c + ".out"));
  }
}

TEST_CASE("default deny: exact matches only, no inheritance, no globs", "[unit]") {
  Policy p = parsed("allow coder_t tool:fs.read execute\nallow coder_t agent:reviewer create\n");
  CHECK(p.allows("coder_t", Class::tool, "fs.read", "execute"));
  CHECK_FALSE(p.allows("coder_t", Class::tool, "fs.write", "execute"));
  CHECK_FALSE(p.allows("reviewer_t", Class::tool, "fs.read", "execute"));
  CHECK_FALSE(p.allows("coder_t", Class::agent, "reviewer", "start"));
  CHECK_FALSE(p.allows("coder_t", Class::agent, "*", "create"));
  CHECK_FALSE(p.allows("coder_t", Class::model, "fs.read", "execute"));
  CHECK_FALSE(p.allows("", Class::tool, "fs.read", "execute"));
  CHECK_FALSE(Policy().allows("coder_t", Class::network, "default", "connect"));
  auto rule = p.find("coder_t", Class::agent, "reviewer", "create");
  REQUIRE(rule);
  CHECK(rule->line == 2);
}

TEST_CASE("parse collects every error", "[unit]") {
  std::vector<ctx::Error> all;
  auto r = Policy::parse("f", "allow a_t tool:x execute\ndeny a_t tool:x execute\nallow a_t tool:x run\n", &all);
  REQUIRE_FALSE(r);
  REQUIRE(all.size() == 2);
  CHECK(all[0].msg.rfind("f:2:1: EINVAL: policy v0 has no deny rules", 0) == 0);
  CHECK(all[1].msg == "f:3:18: EINVAL: unknown permission 'run' for class tool (tool permits: execute)");
}

TEST_CASE("the fixed permission table", "[unit]") {
  CHECK(permissions_of(Class::tool) == std::vector<std::string_view>{"execute"});
  CHECK(permissions_of(Class::model) == std::vector<std::string_view>{"use"});
  CHECK(permissions_of(Class::shared) == std::vector<std::string_view>{"read", "write"});
  CHECK(permissions_of(Class::session) == std::vector<std::string_view>{"read", "write", "resume"});
  CHECK(permissions_of(Class::mount) == std::vector<std::string_view>{"read", "write"});
  CHECK(permissions_of(Class::agent) == std::vector<std::string_view>{"create", "start", "stop", "read", "write"});
  CHECK(permissions_of(Class::network) == std::vector<std::string_view>{"connect"});
  CHECK_FALSE(class_from("file"));
  CHECK(class_from("session") == Class::session);
}

TEST_CASE("check_subset: a child holds only what its parent holds", "[unit]") {
  Policy parent = parsed("allow coder_t tool:fs.read execute\nallow coder_t shared:project-a read\n");
  CHECK(check_subset(parent, "coder_t", parsed("allow rev_t tool:fs.read execute\n"), "rev_t"));
  CHECK(check_subset(parent, "coder_t", Policy(), "rev_t"));
  auto wider = check_subset(parent, "coder_t", parsed("allow rev_t tool:fs.read execute\nallow rev_t tool:shell.exec execute\n"), "rev_t");
  REQUIRE_FALSE(wider);
  CHECK(wider.error().code == EACCES);
  CHECK(wider.error().reason == "exceeds_parent_policy");
  CHECK(wider.error().msg == "child policy line 2: allow rev_t tool:shell.exec execute: EACCES: the parent (coder_t) does "
                             "not hold tool:shell.exec execute");
  auto rw = check_subset(parent, "coder_t", parsed("allow rev_t shared:project-a write\n"), "rev_t");
  REQUIRE_FALSE(rw);
  CHECK(rw.error().reason == "exceeds_parent_policy");
  auto other = check_subset(parent, "coder_t", parsed("allow coder_t tool:fs.read execute\n"), "rev_t");
  REQUIRE_FALSE(other);
  CHECK(other.error().code == EINVAL);
  CHECK(other.error().reason == "wrong_subject");
  CHECK(other.error().msg == "child policy line 1: allow coder_t tool:fs.read execute: EINVAL: names subject coder_t, "
                             "but the child's type is rev_t");
  auto nolabel = check_subset(parent, "coder_t", parsed("allow rev_t tool:fs.read execute\n"), "");
  REQUIRE_FALSE(nolabel);
  CHECK(nolabel.error().reason == "wrong_subject");
  // A parent without a label holds nothing.
  CHECK_FALSE(check_subset(parent, "", parsed("allow rev_t tool:fs.read execute\n"), "rev_t"));
}

TEST_CASE("property: subsets of the parent pass, anything more fails", "[unit]") {
  std::mt19937 rng(7);
  const char* tools[] = {"fs.read", "fs.write", "shell.exec", "x.y"};
  const char* spaces[] = {"p", "q"};
  auto random_rule = [&](const std::string& subject) {
    Rule r;
    r.subject = subject;
    switch (rng() % 3) {
      case 0:
        r.cls = Class::tool;
        r.object = tools[rng() % 4];
        r.permission = "execute";
        break;
      case 1:
        r.cls = Class::shared;
        r.object = spaces[rng() % 2];
        r.permission = rng() % 2 ? "read" : "write";
        break;
      default:
        r.cls = Class::agent;
        r.object = "rev";
        r.permission = std::string(permissions_of(Class::agent)[rng() % 5]);
        break;
    }
    return r;
  };
  for (int iter = 0; iter < 2000; ++iter) {
    std::vector<Rule> pr;
    for (int i = 0, n = static_cast<int>(rng() % 6); i < n; ++i) pr.push_back(random_rule("par_t"));
    Policy parent = *Policy::from_rules(pr);
    std::vector<Rule> cr;
    for (const auto& r : pr)
      if (rng() % 2) {
        Rule c = r;
        c.subject = "kid_t";
        cr.push_back(c);
      }
    Policy child = *Policy::from_rules(cr);
    CHECK(check_subset(parent, "par_t", child, "kid_t"));
    Rule extra = random_rule("kid_t");
    bool held = parent.allows("par_t", extra.cls, extra.object, extra.permission);
    cr.push_back(extra);
    auto r = check_subset(parent, "par_t", *Policy::from_rules(cr), "kid_t");
    CHECK(static_cast<bool>(r) == held);
  }
}

TEST_CASE("explain names the rule or its absence", "[unit]") {
  Policy p = parsed("allow coder_t tool:fs.write execute\nallow coder_t tool:fs.read execute\n");
  auto req = parse_request("tool:fs.read", "execute");
  REQUIRE(req);
  auto e = explain(p, "coder_t", *req);
  CHECK(e.allowed);
  CHECK(e.text == "allowed by policy line 2: allow coder_t tool:fs.read execute");
  auto d = explain(p, "coder_t", *parse_request("shared:project-a", "write"));
  CHECK_FALSE(d.allowed);
  CHECK(d.text == "denied: no rule 'allow coder_t shared:project-a write' (policy v0 is default deny)");
  CHECK(explain(p, "", *req).text == "denied: the agent has no label, so policy v0 denies everything");
  auto bad = parse_request("tool:fs.read", "exec");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().msg == "tool:fs.read exec: EINVAL: unknown permission 'exec' for class tool (tool permits: execute)");
}
