#include <catch2/catch.hpp>
#include <map>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "agentdir/child.hpp"
#include "agentdir/load.hpp"
#include "agentdir/mount_rules.hpp"
#include "test/support/tempdir.hpp"

using namespace ctx::agentdir;
using ctx::mountspec::Attrs;
using ctx::mountspec::ChildMount;

namespace {

std::optional<std::uint32_t> gid_1000(std::uint32_t) { return 1000; }

const char* const kParentPolicy =
    "allow coder_t agent:rev-1 create\n"
    "allow coder_t agent:rev-1 start\n"
    "allow coder_t agent:sub create\n"
    "allow coder_t tool:fs.read execute\n"
    "allow coder_t tool:shell.exec execute\n"
    "allow coder_t model:openai/gpt-4o use\n"
    "allow coder_t shared:project-a read\n"
    "allow coder_t network:default connect\n";

// The parent as its supervisor loaded it: host sources, inner targets.
ControlFiles parent_files() {
  return {
      {"owner", "1000\n"},
      {"gid", "1000\n"},
      {"groups", "27\n100\n"},
      {"label", "user_u:agent_r:coder_t:s0\n"},
      {"iso", "userns\n"},
      {"cwd", "/work/src\n"},
      {"path", "/ctx/tool\n"},
      {"model", "openai/gpt-4o\n"},
      {"mount",
       "/usr\t/usr\tro\trbind,nodev\n"
       "/home/me/project\t/work\trw\trbind,nosuid,nodev\n"
       "/ctx/shared/project-a\t/shared/project-a\tro\tbind,nosuid,nodev\n"},
      {"policy", kParentPolicy},
  };
}

AgentSpec parent_spec(const ControlFiles& f = parent_files(), const std::string& ctx_root = "/ctx") {
  auto s = build_spec("coder", ctx_root, f, gid_1000);
  REQUIRE(s);
  return *s;
}

const Attrs kRo{.rdonly = true};
const Attrs kRw{};

ChildMount mount(const std::string& source, const std::string& target, Attrs attrs) {
  ChildMount m;
  m.source = source;
  m.target = target;
  m.attrs = attrs;
  return m;
}

// Seed 000's agent.create example, renamed to a name the parent may create.
ChildRequest reviewer() {
  ChildRequest r;
  r.name = "rev-1";
  r.label = "reviewer_t";
  r.models = {"openai/gpt-4o"};
  r.tools = {"fs.read"};
  r.shared = {{"project-a", {"read"}}};
  r.mounts = {mount("/work", "/work", kRo), mount("/shared/project-a", "/shared/project-a", kRo)};
  r.handoff = "Task: review the mount ABI section.\n";
  return r;
}

const ChildOrigin kOrigin{"default", "r1"};

// Property: every child plan_child produces passes check_child, the
// re-check before it is started.
// (A refused plan has nothing to re-check.)
void passes_check(const AgentSpec& parent, const ctx::Result<ChildPlan>& p) {
  if (p) {
    auto c = check_child(parent, p->spec);
    INFO((c ? std::string() : c.error().msg));
    CHECK(c);
  }
}

ctx::Result<ChildPlan> plan(const ChildRequest& r, const AgentSpec& parent = parent_spec()) {
  auto p = plan_child(parent, r, kOrigin, gid_1000);
  passes_check(parent, p);
  return p;
}

// The refusal of a request: its code, reason and exact message.
void refused(const ChildRequest& r, int code, const std::string& reason, const std::string& msg,
             const AgentSpec& parent = parent_spec()) {
  auto p = plan(r, parent);
  REQUIRE_FALSE(p);
  CHECK(p.error().code == code);
  CHECK(p.error().reason == reason);
  CHECK(p.error().msg == msg);
}

}  // namespace

TEST_CASE("child: the seed's request plans into exact control files that load", "[unit]") {
  auto p = plan(reviewer());
  REQUIRE(p);
  CHECK(p->files == ControlFiles{
                        {"owner", "1000\n"},
                        {"uid", "1000\n"},
                        {"gid", "1000\n"},
                        {"groups", "27\n100\n"},
                        {"label", "reviewer_t\n"},
                        {"iso", "userns\n"},
                        {"parent", "agent:coder session:default run:r1\n"},
                        {"life", "owned\n"},
                        {"root", "/ctx/home/1000/agent/rev-1/root\n"},
                        {"cwd", "/work/src\n"},
                        {"path", "/ctx/tool\n"},
                        {"mount",
                         "/home/me/project\t/work\tro\trbind,nosuid,nodev\n"
                         "/ctx/shared/project-a\t/shared/project-a\tro\tbind,nosuid,nodev\n"},
                        {"model", "openai/gpt-4o\n"},
                        {"policy",
                         "allow reviewer_t tool:fs.read execute\n"
                         "allow reviewer_t model:openai/gpt-4o use\n"
                         "allow reviewer_t shared:project-a read\n"
                         // derived from its table: each target read
                         "allow reviewer_t mount:/work read\n"
                         "allow reviewer_t mount:/shared/project-a read\n"},
                    });
  auto again = build_spec("rev-1", "/ctx", p->files, gid_1000);
  REQUIRE(again);
  CHECK(*again == p->spec);
  CHECK(p->spec.name == "rev-1");
  CHECK(p->spec.subject() == "reviewer_t");
  CHECK(*p->spec.parent == Parent{"coder", "default", "r1"});
  CHECK(p->spec.iso == Iso::userns);
  CHECK(p->spec.policy.allows("reviewer_t", ctx::policy::Class::shared, "project-a", "read"));
  CHECK_FALSE(p->spec.policy.allows("reviewer_t", ctx::policy::Class::network, "default", "connect"));
}

