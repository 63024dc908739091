// The mount class of policy v0: every table line needs read on its
// target, a rw line write as well (docs/abi-policy.md, "What each class
// gates").
#include <catch2/catch.hpp>

#include "agentdir/mount_rules.hpp"

using ctx::agentdir::check_mount_policy;
using ctx::agentdir::mount_policy_errors;
using ctx::agentdir::mount_rules;
using ctx::policy::Policy;

namespace {

ctx::mountspec::Table table() {
  return *ctx::mountspec::parse("coder.d/mount",
                                "/usr\t/usr\tro\trbind,nodev\n"
                                "/home/me/project\t/work\trw\tbind,nosuid,nodev\n");
}

Policy policy(const std::string& text) { return *Policy::parse("coder.d/policy", text); }

}  // namespace

TEST_CASE("mount rules: each line needs read on its target, a rw line write too", "[unit]") {
  auto t = table();
  auto all = policy(
      "allow coder_t mount:/usr read\n"
      "allow coder_t mount:/work read\n"
      "allow coder_t mount:/work write\n");
  CHECK(check_mount_policy("coder", t, all, "coder_t"));
  CHECK(mount_policy_errors("coder", t, all, "coder_t").empty());

  // A ro line without its rule: refused at its line, naming the rule.
  auto no_usr = policy("allow coder_t mount:/work read\nallow coder_t mount:/work write\n");
  auto r = check_mount_policy("coder", t, no_usr, "coder_t");
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EACCES);
  CHECK(r.error().reason == "mount_policy");
  CHECK(r.error().msg ==
        "coder.d/mount:1: EACCES: ro mount /usr -> /usr needs 'allow coder_t mount:/usr read' in coder.d/policy; "
        "add the rule or remove the line");

  // rw needs write: read alone is not enough, and write alone neither.
  auto read_only = policy("allow coder_t mount:/usr read\nallow coder_t mount:/work read\n");
  r = check_mount_policy("coder", t, read_only, "coder_t");
  REQUIRE_FALSE(r);
  CHECK(r.error().msg ==
        "coder.d/mount:2: EACCES: rw mount /home/me/project -> /work needs 'allow coder_t mount:/work write' in "
        "coder.d/policy; add the rule or remove the line");
  auto write_only = policy("allow coder_t mount:/usr read\nallow coder_t mount:/work write\n");
  r = check_mount_policy("coder", t, write_only, "coder_t");
  REQUIRE_FALSE(r);
  CHECK(r.error().msg.find("'allow coder_t mount:/work read'") != std::string::npos);

  // The object is the target, exactly: the source, or a path above or
  // below the target, allows nothing.
  for (const char* other : {"allow coder_t mount:/home/me/project read\nallow coder_t mount:/home/me/project write\n",
                            "allow coder_t mount:/work/src read\n", "allow coder_t mount:/ read\n"}) {
    auto p = policy(std::string("allow coder_t mount:/usr read\n") + other);
    CHECK_FALSE(check_mount_policy("coder", t, p, "coder_t"));
  }

  // Another subject's rules are not the agent's.
  auto theirs = policy(
      "allow rev_t mount:/usr read\n"
      "allow rev_t mount:/work read\n"
      "allow rev_t mount:/work write\n");
  CHECK(mount_policy_errors("coder", t, theirs, "coder_t").size() == 2);
}

TEST_CASE("mount rules: no label, no mount; every line is reported once", "[unit]") {
  auto t = table();
  auto errors = mount_policy_errors("coder", t, policy(""), "");
  REQUIRE(errors.size() == 2);
  CHECK(errors[0].msg ==
        "coder.d/mount:1: EACCES: ro mount /usr -> /usr: the agent has no label, so its policy allows no mount; "
        "give it a label and the rule 'allow <its type> mount:/usr read'");
  CHECK(errors[1].reason == "mount_policy");
  // An empty table needs nothing.
  CHECK(check_mount_policy("coder", {}, policy(""), ""));
}

TEST_CASE("mount rules derived from a table allow exactly that table", "[unit]") {
  auto t = table();
  auto rules = mount_rules(t, "coder_t");
  REQUIRE(rules.size() == 3);
  CHECK(ctx::policy::format_rule(rules[0]) == "allow coder_t mount:/usr read");
  CHECK(ctx::policy::format_rule(rules[1]) == "allow coder_t mount:/work read");
  CHECK(ctx::policy::format_rule(rules[2]) == "allow coder_t mount:/work write");
  auto p = Policy::from_rules(rules);
  REQUIRE(p);
  CHECK(check_mount_policy("coder", t, *p, "coder_t"));
  // Made read-only, the table needs no write.
  for (auto& e : t) e.attrs.rdonly = true;
  CHECK(mount_rules(t, "coder_t").size() == 2);
}
