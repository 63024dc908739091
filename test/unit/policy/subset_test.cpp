// Attenuation: a child's policy lies within its parent's.
#include <algorithm>
#include <catch2/catch.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "policy/policy.hpp"

using ctx::policy::check_subset;
using ctx::policy::Class;
using ctx::policy::format_rule;
using ctx::policy::Policy;
using ctx::policy::Rule;

namespace {

Policy parsed(const std::string& text) {
  auto p = Policy::parse("child.d/policy", text);
  REQUIRE(p);
  return *p;
}

const Policy& coder() {
  static const Policy p = [] {
    auto r = Policy::parse("coder.d/policy",
                           "allow coder_t tool:fs.read execute\n"
                           "allow coder_t shared:project-a read\n"
                           "allow coder_t mount:/work read\n"
                           "allow other_t tool:shell.exec execute\n");
    return *r;
  }();
  return p;
}

}  // namespace

TEST_CASE("check_subset: rules the parent holds pass", "[unit]") {
  CHECK(check_subset(coder(), "coder_t", parsed("allow rev_t tool:fs.read execute\n"), "rev_t"));
  CHECK(check_subset(coder(), "coder_t",
                     parsed("allow rev_t mount:/work read\n# note\nallow rev_t shared:project-a read\n"), "rev_t"));
  // Duplicates in the child change nothing.
  CHECK(check_subset(coder(), "coder_t", parsed("allow rev_t tool:fs.read execute\nallow rev_t tool:fs.read execute\n"),
                     "rev_t"));
  // An empty child is within any parent, labelled or not.
  CHECK(check_subset(coder(), "coder_t", Policy(), "rev_t"));
  CHECK(check_subset(coder(), "coder_t", Policy(), ""));
  CHECK(check_subset(Policy(), "", Policy(), ""));
  // The child may carry the parent's own type.
  CHECK(check_subset(coder(), "coder_t", parsed("allow coder_t tool:fs.read execute\n"), "coder_t"));
}

TEST_CASE("check_subset: a rule the parent lacks is EACCES exceeds_parent_policy", "[unit]") {
  auto wider = check_subset(coder(), "coder_t",
                            parsed("allow rev_t tool:fs.read execute\nallow rev_t tool:shell.exec execute\n"), "rev_t");
  REQUIRE_FALSE(wider);
  CHECK(wider.error().code == EACCES);
  CHECK(wider.error().reason == "exceeds_parent_policy");
  CHECK(wider.error().msg ==
        "child policy line 2: allow rev_t tool:shell.exec execute: EACCES: the parent (coder_t) does not hold "
        "tool:shell.exec execute");

  SECTION("read does not give write") {
    auto rw = check_subset(coder(), "coder_t", parsed("allow rev_t shared:project-a write\n"), "rev_t");
    REQUIRE_FALSE(rw);
    CHECK(rw.error().reason == "exceeds_parent_policy");
    CHECK(rw.error().msg ==
          "child policy line 1: allow rev_t shared:project-a write: EACCES: the parent (coder_t) does not hold "
          "shared:project-a write");
  }
  SECTION("no path matching: a mount below the parent's is another object") {
    auto sub = check_subset(coder(), "coder_t", parsed("allow rev_t mount:/work/src read\n"), "rev_t");
    REQUIRE_FALSE(sub);
    CHECK(sub.error().msg ==
          "child policy line 1: allow rev_t mount:/work/src read: EACCES: the parent (coder_t) does not hold "
          "mount:/work/src read");
  }
  SECTION("what another subject holds in the parent's file is not the parent's") {
    auto other = check_subset(coder(), "coder_t", parsed("allow rev_t tool:shell.exec execute\n"), "rev_t");
    REQUIRE_FALSE(other);
    CHECK(other.error().reason == "exceeds_parent_policy");
    CHECK(check_subset(coder(), "other_t", parsed("allow rev_t tool:shell.exec execute\n"), "rev_t"));
  }
  SECTION("a parent without a label holds nothing") {
    auto nolabel = check_subset(coder(), "", parsed("allow rev_t tool:fs.read execute\n"), "rev_t");
    REQUIRE_FALSE(nolabel);
    CHECK(nolabel.error().code == EACCES);
    CHECK(nolabel.error().reason == "exceeds_parent_policy");
    CHECK(nolabel.error().msg ==
          "child policy line 1: allow rev_t tool:fs.read execute: EACCES: the parent has no label, so it holds "
          "nothing (not tool:fs.read execute)");
  }
  SECTION("rules made in code are named by their position") {
    auto child = Policy::from_rules(
        {Rule{"rev_t", Class::tool, "fs.read", "execute", 0}, Rule{"rev_t", Class::network, "default", "connect", 0}});
    REQUIRE(child);
    auto r = check_subset(coder(), "coder_t", *child, "rev_t");
    REQUIRE_FALSE(r);
    CHECK(r.error().msg ==
          "child policy rule 2: allow rev_t network:default connect: EACCES: the parent (coder_t) does not "
          "hold "
          "network:default connect");
  }
}