TEST_CASE("child: every grant kind becomes one rule, in the order tools, model, shared, agents, network", "[unit]") {
  ChildRequest r = reviewer();
  r.tools = {"shell.exec", "fs.read"};
  r.agents = {{"sub", {"create"}}};
  r.network = true;
  auto p = plan(r);
  REQUIRE(p);
  CHECK(p->files.at("policy") ==
        "allow reviewer_t tool:shell.exec execute\n"
        "allow reviewer_t tool:fs.read execute\n"
        "allow reviewer_t model:openai/gpt-4o use\n"
        "allow reviewer_t shared:project-a read\n"
        "allow reviewer_t agent:sub create\n"
        "allow reviewer_t network:default connect\n"
        "allow reviewer_t mount:/work read\n"
        "allow reviewer_t mount:/shared/project-a read\n");
  CHECK(p->spec.policy.allows("reviewer_t", ctx::policy::Class::agent, "sub", "create"));
}

TEST_CASE("child: defaults come from the parent", "[unit]") {
  ChildRequest r;
  r.name = "rev-1";
  SECTION("label, groups, iso; no mounts and no grants leave those files out; cwd falls back to /") {
    auto p = plan(r);
    REQUIRE(p);
    CHECK(p->files.at("label") == "user_u:agent_r:coder_t:s0\n");
    CHECK(p->spec.subject() == "coder_t");
    CHECK(p->files.at("groups") == "27\n100\n");
    CHECK(p->spec.groups == std::vector<std::uint32_t>{27, 100});
    CHECK(p->files.at("iso") == "userns\n");
    CHECK(p->files.at("cwd") == "/\n");
    for (const char* absent : {"mount", "model", "policy", "env", "limits", "meta.json", "status"}) {
      INFO(absent);
      CHECK(p->files.count(absent) == 0);
    }
  }
  SECTION("a parent's label in user:role:type:level form is the subject of the child's rules") {
    r.tools = {"fs.read"};
    auto p = plan(r);
    REQUIRE(p);
    CHECK(p->files.at("policy") == "allow coder_t tool:fs.read execute\n");
  }
  SECTION("explicit groups: a subset, or none") {
    r.groups = std::vector<std::uint32_t>{100};
    auto p = plan(r);
    REQUIRE(p);
    CHECK(p->files.at("groups") == "100\n");
    r.groups = std::vector<std::uint32_t>{};
    auto none = plan(r);
    REQUIRE(none);
    CHECK(none->files.count("groups") == 0);
    CHECK(none->spec.groups.empty());
  }
  SECTION("cwd: the parent's when a child mount shows it, else /") {
    r.mounts = {mount("/work", "/work", kRo)};
    auto shown = plan(r);
    REQUIRE(shown);
    CHECK(shown->spec.cwd == "/work/src");
    r.mounts = {mount("/shared/project-a", "/shared/project-a", kRo)};
    auto hidden = plan(r);
    REQUIRE(hidden);
    CHECK(hidden->spec.cwd == "/");
    // The same host directory at another target does not show the
    // parent's path.
    r.mounts = {mount("/work", "/src", kRo)};
    auto moved = plan(r);
    REQUIRE(moved);
    CHECK(moved->spec.cwd == "/");
  }
  SECTION("an explicit cwd at or below a child mount target, or /") {
    r.mounts = {mount("/shared/project-a", "/shared/project-a", kRo)};
    r.cwd = "/shared/project-a/docs";
    auto below = plan(r);
    REQUIRE(below);
    CHECK(below->files.at("cwd") == "/shared/project-a/docs\n");
    r.cwd = "/";
    auto slash = plan(r);
    REQUIRE(slash);
    CHECK(slash->files.at("cwd") == "/\n");
  }
  SECTION("path is left out when the parent has none, and the parent line needs no session or run") {
    ControlFiles f = parent_files();
    f.erase("path");
    auto p = plan_child(parent_spec(f), r, ChildOrigin{}, gid_1000);
    REQUIRE(p);
    passes_check(parent_spec(f), p);
    CHECK(p->files.count("path") == 0);
    CHECK_FALSE(p->spec.path_set);
    CHECK(p->files.at("parent") == "agent:coder\n");
  }
  SECTION("owner, uid, gid and iso are the parent's") {
    ControlFiles f = parent_files();
    f["uid"] = "2000\n";
    f["gid"] = "3000\n";
    f["iso"] = "shared\n";
    auto p = plan(r, parent_spec(f));
    REQUIRE(p);
    CHECK(p->files.at("owner") == "1000\n");
    CHECK(p->files.at("uid") == "2000\n");
    CHECK(p->files.at("gid") == "3000\n");
    CHECK(p->files.at("iso") == "shared\n");
    CHECK(p->spec.root == "/ctx/home/1000/agent/rev-1/root");
  }
}

TEST_CASE("child: a parent mount below a requested source is carried, never widened", "[unit]") {
  ControlFiles f = parent_files();
  f["mount"] += "/home/me/secrets-ro\t/work/conf\tro\tbind,nosuid,nodev\n";
  ChildRequest r = reviewer();
  r.mounts = {mount("/work", "/work", kRw)};
  auto p = plan(r, parent_spec(f));
  REQUIRE(p);
  CHECK(p->files.at("mount") ==
        "/home/me/project\t/work\trw\trbind,nosuid,nodev\n"
        "/home/me/secrets-ro\t/work/conf\tro\tbind,nosuid,nodev\n");
}

TEST_CASE("child: an invalid name is refused before anything else", "[unit]") {
  ChildRequest r = reviewer();
  r.name = "rev 1";
  refused(r, EACCES, "invalid_name",
          "child name 'rev 1': EACCES: agent name may contain only letters, digits and '_-'");
  r.name = "";
  refused(r, EACCES, "invalid_name", "child name '': EACCES: agent name is empty");
  r.name = "a\nb";
  refused(r, EACCES, "invalid_name",
          "child name 'a\\x0ab': EACCES: agent name may contain only letters, digits and '_-'");
  // Even for a parent that could create nothing.
  ControlFiles f = parent_files();
  f.erase("label");
  r.name = "../x";
  refused(r, EACCES, "invalid_name", "child name '../x': EACCES: agent name must begin with a letter or digit",
          parent_spec(f));
}

