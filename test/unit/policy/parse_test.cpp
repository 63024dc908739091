// Policy v0 grammar: the corpora under test/data/policy and the rules made
// in code (from_rules).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "policy/policy.hpp"
#include "test/support/tempdir.hpp"

using ctx::policy::Class;
using ctx::policy::format_rule;
using ctx::policy::Policy;
using ctx::policy::Rule;

namespace {

std::string without_newline(std::string s) {
  REQUIRE(!s.empty());
  REQUIRE(s.back() == '\n');
  s.pop_back();
  return s;
}

Rule rule(std::string subject, Class cls, std::string object, std::string permission, int line = 0) {
  return Rule{std::move(subject), cls, std::move(object), std::move(permission), line};
}

}  // namespace

TEST_CASE("policy corpus: every bad policy fails with its exact first message", "[unit]") {
  const std::string dir = ctx::test::data_dir() + "/policy/bad/";
  const auto cases = ctx::test::names_in(dir, ".policy");
  REQUIRE(cases.size() >= 78);
  for (const auto& c : cases) {
    INFO("bad/" << c << ".policy");
    const std::string want = without_newline(ctx::test::read_file(dir + c + ".err"));
    std::vector<ctx::Error> all;
    auto r = Policy::parse("coder.d/policy", ctx::test::read_file(dir + c + ".policy"), &all);
    REQUIRE_FALSE(r);
    CHECK(r.error().msg == want);
    // The code is the one the message names.
    CHECK(r.error().msg.find(": " + ctx::errno_name(r.error().code) + ": ") != std::string::npos);
    CHECK(r.error().reason.empty());
    REQUIRE_FALSE(all.empty());
    CHECK(all.front() == r.error());
  }
}

TEST_CASE("policy corpus: good policies parse, with their lines, and format back", "[unit]") {
  const std::string dir = ctx::test::data_dir() + "/policy/good/";
  const auto cases = ctx::test::names_in(dir, ".policy");
  REQUIRE(cases.size() >= 7);
  for (const auto& c : cases) {
    INFO("good/" << c << ".policy");
    std::vector<ctx::Error> all;
    auto p = Policy::parse("coder.d/policy", ctx::test::read_file(dir + c + ".policy"), &all);
    REQUIRE(p);
    CHECK(all.empty());
    std::string out;
    std::string text;
    for (const auto& r : p->rules()) {
      out += std::to_string(r.line) + ": " + format_rule(r) + "\n";
      text += format_rule(r) + "\n";
      CHECK(p->allows(r.subject, r.cls, r.object, r.permission));
    }
    CHECK(out == ctx::test::read_file(dir + c + ".out"));
    // Built again from its rules, the policy is the same one.
    auto same = Policy::from_rules(p->rules());
    REQUIRE(same);
    CHECK(*same == *p);
    // Formatted rules parse back to the same rules (lines renumbered).
    auto again = Policy::parse("again", text);
    REQUIRE(again);
    REQUIRE(again->rules().size() == p->rules().size());
    for (std::size_t i = 0; i < p->rules().size(); ++i) {
      Rule want = p->rules()[i];
      want.line = static_cast<int>(i) + 1;
      CHECK(again->rules()[i] == want);
    }
  }
}

TEST_CASE("parse with `all` collects every error in file order and returns the first", "[unit]") {
  std::vector<ctx::Error> all;
  auto r = Policy::parse("f.d/policy",
                         "allow a_t tool:x execute\n"
                         "deny a_t tool:x execute\n"
                         "# fine\n"
                         "allow a_t tool:x run\n"
                         "allow a_t agent:* create\n"
                         "allow a_t tool:y execute\n",
                         &all);
  REQUIRE_FALSE(r);
  REQUIRE(all.size() == 3);
  CHECK(all[0].msg ==
        "f.d/policy:2:1: EINVAL: policy v0 has no deny rules; remove the line: everything not allowed is "
        "denied");
  CHECK(all[1].msg == "f.d/policy:4:18: EINVAL: unknown permission 'run' for class tool (tool permits: execute)");
  CHECK(all[2].msg == "f.d/policy:5:17: EINVAL: no globs in policy v0; write one rule per name");
  CHECK(r.error() == all[0]);
  for (const auto& e : all) CHECK(e.code == EINVAL);
}

