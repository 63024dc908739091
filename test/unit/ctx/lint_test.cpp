#include <catch2/catch.hpp>

#include "ctx/explain.hpp"
#include "ctx/lint.hpp"
#include "mountspec/table.hpp"
#include "policy/policy.hpp"

using namespace ctx::helper;

TEST_CASE("grants are ordered by risk", "[unit]") {
  ctx::agentdir::AgentSpec s;
  s.name = "coder";
  s.ctx_root = "/ctx";
  s.label = ctx::agentdir::Label{"", "", "coder_t", ""};
  s.policy = *ctx::policy::Policy::parse("p",
                                         "allow coder_t tool:fs.read execute\n"
                                         "allow coder_t tool:fs.write execute\n"
                                         "allow coder_t agent:rev create\n"
                                         "allow other_t network:default connect\n"
                                         "allow coder_t shared:p write\n");
  s.mounts = *ctx::mountspec::parse("m",
                                    "/home/alice\t/h\trw\tbind\n/srv/p\t/work\trw\tbind\n/usr\t/usr\tro\tbind\n"
                                    "/ctx\t/ctx\trw\trbind\n");
  auto g = grants_by_risk(s);
  std::vector<std::string> order;
  for (const auto& x : g) order.push_back(std::string(to_string(x.risk)) + " " + x.what);
  CHECK(order == std::vector<std::string>{
                     "high agent:rev create",
                     "high rw mount /home/alice -> /h",
                     "high rw mount /ctx -> /ctx",
                     "medium tool:fs.write execute",
                     "medium shared:p write",
                     "medium rw mount /srv/p -> /work",
                     "low tool:fs.read execute",
                     "low ro mount /usr -> /usr",
                 });  // the other_t rule is inert: no grant
  CHECK(g[0].where == "coder.d/policy:3");
}

TEST_CASE("mounts a root launch refuses for their file system are high risk, ro or rw", "[unit]") {
  ctx::agentdir::AgentSpec s;
  s.name = "coder";
  s.mounts = *ctx::mountspec::parse("m",
                                    "/proc\t/p\tro\tbind\n/dev\t/d\tro\tbind\n/\t/host\tro\trbind\n"
                                    "/\t/top\tro\tbind\n/srv\t/srv\tro\tbind\n/nowhere\t/n\tro\tbind\n");
  const SourceTypes types{{1, {"proc", true, ""}},
                          {2, {"devtmpfs", true, ""}},
                          {3, {"ext4", true, "/proc on proc"}},
                          {4, {"ext4", false, ""}},
                          {5, {"xfs", false, ""}}};
  std::vector<std::string> order;
  for (const auto& x : grants_by_risk(s, types)) order.push_back(std::string(to_string(x.risk)) + " " + x.what);
  const std::string why = " (not a file system of plain files: a root launch refuses it)";
  CHECK(order == std::vector<std::string>{
                     "high ro mount /proc -> /p on proc" + why, "high ro mount /dev -> /d on devtmpfs" + why,
                     "high ro mount / -> /host on ext4, holding /proc on proc" + why, "low ro mount / -> /top on ext4",
                     "low ro mount /srv -> /srv on xfs",
                     "low ro mount /nowhere -> /n",  // not on this machine: no type
                 });
}

TEST_CASE("a mount rule ranks as the riskiest line it allows", "[unit]") {
  ctx::agentdir::AgentSpec s;
  s.name = "coder";
  s.ctx_root = "/ctx";
  s.label = ctx::agentdir::Label{"", "", "coder_t", ""};
  s.policy = *ctx::policy::Policy::parse("p",
                                         "allow coder_t mount:/h read\n"
                                         "allow coder_t mount:/h write\n"
                                         "allow coder_t mount:/work write\n"
                                         "allow coder_t mount:/usr read\n"
                                         "allow coder_t mount:/usr write\n"
                                         "allow coder_t mount:/nowhere write\n");
  s.mounts = *ctx::mountspec::parse("m", "/home/alice\t/h\trw\tbind\n/srv/p\t/work\trw\tbind\n/usr\t/usr\tro\tbind\n");
  std::vector<std::string> order;
  for (const auto& x : grants_by_risk(s)) order.push_back(std::string(to_string(x.risk)) + " " + x.what);
  CHECK(order == std::vector<std::string>{
                     "high mount:/h write",
                     "high rw mount /home/alice -> /h",
                     "medium mount:/work write",
                     "medium rw mount /srv/p -> /work",
                     "low mount:/h read",  // what read allows: /home/alice read-only
                     "low mount:/usr read",
                     "low mount:/usr write",  // the /usr line is ro: write allows nothing
                     "low mount:/nowhere write",
                     "low ro mount /usr -> /usr",
                 });
}

TEST_CASE("ctx explain says where each session permission is enforced", "[unit]") {
  ctx::agentdir::AgentSpec s;
  s.name = "coder";
  s.label = ctx::agentdir::Label{"", "", "coder_t", ""};
  s.policy = *ctx::policy::Policy::parse("coder.d/policy", "allow coder_t session:default write\n");
  auto layers = ctx::helper::explain_layers(s, {ctx::policy::Class::session, "default", "write"});
  REQUIRE(layers.size() == 2);
  CHECK(layers[0].allows);
  CHECK(layers[1].name == "enforced at launch");
  CHECK(layers[1].text.find("refuses to make the session without it") != std::string::npos);
  auto resume = ctx::helper::explain_layers(s, {ctx::policy::Class::session, "default", "resume"});
  REQUIRE(resume.size() == 2);
  CHECK_FALSE(resume[0].allows);
  CHECK_FALSE(resume[1].allows);
  auto read = ctx::helper::explain_layers(s, {ctx::policy::Class::session, "review", "read"});
  REQUIRE(read.size() == 2);
  CHECK(read[1].text.find("masks session/review") != std::string::npos);
}