TEST_CASE("child: without 'allow <type> agent:<name> create' nothing else is looked at", "[unit]") {
  ChildRequest r = reviewer();
  r.name = "rev-2";
  refused(r, EACCES, "agent_policy", "rev-2: EACCES: the parent's policy lacks 'allow coder_t agent:rev-2 create'");
  // Every other fault at once: agent_policy still comes first.
  r.label = "no good";
  r.tools = {"fs.write"};
  r.mounts = {mount("/etc", "/etc", kRw)};
  r.groups = std::vector<std::uint32_t>{0};
  refused(r, EACCES, "agent_policy", "rev-2: EACCES: the parent's policy lacks 'allow coder_t agent:rev-2 create'");
  // start is not create.
  ControlFiles f = parent_files();
  f["policy"] = "allow coder_t agent:rev-1 start\n";
  refused(reviewer(), EACCES, "agent_policy",
          "rev-1: EACCES: the parent's policy lacks 'allow coder_t agent:rev-1 create'", parent_spec(f));
}

TEST_CASE("child: a parent without a label holds nothing", "[unit]") {
  ControlFiles f = parent_files();
  f.erase("label");
  ChildRequest r;
  r.name = "rev-1";
  refused(r, EACCES, "agent_policy",
          "rev-1: EACCES: the parent (coder) has no label, so it holds nothing, not even agent:rev-1 create; give it a "
          "label and the rule 'allow <its type> agent:rev-1 create'",
          parent_spec(f));
}

TEST_CASE("child: a grant the parent does not hold is exceeds_parent_policy", "[unit]") {
  ChildRequest r = reviewer();
  SECTION("tool") {
    r.tools = {"fs.read", "fs.write"};
    refused(r, EACCES, "exceeds_parent_policy",
            "rev-1: child policy rule 2: allow reviewer_t tool:fs.write execute: EACCES: the parent (coder_t) does not "
            "hold tool:fs.write execute");
  }
  SECTION("model") {
    r.models = {"openai/gpt-5"};
    refused(
        r, EACCES, "exceeds_parent_policy",
        "rev-1: child policy rule 2: allow reviewer_t model:openai/gpt-5 use: EACCES: the parent (coder_t) does not "
        "hold model:openai/gpt-5 use");
  }
  SECTION("shared: read does not give write") {
    r.shared = {{"project-a", {"read", "write"}}};
    refused(
        r, EACCES, "exceeds_parent_policy",
        "rev-1: child policy rule 4: allow reviewer_t shared:project-a write: EACCES: the parent (coder_t) does not "
        "hold shared:project-a write");
  }
  SECTION("network") {
    ControlFiles f = parent_files();
    f["policy"] = "allow coder_t agent:rev-1 create\n";
    ChildRequest n;
    n.name = "rev-1";
    n.network = true;
    refused(n, EACCES, "exceeds_parent_policy",
            "rev-1: child policy rule 1: allow coder_t network:default connect: EACCES: the parent (coder_t) does not "
            "hold network:default connect",
            parent_spec(f));
  }
  SECTION("grandchildren: the parent must hold the same agent grant") {
    r.agents = {{"sub", {"create", "start"}}};
    refused(r, EACCES, "exceeds_parent_policy",
            "rev-1: child policy rule 5: allow reviewer_t agent:sub start: EACCES: the parent (coder_t) does not hold "
            "agent:sub start");
    r.agents = {{"other", {"create"}}};
    refused(r, EACCES, "exceeds_parent_policy",
            "rev-1: child policy rule 4: allow reviewer_t agent:other create: EACCES: the parent (coder_t) does not "
            "hold agent:other create");
    // Holding agent:rev-1 start does not let the child start rev-1.
    r.agents = {{"rev-1", {"start"}}};
    auto p = plan(r);
    REQUIRE(p);
    CHECK(p->spec.policy.allows("reviewer_t", ctx::policy::Class::agent, "rev-1", "start"));
  }
}

TEST_CASE("child: mounts are derived from what the parent sees", "[unit]") {
  ChildRequest r = reviewer();
  r.mounts = {mount("/work", "/work", kRo), mount("/etc", "/etc", kRo)};
  refused(r, EACCES, "mount_not_visible",
          "rev-1: mount[1] /etc -> /etc: EACCES: not visible to the parent (no parent mount covers /etc)");
  r.mounts = {mount("/shared/project-a", "/shared/project-a", kRw)};
  refused(r, EACCES, "mount_widens_access",
          "rev-1: mount[0] /shared/project-a -> /shared/project-a: EACCES: rw requested but the parent sees "
          "/shared/project-a read-only");
}

TEST_CASE("child: under an rbind parent mount a child's bind is mount_widens_access", "[unit]") {
  ChildRequest r = reviewer();
  r.mounts = {mount("/work", "/w", kRo)};
  r.mounts[0].kind = ctx::mountspec::Kind::bind;
  refused(r, EACCES, "mount_widens_access",
          "rev-1: mount[0] /work -> /w: EACCES: bind requested but the parent sees /work with rbind: a bind would "
          "uncover what the submounts below it cover; leave the kind unset or ask rbind");
}

// ---- check_child: the re-check before a parent's supervisor starts a child ----