TEST_CASE("an unknown class or permission suggests the one close match", "[unit]") {
  const std::string cls = "(classes: tool, model, shared, session, mount, agent, network)";
  const std::string tool = "for class tool (tool permits: execute)";
  const std::vector<std::pair<std::string, std::string>> cases{
      // A class typo, a swap, a case difference, a prefix.
      {"allow coder_t tol:fs.read execute", "p:1:15: EINVAL: unknown class 'tol' " + cls + "; did you mean tool?"},
      {"allow coder_t netwrok:default connect",
       "p:1:15: EINVAL: unknown class 'netwrok' " + cls + "; did you mean network?"},
      {"allow coder_t Tool:fs.read execute", "p:1:15: EINVAL: unknown class 'Tool' " + cls + "; did you mean tool?"},
      {"allow coder_t sess:s read", "p:1:15: EINVAL: unknown class 'sess' " + cls + "; did you mean session?"},
      // Garbage, too far, or as close to agent as to mount: no suggestion.
      {"allow coder_t file:x read", "p:1:15: EINVAL: unknown class 'file' " + cls},
      {"allow coder_t zzz:x read", "p:1:15: EINVAL: unknown class 'zzz' " + cls},
      {"allow coder_t agount:x read", "p:1:15: EINVAL: unknown class 'agount' " + cls},
      // A permission typo, a prefix, a case difference.
      {"allow coder_t tool:fs.read exceute",
       "p:1:28: EINVAL: unknown permission 'exceute' " + tool + "; did you mean execute?"},
      {"allow coder_t tool:fs.read exec",
       "p:1:28: EINVAL: unknown permission 'exec' " + tool + "; did you mean execute?"},
      {"allow coder_t tool:fs.read EXECUTE",
       "p:1:28: EINVAL: unknown permission 'EXECUTE' " + tool + "; did you mean execute?"},
      {"allow coder_t agent:rev strat",
       "p:1:25: EINVAL: unknown permission 'strat' for class agent (agent permits: create start stop read "
       "write); did you mean start?"},
      // The suggestion is a word of the table; the quoted input stays escaped.
      {"allow coder_t tool:fs.read exe\x01ute",
       "p:1:28: EINVAL: unknown permission 'exe\\x01ute' " + tool + "; did you mean execute?"},
      // A permission of another class names that class.
      {"allow coder_t tool:fs.read use",
       "p:1:28: EINVAL: unknown permission 'use' " + tool + "; use is a permission of model"},
      {"allow coder_t tool:fs.read read", "p:1:28: EINVAL: unknown permission 'read' " + tool +
                                              "; read is a permission of shared, session, mount and agent"},
      {"allow coder_t network:default write",
       "p:1:31: EINVAL: unknown permission 'write' for class network (network permits: connect); write is a "
       "permission of shared, session, mount and agent"},
      {"allow coder_t shared:p resume",
       "p:1:24: EINVAL: unknown permission 'resume' for class shared (shared permits: read write); resume is "
       "a permission of session"},
      // Garbage, too far, or two equally close (read and resume): no suggestion.
      {"allow coder_t tool:fs.read xyzzy", "p:1:28: EINVAL: unknown permission 'xyzzy' " + tool},
      {"allow coder_t tool:fs.read run", "p:1:28: EINVAL: unknown permission 'run' " + tool},
      {"allow coder_t tool:fs.read ex", "p:1:28: EINVAL: unknown permission 'ex' " + tool},
      {"allow coder_t session:s readme",
       "p:1:25: EINVAL: unknown permission 'readme' for class session (session permits: read write resume)"},
  };
  for (const auto& [line, msg] : cases) {
    INFO(line);
    auto r = Policy::parse("p", line + "\n");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EINVAL);
    CHECK(r.error().msg == msg);
  }
}

TEST_CASE("parse with `all` gives every faulty line its own suggestion", "[unit]") {
  std::vector<ctx::Error> all;
  auto r = Policy::parse("p",
                         "allow a_t tol:x execute\n"
                         "allow a_t tool:x exec\n"
                         "allow a_t tool:x use\n"
                         "allow a_t tool:x run\n",
                         &all);
  REQUIRE_FALSE(r);
  REQUIRE(all.size() == 4);
  CHECK(all[0].msg ==
        "p:1:11: EINVAL: unknown class 'tol' (classes: tool, model, shared, session, mount, agent, network); "
        "did you mean tool?");
  CHECK(all[1].msg ==
        "p:2:18: EINVAL: unknown permission 'exec' for class tool (tool permits: execute); did you mean "
        "execute?");
  CHECK(all[2].msg ==
        "p:3:18: EINVAL: unknown permission 'use' for class tool (tool permits: execute); use is a "
        "permission of model");
  CHECK(all[3].msg == "p:4:18: EINVAL: unknown permission 'run' for class tool (tool permits: execute)");
  CHECK(r.error() == all[0]);
  for (const auto& e : all) CHECK(e.code == EINVAL);
}

