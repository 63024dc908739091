// Policy v0 decisions: the fixed table, default deny, exact matching.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "policy/policy.hpp"

using ctx::policy::Class;
using ctx::policy::Policy;

namespace {

Policy parsed(const std::string& text) {
  auto p = Policy::parse("p", text);
  REQUIRE(p);
  return *p;
}

const std::vector<Class> kAll{Class::tool,  Class::model, Class::shared, Class::session,
                              Class::mount, Class::agent, Class::network};

}  // namespace

TEST_CASE("the fixed class and permission table of v1", "[unit]") {
  using V = std::vector<std::string_view>;
  CHECK(ctx::policy::permissions_of(Class::tool) == V{"execute"});
  CHECK(ctx::policy::permissions_of(Class::model) == V{"use"});
  CHECK(ctx::policy::permissions_of(Class::shared) == V{"read", "write"});
  CHECK(ctx::policy::permissions_of(Class::session) == V{"read", "write", "resume"});
  CHECK(ctx::policy::permissions_of(Class::mount) == V{"read", "write"});
  CHECK(ctx::policy::permissions_of(Class::agent) == V{"create", "start", "stop", "read", "write"});
  CHECK(ctx::policy::permissions_of(Class::network) == V{"connect"});
  const std::vector<std::string_view> names{"tool", "model", "shared", "session", "mount", "agent", "network"};
  for (std::size_t i = 0; i < kAll.size(); ++i) {
    CHECK(ctx::policy::to_string(kAll[i]) == names[i]);
    CHECK(ctx::policy::class_from(names[i]) == kAll[i]);
  }
  for (const char* no : {"", "Tool", "tools", "file", "process", "tool:", " tool"}) {
    INFO(no);
    CHECK_FALSE(ctx::policy::class_from(no));
  }
}

TEST_CASE("an empty policy allows nothing", "[unit]") {
  const Policy empty;
  const Policy parsed_empty = parsed("# nothing\n");
  for (Class c : kAll)
    for (std::string_view perm : ctx::policy::permissions_of(c)) {
      for (const char* obj : {"default", "x", "/", "/work", "a/b"}) {
        CHECK_FALSE(empty.allows("coder_t", c, obj, perm));
        CHECK_FALSE(parsed_empty.allows("coder_t", c, obj, perm));
        CHECK_FALSE(empty.find("coder_t", c, obj, perm));
      }
    }
  CHECK_FALSE(empty.allows("coder_t", Class::network, "default", "connect"));
}