namespace {

// The seed's child as planned, then as it loads from its files after
// `change` (a file set to a content, or erased when the content is empty).
AgentSpec child_after(const ControlFiles& change, const AgentSpec& parent = parent_spec()) {
  ChildRequest r = reviewer();
  r.mounts.push_back(mount("/usr/lib", "/usr/lib", kRo));
  auto p = plan_child(parent, r, kOrigin, gid_1000);
  REQUIRE(p);
  ControlFiles f = p->files;
  for (const auto& [file, content] : change) {
    if (content.empty()) {
      f.erase(file);
    } else {
      f[file] = content;
    }
  }
  auto s = build_spec("rev-1", "/ctx", f, gid_1000);
  REQUIRE(s);
  return *s;
}

void check_refused(const AgentSpec& child, const std::string& reason, const std::string& msg,
                   const AgentSpec& parent = parent_spec()) {
  auto c = check_child(parent, child);
  REQUIRE_FALSE(c);
  CHECK(c.error().code == EACCES);
  CHECK(c.error().reason == reason);
  CHECK(c.error().msg == msg);
}

}  // namespace

TEST_CASE("check_child: plan_child -> build_spec -> check_child passes", "[unit]") {
  AgentSpec child = child_after({});
  CHECK(check_child(parent_spec(), child));
  // Narrower than planned is still within the parent.
  CHECK(check_child(parent_spec(),
                    child_after({{"groups", "100\n"}, {"policy", "allow reviewer_t tool:fs.read execute\n"}})));
  CHECK(check_child(parent_spec(),
                    child_after({{"mount", "/home/me/project/src\t/src\tro\trbind,nosuid,nodev,noexec\n"}})));
}

TEST_CASE("check_child: identity and lineage must be the parent's (not_owned)", "[unit]") {
  const std::string redo = "; a child keeps its parent's ";
  check_refused(
      child_after({{"parent", ""}}), "not_owned",
      "rev-1: /ctx/agent/rev-1.d/parent: EACCES: is missing, not agent:coder, so rev-1 is not a child of coder; "
      "coder may start only the children it created");
  check_refused(
      child_after({{"parent", "agent:other session:default\n"}}), "not_owned",
      "rev-1: /ctx/agent/rev-1.d/parent: EACCES: names agent:other, not agent:coder, so rev-1 is not a child of "
      "coder; coder may start only the children it created");
  // An agent of another owner whose parent line names the parent.
  check_refused(child_after({{"owner", "2000\n"}, {"uid", "2000\n"}}), "not_owned",
                "rev-1: /ctx/agent/rev-1.d/owner: EACCES: is 2000 but the parent coder's is 1000; a child keeps its "
                "parent's owner: remove rev-1 and create it again from coder");
  check_refused(
      child_after({{"uid", "0\n"}}), "not_owned",
      "rev-1: /ctx/agent/rev-1.d/uid: EACCES: is 0 but the parent coder's is 1000; a child keeps its parent's "
      "uid: remove rev-1 and create it again from coder");
  check_refused(
      child_after({{"gid", "0\n"}}), "not_owned",
      "rev-1: /ctx/agent/rev-1.d/gid: EACCES: is 0 but the parent coder's is 1000; a child keeps its parent's "
      "gid: remove rev-1 and create it again from coder");
  check_refused(child_after({{"iso", "shared\n"}}), "not_owned",
                "rev-1: /ctx/agent/rev-1.d/iso: EACCES: is shared but the parent coder's is userns; a child keeps its "
                "parent's iso: remove rev-1 and create it again from coder");
  check_refused(
      child_after({{"root", "/ctx/home/1000/agent/coder/root\n"}}), "not_owned",
      "rev-1: /ctx/agent/rev-1.d/root: EACCES: is /ctx/home/1000/agent/coder/root, not "
      "/ctx/home/1000/agent/rev-1/root; a child's root is its own directory in its owner's home: remove rev-1 "
      "and create it again from coder");
}

TEST_CASE("check_child: groups and policy within the parent's", "[unit]") {
  check_refused(child_after({{"groups", "27\n0\n"}}), "groups_not_subset",
                "rev-1: /ctx/agent/rev-1.d/groups: EACCES: group 0 is not one of the parent's groups (27, 100)");
  check_refused(
      child_after({{"policy", "allow reviewer_t tool:fs.read execute\nallow reviewer_t tool:fs.write execute\n"}}),
      "exceeds_parent_policy",
      "rev-1: /ctx/agent/rev-1.d/policy: child policy line 2: allow reviewer_t tool:fs.write execute: EACCES: "
      "the parent (coder_t) does not hold tool:fs.write execute");
  // A label of the parent's type does not lend the child the parent's rules.
  check_refused(
      child_after({{"label", "coder_t\n"}, {"policy", "allow coder_t agent:sub start\n"}}), "exceeds_parent_policy",
      "rev-1: /ctx/agent/rev-1.d/policy: child policy line 1: allow coder_t agent:sub start: EACCES: the parent "
      "(coder_t) does not hold agent:sub start");
}