TEST_CASE("parse appends to `all` and leaves it alone on success", "[unit]") {
  std::vector<ctx::Error> all{ctx::Error{EIO, "earlier"}};
  REQUIRE(Policy::parse("p", "allow a_t tool:x execute\n", &all));
  REQUIRE(all.size() == 1);
  REQUIRE_FALSE(Policy::parse("p", "allow a_t tool:x run\n", &all));
  REQUIRE(all.size() == 2);
  CHECK(all[0].msg == "earlier");
  CHECK(all[1].msg == "p:1:18: EINVAL: unknown permission 'run' for class tool (tool permits: execute)");
}

TEST_CASE("a file-level fault stops the parse with one error", "[unit]") {
  std::vector<ctx::Error> all;
  auto r = Policy::parse("p", "allow a_t tool:x run\nallow a_t tool:x execute", &all);
  REQUIRE_FALSE(r);
  REQUIRE(all.size() == 1);
  CHECK(r.error().msg == "p:2:25: EINVAL: missing newline at end of file");
}

TEST_CASE("an empty policy and a policy of comments hold no rules", "[unit]") {
  for (const char* text : {"", "\n", "# nothing\n", "#\n\n#allow a_t tool:x execute\n"}) {
    INFO(text);
    auto p = Policy::parse("p", text);
    REQUIRE(p);
    CHECK(p->rules().empty());
    CHECK(*p == Policy());
  }
}

TEST_CASE("duplicate rules are kept in rules() with their own lines", "[unit]") {
  auto p = Policy::parse("p", "allow a_t tool:x execute\nallow a_t tool:y execute\nallow a_t tool:x execute\n");
  REQUIRE(p);
  REQUIRE(p->rules().size() == 3);
  CHECK(p->rules()[0] == rule("a_t", Class::tool, "x", "execute", 1));
  CHECK(p->rules()[2] == rule("a_t", Class::tool, "x", "execute", 3));
  auto found = p->find("a_t", Class::tool, "x", "execute");
  REQUIRE(found);
  CHECK(found->line == 1);
}

TEST_CASE("format_rule writes the one line form", "[unit]") {
  CHECK(format_rule(rule("coder_t", Class::tool, "fs.read", "execute")) == "allow coder_t tool:fs.read execute");
  CHECK(format_rule(rule("coder_t", Class::model, "openai/gpt-4o", "use", 9)) ==
        "allow coder_t model:openai/gpt-4o use");
  CHECK(format_rule(rule("c_t", Class::mount, "/srv/a:b", "write")) == "allow c_t mount:/srv/a:b write");
  CHECK(format_rule(rule("c_t", Class::network, "default", "connect")) == "allow c_t network:default connect");
}

TEST_CASE("from_rules accepts exactly the rules a policy line can hold", "[unit]") {
  std::vector<Rule> rules{rule("a_t", Class::tool, "fs.read", "execute", 4), rule("a_t", Class::session, "s", "resume"),
                          rule("a_t", Class::tool, "fs.read", "execute", 9)};
  auto p = Policy::from_rules(rules);
  REQUIRE(p);
  CHECK(p->rules() == rules);
  CHECK(p->allows("a_t", Class::session, "s", "resume"));
  CHECK(p->find("a_t", Class::tool, "fs.read", "execute")->line == 4);
  auto empty = Policy::from_rules({});
  REQUIRE(empty);
  CHECK(*empty == Policy());
}

