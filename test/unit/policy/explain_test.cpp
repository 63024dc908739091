// Requests from a command line and the sentence that explains a decision.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "policy/policy.hpp"

using ctx::policy::Class;
using ctx::policy::explain;
using ctx::policy::parse_request;
using ctx::policy::Policy;
using ctx::policy::Request;
using ctx::policy::Rule;

namespace {

Request request(std::string_view class_object, std::string_view permission) {
  auto r = parse_request(class_object, permission);
  REQUIRE(r);
  return *r;
}

}  // namespace

TEST_CASE("parse_request reads CLASS:OBJECT and PERMISSION", "[unit]") {
  struct Case {
    const char* co;
    const char* perm;
    Class cls;
    const char* object;
  };
  for (const Case& c : std::vector<Case>{
           {"tool:fs.read", "execute", Class::tool, "fs.read"},
           {"model:openai/gpt-4o", "use", Class::model, "openai/gpt-4o"},
           {"shared:project-a", "write", Class::shared, "project-a"},
           {"session:design-review", "resume", Class::session, "design-review"},
           {"mount:/srv/a:b", "read", Class::mount, "/srv/a:b"},
           {"agent:reviewer", "create", Class::agent, "reviewer"},
           {"network:default", "connect", Class::network, "default"},
       }) {
    INFO(c.co << " " << c.perm);
    Request r = request(c.co, c.perm);
    CHECK(r.cls == c.cls);
    CHECK(r.object == c.object);
    CHECK(r.permission == c.perm);
  }
}

TEST_CASE("parse_request refuses what a policy line refuses, with the exact message", "[unit]") {
  const std::string classes = "(classes: tool, model, shared, session, mount, agent, network)";
  const std::vector<std::vector<std::string>> cases{
      {"tool:fs.read", "exec",
       "tool:fs.read exec: EINVAL: unknown permission 'exec' for class tool (tool permits: execute); did you "
       "mean execute?"},
      {"tol:fs.read", "execute",
       "tol:fs.read execute: EINVAL: unknown class 'tol' " + classes + "; did you mean tool?"},
      {"tool:fs.read", "use",
       "tool:fs.read use: EINVAL: unknown permission 'use' for class tool (tool permits: execute); use is a "
       "permission of model"},
      {"tool:fs.read", "", "tool:fs.read : EINVAL: missing permission for class tool (tool permits: execute)"},
      {"file:x", "read", "file:x read: EINVAL: unknown class 'file' " + classes},
      {":x", "read", ":x read: EINVAL: missing class before ':' " + classes},
      {"tool", "execute", "tool execute: EINVAL: expected <class>:<object>, found 'tool'"},
      {"", "execute", " execute: EINVAL: expected <class>:<object>, found ''"},
      {"tool:", "execute", "tool: execute: EINVAL: missing object name after 'tool:'"},
      {"agent:*", "create", "agent:* create: EINVAL: no globs in policy v0; write one rule per name"},
      {"tool:fs.read", "exec?", "tool:fs.read exec?: EINVAL: no globs in policy v0; write one rule per name"},
      {"shared:$P", "read", "shared:$P read: EINVAL: no variables in policy v0; write the name itself"},
      {"network:lan", "connect",
       "network:lan connect: EINVAL: unknown network object 'lan' (the only network object is 'default')"},
      {"mount:work", "read", "mount:work read: EINVAL: mount object: path must be absolute (start with '/')"},
      {"mount:/a b", "read", "mount:/a b read: EINVAL: mount object: a space cannot be written in a policy v0 rule"},
      {"tool:fs read", "execute", "tool:fs read execute: EINVAL: tool name may contain only letters, digits and '_.-'"},
      {"tool:\x1b[2J", "execute", "tool:\\x1b[2J execute: EINVAL: no globs in policy v0; write one rule per name"},
      {"tool:a\nb", "execute", "tool:a\\x0ab execute: EINVAL: tool name may contain only letters, digits and '_.-'"},
      {"model:a//b", "use", "model:a//b use: EINVAL: model name segment is empty"},
      {"session:.s", "read", "session:.s read: EINVAL: session name must begin with a letter or digit"},
      {"agent:rev.1", "start", "agent:rev.1 start: EINVAL: agent name may contain only letters, digits and '_-'"},
  };
  for (const auto& c : cases) {
    INFO(c[0] << " " << c[1]);
    auto r = parse_request(c[0], c[1]);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == EINVAL);
    CHECK(r.error().msg == c[2]);
  }
}