TEST_CASE("check_child: every mount derived from a parent mount", "[unit]") {
  auto with_mount = [](const std::string& line) {
    return child_after({{"mount", "/home/me/project\t/work\tro\trbind,nosuid,nodev\n" + line}});
  };
  check_refused(with_mount("/etc\t/etc\tro\tbind\n"), "mount_not_visible",
                "rev-1: /ctx/agent/rev-1.d/mount:2: /etc -> /etc: EACCES: not visible to the parent (no parent mount "
                "shows /etc); remove the line or create the child again from coder");
  check_refused(with_mount("/ctx/shared/project-a\t/p\trw\tbind,nosuid,nodev\n"), "mount_widens_access",
                "rev-1: /ctx/agent/rev-1.d/mount:2: /ctx/shared/project-a -> /p: EACCES: rw requested but the parent "
                "sees /shared/project-a read-only; remove the line or create the child again from coder");
  check_refused(with_mount("/ctx/shared/project-a\t/p\tro\trbind,nosuid,nodev\n"), "mount_widens_access",
                "rev-1: /ctx/agent/rev-1.d/mount:2: /ctx/shared/project-a -> /p: EACCES: rbind requested but the "
                "parent's mount of /shared/project-a is bind (its submounts are hidden from the parent); remove the "
                "line or create the child again from coder");
  check_refused(
      with_mount("/usr/lib\t/lib\tro\tbind,nodev\n"), "mount_widens_access",
      "rev-1: /ctx/agent/rev-1.d/mount:2: /usr/lib -> /lib: EACCES: bind requested but the parent sees /usr "
      "with rbind: a bind would uncover what the submounts below it cover; leave the kind unset or ask rbind; "
      "remove the line or create the child again from coder");
  check_refused(with_mount("/home/me/project/src\t/src\trw\trbind,nosuid\n"), "mount_widens_access",
                "rev-1: /ctx/agent/rev-1.d/mount:2: /home/me/project/src -> /src: EACCES: nodev dropped but the "
                "parent's mount of /work has it; remove the line or create the child again from coder");
}

TEST_CASE("child: groups must be a subset of the parent's", "[unit]") {
  ChildRequest r = reviewer();
  r.groups = std::vector<std::uint32_t>{27, 44};
  refused(r, EACCES, "groups_not_subset",
          "rev-1: groups: EACCES: group 44 is not one of the parent's groups (27, 100)");
  ControlFiles f = parent_files();
  f.erase("groups");
  r.groups = std::vector<std::uint32_t>{1000};
  refused(r, EACCES, "groups_not_subset",
          "rev-1: groups: EACCES: group 1000 is not one of the parent's groups (it has none)", parent_spec(f));
}

TEST_CASE("child: a malformed request is EINVAL invalid_request", "[unit]") {
  ChildRequest r = reviewer();
  SECTION("label") {
    r.label = "no good";
    refused(r, EINVAL, "invalid_request",
            "rev-1: label 'no good': EINVAL: label type may contain only letters, digits and '_'");
    r.label = "a:b";
    refused(r, EINVAL, "invalid_request",
            "rev-1: label 'a:b': EINVAL: label must be a bare type (coder_t) or user:role:type:level");
    r.label = "";
    refused(r, EINVAL, "invalid_request", "rev-1: label '': EINVAL: empty value");
    r.label = "rev_t\nallow";
    refused(r, EINVAL, "invalid_request", "rev-1: label 'rev_t\\x0aallow': EINVAL: contains a control character");
  }
  SECTION("names of tools, models, shared spaces and agents") {
    r.tools = {"../x"};
    refused(r, EINVAL, "invalid_request", "rev-1: tools[0] ../x: EINVAL: tool name must begin with a letter or digit");
    r.tools = {"fs.read", "fs.read"};
    refused(r, EINVAL, "invalid_request", "rev-1: tools[1] fs.read: EINVAL: requested twice");
    r = reviewer();
    r.models = {"openai/gpt-4o", "*"};
    refused(r, EINVAL, "invalid_request",
            "rev-1: model[1] *: EINVAL: model name segment must begin with a letter or digit");
    r = reviewer();
    r.shared = {{"project a", {"read"}}};
    refused(r, EINVAL, "invalid_request",
            "rev-1: shared project a: EINVAL: name may contain only letters, digits and '_.-'");
    r.shared = {{"project-a", {"read"}}, {"project-a", {"read"}}};
    refused(r, EINVAL, "invalid_request", "rev-1: shared project-a: EINVAL: requested twice");
    r = reviewer();
    r.agents = {{"sub*", {"create"}}};
    refused(r, EINVAL, "invalid_request",
            "rev-1: agents sub*: EINVAL: agent name may contain only letters, digits and '_-'");
  }
  SECTION("permissions") {
    r.shared = {{"project-a", {"delete"}}};
    refused(r, EINVAL, "invalid_request",
            "rev-1: shared project-a: EINVAL: unknown permission 'delete' (shared permits: read write)");
    r.shared = {{"project-a", {}}};
    refused(r, EINVAL, "invalid_request",
            "rev-1: shared project-a: EINVAL: no permission requested (shared permits: read write)");
    r.shared = {{"project-a", {"read", "read"}}};
    refused(r, EINVAL, "invalid_request", "rev-1: shared project-a: EINVAL: permission read requested twice");
    r = reviewer();
    r.agents = {{"sub", {"execute"}}};
    refused(r, EINVAL, "invalid_request",
            "rev-1: agents sub: EINVAL: unknown permission 'execute' (agent permits: create start stop read write)");
  }
  SECTION("mounts") {
    r.mounts = {mount("/work", "work", kRo)};
    refused(r, EINVAL, "invalid_request",
            "rev-1: mount[0] /work -> work: EINVAL: path must be absolute (start with '/'): work");
    r.mounts = {mount("/work", "/w", kRo), mount("/shared/project-a", "/w", kRo)};
    refused(r, EINVAL, "invalid_request", "rev-1: mount[1] /shared/project-a -> /w: EINVAL: target /w requested twice");
  }
  SECTION("groups listed twice") {
    r.groups = std::vector<std::uint32_t>{27, 27};
    refused(r, EINVAL, "invalid_request", "rev-1: groups: EINVAL: group 27 requested twice");
  }
  SECTION("cwd outside every child mount, or not a strict absolute path") {
    r.cwd = "/etc";
    refused(
        r, EINVAL, "invalid_request",
        "rev-1: cwd /etc: EINVAL: outside every mount of the child (/work, /shared/project-a); choose a directory at "
        "or below one of them, or /");
    r.cwd = "work";
    refused(r, EINVAL, "invalid_request", "rev-1: cwd work: EINVAL: path must be absolute (start with '/')");
    r.cwd = "/work/../etc";
    refused(r, EINVAL, "invalid_request", "rev-1: cwd /work/../etc: EINVAL: '..' component in path");
    r.mounts.clear();
    r.cwd = "/work";
    refused(r, EINVAL, "invalid_request",
            "rev-1: cwd /work: EINVAL: the child has no mounts, so its only directory is /");
  }
  SECTION("an origin that cannot be written in the parent file") {
    auto p = plan_child(parent_spec(), reviewer(), ChildOrigin{"../s", ""}, gid_1000);
    REQUIRE_FALSE(p);
    CHECK(p.error().code == EINVAL);
    CHECK(p.error().reason == "invalid_request");
    CHECK(p.error().msg == "rev-1.d/parent:1:21: EINVAL: name must begin with a letter or digit");
  }
}