TEST_CASE("a check matches subject, class, object and permission exactly", "[unit]") {
  const Policy p = parsed(
      "allow coder_t tool:fs.read execute\n"
      "allow coder_t agent:reviewer create\n"
      "allow coder_t shared:project-a write\n"
      "allow coder_t mount:/work read\n"
      "allow coder_t network:default connect\n");
  CHECK(p.allows("coder_t", Class::tool, "fs.read", "execute"));
  CHECK(p.allows("coder_t", Class::agent, "reviewer", "create"));
  CHECK(p.allows("coder_t", Class::shared, "project-a", "write"));
  CHECK(p.allows("coder_t", Class::mount, "/work", "read"));
  CHECK(p.allows("coder_t", Class::network, "default", "connect"));

  SECTION("no inheritance between subjects") {
    CHECK_FALSE(p.allows("reviewer_t", Class::tool, "fs.read", "execute"));
    CHECK_FALSE(p.allows("coder", Class::tool, "fs.read", "execute"));
    CHECK_FALSE(p.allows("coder_t_x", Class::tool, "fs.read", "execute"));
    CHECK_FALSE(p.allows("Coder_t", Class::tool, "fs.read", "execute"));
  }
  SECTION("no label holds nothing") {
    CHECK_FALSE(p.allows("", Class::tool, "fs.read", "execute"));
    CHECK_FALSE(p.find("", Class::tool, "fs.read", "execute"));
  }
  SECTION("no globs: a star or a prefix is just another name") {
    CHECK_FALSE(p.allows("coder_t", Class::agent, "*", "create"));
    CHECK_FALSE(p.allows("coder_t", Class::tool, "fs.*", "execute"));
    CHECK_FALSE(p.allows("coder_t", Class::tool, "fs", "execute"));
    CHECK_FALSE(p.allows("*", Class::tool, "fs.read", "execute"));
  }
  SECTION("no path matching on mounts") {
    CHECK_FALSE(p.allows("coder_t", Class::mount, "/work/src", "read"));
    CHECK_FALSE(p.allows("coder_t", Class::mount, "/work/", "read"));
    CHECK_FALSE(p.allows("coder_t", Class::mount, "/", "read"));
    CHECK_FALSE(p.allows("coder_t", Class::mount, "/workshop", "read"));
    CHECK_FALSE(p.allows("coder_t", Class::mount, "/work/../work", "read"));
  }
  SECTION("no permission implies another") {
    CHECK_FALSE(p.allows("coder_t", Class::shared, "project-a", "read"));
    CHECK_FALSE(p.allows("coder_t", Class::mount, "/work", "write"));
    CHECK_FALSE(p.allows("coder_t", Class::agent, "reviewer", "start"));
    CHECK_FALSE(p.allows("coder_t", Class::agent, "reviewer", "stop"));
  }
  SECTION("the class is part of the match") {
    CHECK_FALSE(p.allows("coder_t", Class::session, "project-a", "write"));
    CHECK_FALSE(p.allows("coder_t", Class::model, "fs.read", "execute"));
    CHECK_FALSE(p.allows("coder_t", Class::tool, "reviewer", "execute"));
  }
  SECTION("the network object is only 'default'") {
    CHECK_FALSE(p.allows("coder_t", Class::network, "internet", "connect"));
  }
  SECTION("embedded separators cannot forge a key") {
    using namespace std::string_view_literals;
    CHECK_FALSE(p.allows("coder_t\0tool"sv, Class::tool, "fs.read", "execute"));
    CHECK_FALSE(p.allows("coder_t"sv, Class::tool, "fs.read\0execute"sv, ""));
    CHECK_FALSE(p.allows("coder_t\0tool\0fs.read"sv, Class::tool, "", "execute"));
    CHECK_FALSE(p.allows("coder_t", Class::tool, "fs.read", "execute\0"sv));
  }
}

TEST_CASE("find returns the allowing rule with its line", "[unit]") {
  const Policy p = parsed(
      "# tools\n"
      "allow coder_t tool:fs.read execute\n"
      "\n"
      "allow reviewer_t tool:fs.read execute\n"
      "allow coder_t tool:fs.read execute\n");
  auto c = p.find("coder_t", Class::tool, "fs.read", "execute");
  REQUIRE(c);
  CHECK(*c == ctx::policy::Rule{"coder_t", Class::tool, "fs.read", "execute", 2});
  auto r = p.find("reviewer_t", Class::tool, "fs.read", "execute");
  REQUIRE(r);
  CHECK(r->line == 4);
  CHECK_FALSE(p.find("coder_t", Class::tool, "fs.write", "execute"));
}

TEST_CASE("a large policy answers every held rule and nothing else", "[unit]") {
  std::string text;
  for (int i = 0; i < 5000; ++i)
    text += "allow s" + std::to_string(i % 7) + "_t tool:t" + std::to_string(i) + " execute\n";
  const Policy p = parsed(text);
  REQUIRE(p.rules().size() == 5000);
  for (int i = 0; i < 5000; ++i) {
    const std::string tool = "t" + std::to_string(i);
    CHECK(p.allows("s" + std::to_string(i % 7) + "_t", Class::tool, tool, "execute"));
    CHECK_FALSE(p.allows("s" + std::to_string((i + 1) % 7) + "_t", Class::tool, tool, "execute"));
  }
}