TEST_CASE("check_subset: a rule for another subject is EINVAL wrong_subject", "[unit]") {
  auto other = check_subset(coder(), "coder_t", parsed("allow coder_t tool:fs.read execute\n"), "rev_t");
  REQUIRE_FALSE(other);
  CHECK(other.error().code == EINVAL);
  CHECK(other.error().reason == "wrong_subject");
  CHECK(other.error().msg ==
        "child policy line 1: allow coder_t tool:fs.read execute: EINVAL: names subject coder_t, but the "
        "child's "
        "type is rev_t");

  SECTION("the first offending rule is named, whatever its kind") {
    auto first = check_subset(coder(), "coder_t",
                              parsed("allow rev_t tool:fs.read execute\n"
                                     "allow x_t tool:fs.read execute\n"
                                     "allow rev_t tool:shell.exec execute\n"),
                              "rev_t");
    REQUIRE_FALSE(first);
    CHECK(first.error().reason == "wrong_subject");
    CHECK(first.error().msg.rfind("child policy line 2: ", 0) == 0);
    auto second = check_subset(coder(), "coder_t",
                               parsed("allow rev_t tool:shell.exec execute\n"
                                      "allow x_t tool:fs.read execute\n"),
                               "rev_t");
    REQUIRE_FALSE(second);
    CHECK(second.error().reason == "exceeds_parent_policy");
  }
  SECTION("a child without a label may have no rules") {
    auto nolabel = check_subset(coder(), "coder_t", parsed("allow rev_t tool:fs.read execute\n"), "");
    REQUIRE_FALSE(nolabel);
    CHECK(nolabel.error().code == EINVAL);
    CHECK(nolabel.error().reason == "wrong_subject");
    CHECK(nolabel.error().msg ==
          "child policy line 1: allow rev_t tool:fs.read execute: EINVAL: the child has no label, so no rule "
          "can "
          "apply to it; give it a label or an empty policy");
  }
}

TEST_CASE("property: children built from the parent's rules pass, any other rule fails", "[unit]") {
  // Every rule over a small universe of objects, for one subject.
  auto universe = [](const std::string& subject) {
    const std::vector<std::pair<Class, std::vector<std::string>>> objects{
        {Class::tool, {"fs.read", "fs.write", "shell.exec"}},
        {Class::model, {"debug/echo", "openai/gpt-4o"}},
        {Class::shared, {"p", "q"}},
        {Class::session, {"s"}},
        {Class::mount, {"/work", "/work/src"}},
        {Class::agent, {"rev"}},
        {Class::network, {"default"}},
    };
    std::vector<Rule> all;
    for (const auto& [cls, names] : objects)
      for (const auto& o : names)
        for (auto perm : ctx::policy::permissions_of(cls)) all.push_back(Rule{subject, cls, o, std::string(perm), 0});
    return all;
  };
  const std::vector<Rule> parent_universe = universe("par_t");
  const std::vector<Rule> other_universe = universe("oth_t");
  const std::vector<Rule> child_universe = universe("kid_t");
  REQUIRE(parent_universe.size() == 22);

  std::mt19937 rng(20240622);
  int passed = 0;
  int refused = 0;
  for (int iter = 0; iter < 500; ++iter) {
    // A random parent policy, with rules of another subject mixed in, in
    // random order and with some duplicates.
    std::vector<Rule> pr;
    std::set<std::string> held;
    for (const auto& r : parent_universe)
      if (rng() % 3 == 0) {
        pr.push_back(r);
        held.insert(format_rule(r).substr(std::string("allow par_t ").size()));
      }
    for (const auto& r : other_universe)
      if (rng() % 4 == 0) pr.push_back(r);
    if (!pr.empty())
      for (int d = static_cast<int>(rng() % 3); d > 0; --d) pr.push_back(pr[rng() % pr.size()]);
    std::shuffle(pr.begin(), pr.end(), rng);
    for (std::size_t i = 0; i < pr.size(); ++i) pr[i].line = static_cast<int>(i) + 1;
    auto parent = Policy::from_rules(pr);
    REQUIRE(parent);

    // A child from a random subset of the parent's own rules, renamed.
    std::vector<Rule> cr;
    for (const auto& r : pr)
      if (r.subject == "par_t" && rng() % 2 == 0) {
        Rule c = r;
        c.subject = "kid_t";
        c.line = static_cast<int>(cr.size()) + 1;
        cr.push_back(c);
      }
    auto child = Policy::from_rules(cr);
    REQUIRE(child);
    auto ok = check_subset(*parent, "par_t", *child, "kid_t");
    CHECK(ok);
    passed += ok ? 1 : 0;

    // Adding any rule: passes exactly when the parent holds it.
    for (const auto& extra : child_universe) {
      const std::string what = format_rule(extra).substr(std::string("allow kid_t ").size());
      std::vector<Rule> more = cr;
      more.push_back(extra);
      more.back().line = static_cast<int>(more.size());
      auto wider = Policy::from_rules(more);
      REQUIRE(wider);
      auto r = check_subset(*parent, "par_t", *wider, "kid_t");
      if (held.count(what) != 0) {
        CHECK(r);
      } else {
        INFO(format_rule(extra));
        REQUIRE_FALSE(r);
        CHECK(r.error().code == EACCES);
        CHECK(r.error().reason == "exceeds_parent_policy");
        CHECK(r.error().msg == "child policy line " + std::to_string(more.size()) + ": " + format_rule(extra) +
                                   ": EACCES: the parent (par_t) does not hold " + what);
        ++refused;
      }
    }
  }
  CHECK(passed == 500);
  CHECK(refused > 1000);
}