TEST_CASE("child: the parent session's coordination directory", "[unit]") {
  CHECK(child_context_dir(parent_spec(), "default", "rev-1") ==
        "/ctx/home/1000/agent/coder/session/default/context/child/rev-1");
}

// ---- write_child: the file system, in a temporary CTX root ----

namespace {

// Every path below root (directories end in '/'), sorted.
std::vector<std::string> tree(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    std::string p = e.path().string().substr(root.size());
    if (e.is_directory() && !e.is_symlink()) p += '/';
    out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct stat lstat_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st;
}

const char* const kRuntime = "#!/bin/sh\necho \"agent $CTX_AGENT\"\n";

// A CTX root holding the parent: its entry, its .d, its session.
struct Root {
  ctx::test::TempDir t;
  AgentSpec parent;
  ChildPlan child;

  Root() {
    t.write("agent/coder", kRuntime, 0755);
    for (const auto& [file, content] : parent_files()) t.write("agent/coder.d/" + file, content);
    t.mkdir("home/1000/agent/coder/session/default");
    t.write("home/1000/agent/coder/session/default/messages.jsonl", "{}\n");
    parent = parent_spec(parent_files(), t.path());
    auto p = plan_child(parent, reviewer(), kOrigin, gid_1000);
    REQUIRE(p);
    passes_check(parent, p);
    child = *p;
  }
  std::string context() const { return "home/1000/agent/coder/session/default/context/child/rev-1"; }
};

}  // namespace

TEST_CASE("write_child writes the .d, the entry, the root and the parent's coordination files", "[fs]") {
  Root r;
  auto w = write_child(r.parent, r.child, "default", "Task: review\n", "", std::nullopt);
  REQUIRE(w);
  std::vector<std::string> files;
  for (const auto& [file, content] : r.child.files) {
    INFO(file);
    CHECK(r.t.read("agent/rev-1.d/" + file) == content);
    CHECK((lstat_of(r.t / ("agent/rev-1.d/" + file)).st_mode & 07777) == 0644);
    files.push_back(file);
  }
  CHECK(ctx::test::names_in(r.t / "agent/rev-1.d") == files);
  auto loaded = load(r.t.path(), "rev-1");
  REQUIRE(loaded);
  auto want = r.child.spec;
  want.id_source = loaded->id_source;  // the files' owners, which load reads
  CHECK(*loaded == want);

  CHECK(r.t.read("agent/rev-1") == kRuntime);
  CHECK((lstat_of(r.t / "agent/rev-1").st_mode & 07777) == 0755);
  CHECK(S_ISDIR(lstat_of(r.t / "home/1000/agent/rev-1/root").st_mode));
  CHECK(ctx::test::names_in(r.t / "home/1000/agent/rev-1/root").empty());

  std::string c = r.context() + "/";
  CHECK(r.t.read(c + "agent") == "rev-1\n");
  CHECK(r.t.read(c + "session") == "default\n");
  CHECK(r.t.read(c + "status") == "created\n");
  CHECK(r.t.read(c + "handoff.md") == "Task: review\n");
  CHECK(r.t.read(c + "result.md").empty());
  CHECK(r.t.read(c + "refs.jsonl").empty());
  CHECK(S_ISDIR(lstat_of(r.t / (c + "artifact")).st_mode));
  CHECK(ctx::test::names_in(r.t / c) == std::vector<std::string>{"agent", "artifact", "handoff.md", "input.jsonl",
                                                                 "output.md", "refs.jsonl", "result.md", "session",
                                                                 "status"});
  CHECK(r.t.read(c + "input.jsonl").empty());
  CHECK(r.t.read(c + "output.md").empty());
  // No temporary name is left behind.
  CHECK(ctx::test::names_in(r.t / "agent") == std::vector<std::string>{"coder", "coder.d", "rev-1", "rev-1.d"});
  CHECK(r.t.read("home/1000/agent/coder/session/default/messages.jsonl") == "{}\n");
}