TEST_CASE("explain names the allowing rule and its line", "[unit]") {
  auto p = Policy::parse("coder.d/policy",
                         "# coder\n"
                         "allow coder_t tool:fs.write execute\n"
                         "allow coder_t tool:fs.read execute\n"
                         "allow coder_t tool:fs.read execute\n");
  REQUIRE(p);
  auto e = explain(*p, "coder_t", request("tool:fs.read", "execute"));
  CHECK(e.allowed);
  REQUIRE(e.rule);
  CHECK(*e.rule == Rule{"coder_t", Class::tool, "fs.read", "execute", 3});
  CHECK(e.text == "allowed by policy line 3: allow coder_t tool:fs.read execute");

  auto made = Policy::from_rules({Rule{"coder_t", Class::network, "default", "connect", 0}});
  REQUIRE(made);
  auto m = explain(*made, "coder_t", request("network:default", "connect"));
  CHECK(m.allowed);
  CHECK(m.text == "allowed by the rule 'allow coder_t network:default connect'");
}

TEST_CASE("explain a denial: the exact rule that would allow it", "[unit]") {
  auto p = Policy::parse("coder.d/policy", "allow coder_t tool:fs.read execute\nallow reviewer_t shared:p write\n");
  REQUIRE(p);
  auto d = explain(*p, "coder_t", request("tool:fs.write", "execute"));
  CHECK_FALSE(d.allowed);
  CHECK_FALSE(d.rule);
  CHECK(d.text == "denied: no rule 'allow coder_t tool:fs.write execute' (policy v0 is default deny)");
  // What another subject holds does not carry over.
  auto other = explain(*p, "coder_t", request("shared:p", "write"));
  CHECK_FALSE(other.allowed);
  CHECK(other.text == "denied: no rule 'allow coder_t shared:p write' (policy v0 is default deny)");
  auto empty = explain(Policy(), "coder_t", request("network:default", "connect"));
  CHECK_FALSE(empty.allowed);
  CHECK(empty.text == "denied: no rule 'allow coder_t network:default connect' (policy v0 is default deny)");
}

TEST_CASE("explain without a label: everything is denied", "[unit]") {
  auto p = Policy::parse("coder.d/policy", "allow coder_t tool:fs.read execute\n");
  REQUIRE(p);
  auto e = explain(*p, "", request("tool:fs.read", "execute"));
  CHECK_FALSE(e.allowed);
  CHECK_FALSE(e.rule);
  CHECK(e.text == "denied: the agent has no label, so policy v0 denies everything");
}

TEST_CASE("explain agrees with allows for every rule of the universe", "[unit]") {
  auto p = Policy::parse("p",
                         "allow a_t tool:x execute\n"
                         "allow a_t agent:b stop\n"
                         "allow a_t session:s resume\n"
                         "allow b_t mount:/m write\n");
  REQUIRE(p);
  int checked = 0;
  int allowed = 0;
  for (const char* subject : {"a_t", "b_t", ""})
    for (const char* co : {"tool:x", "agent:b", "session:s", "mount:/m", "network:default"})
      for (const char* perm : {"execute", "stop", "resume", "write", "connect", "read"}) {
        auto req = parse_request(co, perm);
        if (!req) continue;  // a permission the class lacks
        auto e = explain(*p, subject, *req);
        INFO(subject << " " << co << " " << perm);
        CHECK(e.allowed == p->allows(subject, req->cls, req->object, req->permission));
        CHECK(e.rule == p->find(subject, req->cls, req->object, req->permission));
        CHECK(e.text.rfind(e.allowed ? "allowed by policy line " : "denied: ", 0) == 0);
        ++checked;
        allowed += e.allowed ? 1 : 0;
      }
  CHECK(checked == 3 * 10);
  CHECK(allowed == 4);
}