TEST_CASE("from_rules refuses what parse refuses, naming the rule", "[unit]") {
  struct Case {
    Rule r;
    std::vector<Rule> before;
    std::string msg;
  };
  const Rule ok = rule("a_t", Class::tool, "x", "execute");
  const std::vector<Case> cases{
      {rule("", Class::tool, "x", "execute"), {}, "rule 1: allow  tool:x execute: EINVAL: subject type is empty"},
      {rule("a-t", Class::tool, "x", "execute", 7),
       {},
       "policy line 7: allow a-t tool:x execute: EINVAL: subject type may contain only letters, digits and "
       "'_'"},
      {rule("a_t", Class::tool, "x", "execute", 0),
       {rule("a_t", Class::tool, "x", "execute"), rule("b_t", Class::tool, "y", "execute")},
       ""},
      {rule("*_t", Class::tool, "x", "execute"),
       {ok},
       "rule 2: allow *_t tool:x execute: EINVAL: no globs in policy v0; write one rule per name"},
      {rule("a_t", Class::agent, "*", "create"),
       {},
       "rule 1: allow a_t agent:* create: EINVAL: no globs in policy v0; write one rule per name"},
      {rule("a_t", Class::mount, "/home/$USER", "read"),
       {},
       "rule 1: allow a_t mount:/home/$USER read: EINVAL: no variables in policy v0; write the name itself"},
      {rule("a_t", Class::mount, "/a b", "read"),
       {},
       "rule 1: allow a_t mount:/a b read: EINVAL: mount object: a space cannot be written in a policy v0 "
       "rule"},
      {rule("a_t", Class::mount, "/caf\xe9", "read"),
       {},
       "rule 1: allow a_t mount:/caf\\xe9 read: EINVAL: mount object: invalid UTF-8"},
      {rule("a_t", Class::mount, "/a\nallow b_t tool:x", "read"),
       {},
       "rule 1: allow a_t mount:/a\\x0aallow b_t tool:x read: EINVAL: mount object: newline in path"},
      {rule("a_t", Class::mount, "work", "read"),
       {},
       "rule 1: allow a_t mount:work read: EINVAL: mount object: path must be absolute (start with '/')"},
      {rule("a_t", Class::tool, "", "execute"),
       {},
       "rule 1: allow a_t tool: execute: EINVAL: missing object name after 'tool:'"},
      {rule("a_t", Class::tool, "fs read", "execute"),
       {},
       "rule 1: allow a_t tool:fs read execute: EINVAL: tool name may contain only letters, digits and "
       "'_.-'"},
      {rule("a_t", Class::model, "a//b", "use"),
       {},
       "rule 1: allow a_t model:a//b use: EINVAL: model name segment is empty"},
      {rule("a_t", Class::shared, "a/b", "read"),
       {},
       "rule 1: allow a_t shared:a/b read: EINVAL: shared name may contain only letters, digits and '_.-'"},
      {rule("a_t", Class::session, "s.", "read"),
       {},
       "rule 1: allow a_t session:s. read: EINVAL: session name must not end in '.'"},
      {rule("a_t", Class::agent, "a.b", "start"),
       {},
       "rule 1: allow a_t agent:a.b start: EINVAL: agent name may contain only letters, digits and '_-'"},
      {rule("a_t", Class::network, "lan", "connect"),
       {},
       "rule 1: allow a_t network:lan connect: EINVAL: unknown network object 'lan' (the only network object "
       "is 'default')"},
      {rule("a_t", Class::tool, "x", "use"),
       {},
       "rule 1: allow a_t tool:x use: EINVAL: unknown permission 'use' for class tool (tool permits: "
       "execute); use is a permission of model"},
      {rule("a_t", Class::shared, "p", ""),
       {},
       "rule 1: allow a_t shared:p : EINVAL: missing permission for class shared (shared permits: read "
       "write)"},
      {rule("a_t", Class::shared, "p", "read "),
       {},
       "rule 1: allow a_t shared:p read : EINVAL: unknown permission 'read ' for class shared (shared "
       "permits: read write); did you mean read?"},
      {rule("a_t", static_cast<Class>(99), "x", "execute"),
       {},
       "rule 1: allow a_t ?:x execute: EINVAL: class value out of range"},
  };
  for (const auto& c : cases) {
    std::vector<Rule> rules = c.before;
    rules.push_back(c.r);
    INFO(format_rule(c.r));
    auto p = Policy::from_rules(rules);
    if (c.msg.empty()) {
      CHECK(p);
    } else {
      REQUIRE_FALSE(p);
      CHECK(p.error().code == EINVAL);
      CHECK(p.error().msg == c.msg);
    }
  }
}

TEST_CASE("every rule from_rules accepts formats to a line parse reads back", "[unit]") {
  // Names at the edges of what is valid, including bytes that only a mount
  // path may hold.
  const std::vector<Rule> rules{
      rule("A", Class::tool, "a", "execute"),
      rule("Z9_", Class::model, "a/b/c", "use"),
      rule("a_t", Class::mount, "/", "write"),
      rule("a_t", Class::mount, "/x:y/#z/]", "read"),
      rule("a_t", Class::mount, "/\xc3\xa9t\xc3\xa9", "read"),
      rule("a_t", Class::shared, "0", "write"),
      rule("a_t", Class::session, "a_b-c.d", "resume"),
      rule("a_t", Class::agent, "A-1_b", "stop"),
  };
  auto p = Policy::from_rules(rules);
  REQUIRE(p);
  for (const auto& r : rules) {
    INFO(format_rule(r));
    auto again = Policy::parse("p", format_rule(r) + "\n");
    REQUIRE(again);
    REQUIRE(again->rules().size() == 1);
    Rule want = r;
    want.line = 1;
    CHECK(again->rules().front() == want);
  }
}