TEST_CASE("write_child makes the agent's channels and root with the owner's rights, and keeps the .d and the entry",
          "[fs]") {
  Root r;
  // As root, an owner with ids nobody has, whose home the test gives it;
  // otherwise the caller's own ids.
  bool root = ::geteuid() == 0;
  ctx::sys::Creds o{root ? 4242u : ::getuid(), root ? 4343u : ::getgid(), {}};
  if (root)
    for (const auto& e : std::filesystem::recursive_directory_iterator(r.t / "home/1000"))
      REQUIRE(::lchown(e.path().c_str(), o.uid, o.gid) == 0);
  if (root) REQUIRE(::chown((r.t / "home/1000").c_str(), o.uid, o.gid) == 0);
  struct stat before = lstat_of(r.t / "home/1000/agent/coder/session/default");
  REQUIRE(write_child(r.parent, r.child, "default", "x\n", "", o));
  std::string c = r.context();
  for (const std::string& p : std::vector<std::string>{
           "home/1000/agent/rev-1", "home/1000/agent/rev-1/root", "home/1000/agent/coder/session/default/context", c,
           c + "/handoff.md", c + "/result.md", c + "/status", c + "/artifact"}) {
    INFO(p);
    struct stat st = lstat_of(r.t / p);
    CHECK(st.st_uid == o.uid);
    CHECK(st.st_gid == o.gid);
  }
  // The child's control files and entry stay the caller's: with iso uid
  // the agent's uid is not the owner the trust check accepts, and with iso
  // shared the runtime could otherwise rewrite its child's policy.
  std::vector<std::string> caller{"agent/rev-1.d", "agent/rev-1"};
  for (const auto& [file, content] : r.child.files) caller.push_back("agent/rev-1.d/" + file);
  for (const std::string& p : caller) {
    INFO(p);
    struct stat st = lstat_of(r.t / p);
    CHECK(st.st_uid == ::geteuid());
    CHECK(st.st_gid == ::getegid());
    CHECK((st.st_mode & 022) == 0);
  }
  if (root) {
    ctx::agentdir::LoadOptions trusted;
    trusted.require_trusted_files = true;
    auto loaded = load(r.t.path(), "rev-1", trusted);
    INFO((loaded ? std::string() : loaded.error().msg));
    CHECK(loaded);
  }
  struct stat after = lstat_of(r.t / "home/1000/agent/coder/session/default");
  CHECK(after.st_uid == before.st_uid);
  CHECK(after.st_gid == before.st_gid);
}

// Attack: a root supervisor made a child's coordination files and root
// wherever root may, in a session or home its owner cannot write.
TEST_CASE("write_child as root makes nothing where the owner may not write", "[root]") {
  Root r;
  // The parent's session belongs to another user (root, 0755): the owner
  // 4242 may not make context/ in it.
  const ctx::sys::Creds o{4242, 4343, {}};
  REQUIRE(::chown((r.t / "home/1000/agent").c_str(), o.uid, o.gid) == 0);
  const std::vector<std::string> before = tree(r.t.path());
  auto w = write_child(r.parent, r.child, "default", "x\n", "", o);
  REQUIRE_FALSE(w);
  CHECK(w.error().code == EACCES);
  CHECK(w.error().msg == "rev-1: creating " + r.t.path() + "/" + r.context() + ": mkdirat context: EACCES");
  CHECK(tree(r.t.path()) == before);
}

TEST_CASE("write_child: a symlinked entry stays a symlink, a missing one is not made", "[fs]") {
  SECTION("symlink") {
    Root r;
    ::unlink((r.t / "agent/coder").c_str());
    r.t.symlink("/ctx/bin/runtime", "agent/coder");
    REQUIRE(write_child(r.parent, r.child, "default", "", "", std::nullopt));
    CHECK(std::filesystem::read_symlink(r.t / "agent/rev-1") == "/ctx/bin/runtime");
  }
  SECTION("none") {
    Root r;
    ::unlink((r.t / "agent/coder").c_str());
    REQUIRE(write_child(r.parent, r.child, "default", "", "", std::nullopt));
    CHECK(ctx::test::names_in(r.t / "agent") == std::vector<std::string>{"coder.d", "rev-1.d"});
  }
}

TEST_CASE("write_child: a taken name is EACCES exists and nothing is written", "[fs]") {
  for (const char* clash : {"rev-1", "rev-1.d", "rev-1.sock"}) {
    INFO(clash);
    Root r;
    if (std::string(clash) == "rev-1.d") {
      r.t.mkdir("agent/rev-1.d");
    } else {
      r.t.write(std::string("agent/") + clash, "");
    }
    auto before = tree(r.t.path());
    auto w = write_child(r.parent, r.child, "default", "x\n", "", std::nullopt);
    REQUIRE_FALSE(w);
    CHECK(w.error().code == EEXIST);
    CHECK(w.error().reason == "exists");
    CHECK(w.error().msg == "rev-1: EEXIST: " + r.t.path() + "/agent/" + clash +
                               " already exists (a child made earlier); delete it first (ctx agent delete rev-1), "
                               "create it with --replace, or choose another name");
    CHECK(tree(r.t.path()) == before);
  }
}

TEST_CASE("write_child: an earlier child's coordination directory is not overwritten", "[fs]") {
  Root r;
  r.t.write(r.context() + "/result.md", "earlier results\n");
  auto before = tree(r.t.path());
  auto w = write_child(r.parent, r.child, "default", "x\n", "", std::nullopt);
  REQUIRE_FALSE(w);
  CHECK(w.error().code == EEXIST);
  CHECK(w.error().reason == "exists");
  CHECK(w.error().msg == "rev-1: EEXIST: " + r.t / r.context() +
                             " already exists (an earlier child of that name); delete the child (ctx agent delete "
                             "rev-1), create it with --replace, or choose another name");
  CHECK(tree(r.t.path()) == before);
  CHECK(r.t.read(r.context() + "/result.md") == "earlier results\n");
}

TEST_CASE("write_child: a failure late in the work removes what the call made, and only that", "[fs]") {
  Root r;
  // The entry cannot be copied, which is found after the coordination
  // directory, the root and the temporary .d were made.
  ::unlink((r.t / "agent/coder").c_str());
  r.t.mkdir("agent/coder");
  auto before = tree(r.t.path());
  auto w = write_child(r.parent, r.child, "default", "x\n", "", std::nullopt);
  REQUIRE_FALSE(w);
  CHECK(w.error().code == EINVAL);
  CHECK(w.error().msg ==
        "rev-1: copying " + r.t.path() + "/agent/coder: EINVAL: is neither a regular file nor a symbolic link");
  CHECK(tree(r.t.path()) == before);
  CHECK(r.t.read("home/1000/agent/coder/session/default/messages.jsonl") == "{}\n");
}

TEST_CASE("write_child: a session name that is not a name is refused", "[fs]") {
  Root r;
  auto before = tree(r.t.path());
  auto w = write_child(r.parent, r.child, "../..", "x\n", "", std::nullopt);
  REQUIRE_FALSE(w);
  CHECK(w.error().code == EINVAL);
  CHECK(w.error().reason == "invalid_request");
  CHECK(w.error().msg == "rev-1: session '../..': EINVAL: session name must begin with a letter or digit");
  CHECK(tree(r.t.path()) == before);
}

// A parent killed in the middle of a create left its coordination
// directory ("created") and a temporary .d; the next create of that name
// cleans them up instead of refusing with "exists".
TEST_CASE("write_child: what an interrupted create left is cleaned up by the next one", "[fs]") {
  for (const char* status : {"created\n", ""}) {
    INFO("status '" << status << "'");
    Root r;
    r.t.write(r.context() + "/agent", "rev-1\n");
    r.t.write(r.context() + "/session", "default\n");
    if (*status != '\0') r.t.write(r.context() + "/status", status);
    r.t.mkdir("agent/.rev-1.d.tmp.AbC123");
    r.t.write("agent/.rev-1.d.tmp.AbC123/owner", "1000\n");
    // Planted by the parent's agent: a link is removed as a link, never
    // followed.
    r.t.write("outside", "keep\n");
    r.t.symlink(r.t / "outside", r.context() + "/link");
    if (*status == '\0') ::unlink((r.t / (r.context() + "/link")).c_str());  // only agent and session then
    auto w = write_child(r.parent, r.child, "default", "Task\n", "", std::nullopt);
    INFO((w ? std::string() : w.error().msg));
    REQUIRE(w);
    CHECK(r.t.read(r.context() + "/status") == "created\n");
    CHECK(r.t.read(r.context() + "/handoff.md") == "Task\n");
    CHECK_FALSE(std::filesystem::exists(r.t / "agent/.rev-1.d.tmp.AbC123"));
    CHECK(r.t.read("outside") == "keep\n");
    CHECK(r.t.read("agent/rev-1.d/owner") == "1000\n");
  }
}

// docs/abi-policy.md, "What each class gates": a child's mount rules are
// derived from its attenuated table at create, and at start its own
// mount rules are judged by its table, not by the parent's exact rules.
TEST_CASE("child: mount rules are derived at create and judged by the table at start", "[unit]") {
  ChildRequest r = reviewer();
  r.mounts = {mount("/work/src", "/src", kRw), mount("/shared/project-a", "/p", kRo)};
  r.cwd = "/src";
  auto p = plan(r);
  REQUIRE(p);
  // Exactly what its table needs: the launch of the child allows it.
  CHECK(ctx::agentdir::check_mount_policy("rev-1", p->spec.mounts, p->spec.policy, "reviewer_t"));
  CHECK(p->files.at("policy").find("allow reviewer_t mount:/src read\nallow reviewer_t mount:/src write\n"
                                   "allow reviewer_t mount:/p read\n") != std::string::npos);
  // The parent holds none of these rules, yet the child passes at start.
  CHECK_FALSE(parent_spec().policy.allows("coder_t", ctx::policy::Class::mount, "/src", "write"));
  CHECK(check_child(parent_spec(), p->spec));
  // A mount rule naming no line of the child's table allows nothing and
  // passes; the line it would need is what check_derived refuses.
  AgentSpec extra = child_after({{"policy", p->files.at("policy") + "allow reviewer_t mount:/etc write\n"}});
  CHECK(check_child(parent_spec(), extra));
  check_refused(child_after({{"mount", "/etc\t/etc\tro\tbind\n"}}), "mount_not_visible",
                "rev-1: /ctx/agent/rev-1.d/mount:1: /etc -> /etc: EACCES: not visible to the parent (no parent mount "
                "shows /etc); remove the line or create the child again from coder");
  // Every other class still needs the parent's exact rule.
  check_refused(child_after({{"policy", "allow reviewer_t tool:zzz execute\n"}}), "exceeds_parent_policy",
                "rev-1: /ctx/agent/rev-1.d/policy: child policy line 1: allow reviewer_t tool:zzz execute: EACCES: "
                "the parent (coder_t) does not hold tool:zzz execute");
}

TEST_CASE("child: ancestor_types walks the parent files; what cannot be read admits nothing", "[unit]") {
  auto with = [](const std::string& name, const std::string& type, const std::string& parent) {
    AgentSpec s;
    s.name = name;
    if (!type.empty()) s.label = Label{"u", "r", type, "s0"};
    if (!parent.empty()) s.parent = Parent{parent, "default", ""};
    return s;
  };
  std::map<std::string, AgentSpec> tree{{"coder", with("coder", "coder_t", "root")},
                                        {"root", with("root", "root_t", "")},
                                        {"nolabel", with("nolabel", "", "")},
                                        {"loop", with("loop", "loop_t", "loop")}};
  auto load = [&](const std::string& n) -> ctx::Result<AgentSpec> {
    auto it = tree.find(n);
    if (it == tree.end()) return ctx::fail(ENOENT, n + ": no such agent");
    return it->second;
  };
  CHECK(ancestor_types(with("rev", "rev_t", ""), load).empty());
  CHECK(ancestor_types(with("rev", "rev_t", "coder"), load) == std::vector<std::string>{"coder_t", "root_t"});
  CHECK(ancestor_types(with("rev", "rev_t", "gone"), load) == std::vector<std::string>{""});
  CHECK(ancestor_types(with("rev", "rev_t", "nolabel"), load) == std::vector<std::string>{""});
  auto loop = ancestor_types(with("rev", "rev_t", "loop"), load);
  REQUIRE(loop.size() == kMaxAncestry + 1);
  CHECK(loop.front() == "loop_t");
  CHECK(loop.back().empty());
}
