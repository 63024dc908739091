// The agent view's content rules, decided over a real CTX tree in a
// temporary directory (read through FsTree, as the server reads it).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <optional>

#include "base/unique_fd.hpp"
#include "sys/file.hpp"
#include "test/support/tempdir.hpp"
#include "access/fs_tree.hpp"
#include "access/rules.hpp"

using ctx::access::FsTree;
using ctx::access::Viewer;
using Names = std::vector<std::string>;

namespace {

constexpr const char* kPolicy =
    "allow coder_t tool:fs.read execute\n"
    "allow coder_t tool:shell.exec execute\n"
    "allow coder_t tool:guarded execute\n"
    "allow coder_t tool:link execute\n"
    "allow coder_t tool:project.test execute\n"
    "allow coder_t tool:my.tool execute\n"
    "allow coder_t model:debug/echo use\n"
    "allow coder_t model:mine use\n"
    "allow coder_t shared:project-a read\n"
    "allow coder_t agent:peer read\n";

// The v1 reference tree's shape, with entries the view must hide.
void make_tree(const ctx::test::TempDir& t) {
  t.write("status", "ok\n");
  t.write("bin/ctx", "#!/bin/sh\n", 0755);
  t.write("AGENTS.rc", "x\n");
  t.write("tool/fs.read", "#!/bin/sh\n", 0755);
  t.write("tool/fs.read.d/name", "fs.read\n");
  t.write("tool/fs.read.d/schema", "{}\n");
  t.write("tool/fs.read.d/log", "secret facts\n");
  t.write("tool/fs.write", "#!/bin/sh\n", 0755);  // no grant
  t.write("tool/fs.write.d/name", "fs.write\n");
  t.write("tool/shell.exec", "#!/bin/sh\n", 0644);  // granted, not executable
  t.write("tool/guarded", "#!/bin/sh\n", 0755);     // its own policy refuses coder_t
  t.write("tool/guarded.d/policy", "allow other_t tool:guarded execute\n");
  t.symlink("fs.read", "tool/link");
  t.write("tool/README", "about tools\n");
  t.mkdir("model");
  t.symlink("/ctx/model/debug/echo", "model/main");
  t.symlink("/ctx/model/openai/gpt-4o", "model/helper");
  t.symlink("/etc/passwd", "model/evil");
  t.write("model/debug/echo", "#!/bin/sh\n", 0755);
  t.write("model/debug/echo.d/id", "debug/echo\n");
  t.write("model/debug/echo.d/driver", "exec\n");
  t.write("model/debug/echo.d/env", "API_KEY=sk-secret\n");
  t.write("model/openai/gpt-4o", "#!/bin/sh\n", 0755);
  t.write("model/openai/gpt-4o.d/id", "gpt-4o\n");
  t.write("agent/coder", "#!/bin/sh\n", 0755);
  t.write("agent/coder.d/status", "busy\n");
  t.write("agent/coder.d/policy", kPolicy);
  t.write("agent/coder.sock", "");
  t.write("agent/reviewer", "#!/bin/sh\n", 0755);
  t.write("agent/reviewer.d/parent", "agent:coder session:default\n");
  t.write("agent/peer.d/status", "idle\n");
  t.write("agent/other", "#!/bin/sh\n", 0755);
  t.write("agent/other.d/policy", "allow other_t tool:fs.write execute\n");
  t.write("home/1000/agent/coder/session/default/events.jsonl", "");
  t.symlink("/etc", "home/1000/agent/coder/etc-link");
  t.write("home/1000/agent/other/session/default/messages.jsonl", "private\n");
  t.write("home/1000/tool/my.tool", "#!/bin/sh\n", 0755);
  t.write("home/1000/model/mine", "#!/bin/sh\n", 0755);
  t.symlink("/ctx/home/1000/model/mine", "home/1000/model/coder");
  t.write("home/2000/agent/x/data", "other user\n");
  t.write("shared/project-a/data/f", "data\n");
  t.write("shared/project-a/tool/project.test", "#!/bin/sh\n", 0755);
  t.write("shared/project-a/tool/rogue", "#!/bin/sh\n", 0755);
  t.write("shared/secret/data/f", "secret\n");
}

// A tree made by make_tree and the reader the server would use on it.
struct Fixture {
  ctx::test::TempDir t;
  ctx::UniqueFd root;
  std::optional<FsTree> tree;
  Fixture() {
    make_tree(t);
    auto r = ctx::sys::open(ctx::sys::at_cwd, t.path(), ctx::sys::Open::directory);
    REQUIRE(r);
    root = std::move(*r);
    tree.emplace(root.get());
  }
};

Viewer coder() {
  Viewer v;
  v.agent = "coder";
  v.owner = 1000;
  v.subject = "coder_t";
  v.policy = *ctx::policy::Policy::parse("coder.d/policy", kPolicy);
  v.uid = ::geteuid();
  v.gid = ::getegid();
  return v;
}

}  // namespace

TEST_CASE("the view shows only what the agent may use", "[fs]") {
  Fixture f;
  const FsTree& tree = *f.tree;
  const Viewer v = coder();
  using ctx::access::list;

  CHECK(list(v, tree, "") == Names{"agent", "bin", "home", "model", "shared", "status", "tool"});
  CHECK(list(v, tree, "bin") == Names{"ctx"});
  // Tools: granted, executable for its ids, its own policy agrees; no link.
  CHECK(list(v, tree, "tool") == Names{"fs.read", "fs.read.d"});
  CHECK(list(v, tree, "tool/fs.read.d") == Names{"name", "schema"});
  CHECK_FALSE(ctx::access::decide(v, tree, "tool/fs.write.d/name"));
  CHECK_FALSE(ctx::access::decide(v, tree, "tool/guarded.d/policy"));
  // Models: the granted one, its alias as the model, never its env.
  CHECK(list(v, tree, "model") == Names{"debug", "main"});
  auto main = ctx::access::decide(v, tree, "model/main");
  REQUIRE(main);
  CHECK(main->host_rel == "model/debug/echo");
  CHECK(main->entry.type == ctx::access::HostEntry::Type::regular);
  CHECK(list(v, tree, "model/debug") == Names{"echo", "echo.d"});
  CHECK(list(v, tree, "model/debug/echo.d") == Names{"driver", "id"});
  CHECK_FALSE(ctx::access::decide(v, tree, "model/openai"));
  // Agents: itself, the child whose parent file names it, the one it may read.
  CHECK(list(v, tree, "agent") == Names{"coder", "coder.d", "peer.d", "reviewer", "reviewer.d"});
  CHECK(list(v, tree, "agent/coder.d") == Names{"policy", "status"});
  CHECK_FALSE(ctx::access::decide(v, tree, "agent/other.d/policy"));
  // Its own home whole (no symlink), its user tiers filtered, nobody else's.
  CHECK(list(v, tree, "home") == Names{"1000"});
  CHECK(list(v, tree, "home/1000") == Names{"agent", "model", "tool"});
  CHECK(list(v, tree, "home/1000/agent") == Names{"coder"});
  CHECK(list(v, tree, "home/1000/agent/coder") == Names{"session"});
  CHECK(list(v, tree, "home/1000/tool") == Names{"my.tool"});
  CHECK(list(v, tree, "home/1000/model") == Names{"coder", "mine"});
  CHECK(ctx::access::decide(v, tree, "home/1000/model/coder")->host_rel == "home/1000/model/mine");
  CHECK_FALSE(ctx::access::decide(v, tree, "home/1000/agent/other"));
  CHECK_FALSE(ctx::access::decide(v, tree, "home/2000"));
  // Shared spaces with read, their tool tier filtered.
  CHECK(list(v, tree, "shared") == Names{"project-a"});
  CHECK(list(v, tree, "shared/project-a/tool") == Names{"project.test"});
  CHECK(ctx::access::decide(v, tree, "shared/project-a/data/f"));
  CHECK_FALSE(ctx::access::decide(v, tree, "shared/secret/data/f"));
  CHECK(ctx::access::tool_tiers_under("shared", {"project-a", "b"}) == Names{"shared/project-a/tool", "shared/b/tool"});
  CHECK(ctx::access::tool_tiers_under("shared/project-a", {}) == Names{"shared/project-a/tool"});
  CHECK(ctx::access::tool_tiers_under("shared/project-a/data", {}).empty());
  CHECK(ctx::access::plain(v, "home/1000/agent/coder/session"));
  CHECK(ctx::access::plain(v, "shared/project-a/data"));
  CHECK(ctx::access::plain(v, "shared"));
  CHECK_FALSE(ctx::access::plain(v, "shared/project-a/tool"));
  CHECK_FALSE(ctx::access::plain(v, "home/1000"));
  CHECK_FALSE(ctx::access::plain(v, "agent"));
  CHECK_FALSE(ctx::access::plain(v, "home/1000/agent/other"));
}

TEST_CASE("a view without a label shows no grant, only the agent itself", "[fs]") {
  Fixture f;
  const FsTree& tree = *f.tree;
  Viewer v = coder();
  v.subject.clear();
  using ctx::access::list;
  CHECK(list(v, tree, "tool").empty());
  CHECK(list(v, tree, "model").empty());
  CHECK(list(v, tree, "shared").empty());
  CHECK(list(v, tree, "agent") == Names{"coder", "coder.d", "reviewer", "reviewer.d"});
}

TEST_CASE("a policy change changes the view at the next decision", "[fs]") {
  Fixture f;
  auto& t = f.t;
  const FsTree& tree = *f.tree;
  Viewer v = coder();
  CHECK(ctx::access::decide(v, tree, "tool/fs.read"));
  v.policy = *ctx::policy::Policy::parse("coder.d/policy", "allow coder_t tool:shell.exec execute\n");
  CHECK_FALSE(ctx::access::decide(v, tree, "tool/fs.read"));
  CHECK(ctx::access::list(v, tree, "tool").empty());
  // A tool's .d/ or policy that is there but cannot be read as such
  // refuses: it is not an absent policy.
  v.policy = *ctx::policy::Policy::parse(
      "coder.d/policy",
      std::string(kPolicy) + "allow coder_t tool:a.tool execute\nallow coder_t tool:b.tool execute\n");
  t.write("tool/a.tool", "#!/bin/sh\n", 0755);
  t.write("elsewhere/open.d/policy", "allow coder_t tool:a.tool execute\n");
  t.symlink(t / "elsewhere/open.d", "tool/a.tool.d");
  t.write("tool/b.tool", "#!/bin/sh\n", 0755);
  t.mkdir("tool/b.tool.d");
  t.symlink(t / "elsewhere/open.d/policy", "tool/b.tool.d/policy");
  CHECK_FALSE(ctx::access::decide(v, tree, "tool/a.tool"));
  CHECK_FALSE(ctx::access::decide(v, tree, "tool/b.tool"));
  t.write("tool/b.tool.d/other", "x\n");
  ::unlink((t / "tool/b.tool.d/policy").c_str());
  CHECK(ctx::access::decide(v, tree, "tool/b.tool"));  // no policy at all: the agent's decides
  // A tool's own policy that does not parse refuses.
  v.policy = *ctx::policy::Policy::parse("coder.d/policy", kPolicy);
  t.write("tool/fs.read.d/policy", "allow coder_t tool:fs.read\n");
  CHECK_FALSE(ctx::access::decide(v, tree, "tool/fs.read"));
}

TEST_CASE("ctx model's lookup: the user tier first, an alias as the model it names, each layer's refusal", "[fs]") {
  Fixture f;
  f.t.write("model/debug/echo.d/policy", "allow coder_t model:debug/echo use\n");
  f.t.write("model/guarded", "#!/bin/sh\n", 0755);
  f.t.write("model/guarded.d/policy", "allow other_t model:guarded use\n");
  f.t.write("model/inert", "#!/bin/sh\n", 0644);
  Viewer v = coder();
  v.policy = *ctx::policy::Policy::parse("p", std::string(kPolicy) +
                                                  "allow coder_t model:guarded use\n"
                                                  "allow coder_t model:inert use\n");
  using ctx::access::ModelVerdict;
  auto c = ctx::access::model_call(v, *f.tree, "debug/echo");
  CHECK(c.verdict == ModelVerdict::allowed);
  CHECK(c.rel == "model/debug/echo");
  CHECK(c.alias.empty());
  // main -> /ctx/model/debug/echo: the model it names, checked as that.
  c = ctx::access::model_call(v, *f.tree, "main");
  CHECK(c.verdict == ModelVerdict::allowed);
  CHECK(c.name == "debug/echo");
  CHECK(c.alias == "model/main");
  // helper -> openai/gpt-4o, which coder may not use.
  CHECK(ctx::access::model_call(v, *f.tree, "helper").verdict == ModelVerdict::agent_policy);
  // The user tier's `coder` alias (to its own `mine`) is found before any
  // system entry of that name.
  f.t.write("model/coder", "#!/bin/sh\n", 0755);
  c = ctx::access::model_call(v, *f.tree, "coder");
  CHECK(c.verdict == ModelVerdict::allowed);
  CHECK(c.name == "mine");
  CHECK(c.rel == "home/1000/model/mine");
  CHECK(ctx::access::model_call(v, *f.tree, "guarded").verdict == ModelVerdict::model_policy);
  CHECK(ctx::access::model_call(v, *f.tree, "inert").verdict == ModelVerdict::mode);
  CHECK(ctx::access::model_call(v, *f.tree, "evil").verdict == ModelVerdict::not_found);  // -> /etc/passwd
  CHECK(ctx::access::model_call(v, *f.tree, "debug/nope").verdict == ModelVerdict::agent_policy);
  CHECK(ctx::access::model_call(v, *f.tree, "../x").verdict == ModelVerdict::not_found);
  CHECK(ctx::access::model_call(v, *f.tree, "debug").verdict == ModelVerdict::agent_policy);  // a directory
}

TEST_CASE("a user agent's view shows its own .d in its home and not its system namesake", "[fs]") {
  Fixture f;
  f.t.write("home/1000/agent/coder.d/entry", "#!/bin/sh\n", 0755);
  f.t.write("home/1000/agent/coder.d/policy", kPolicy);
  const FsTree& tree = *f.tree;
  using ctx::access::list;
  Viewer u = coder();
  u.user_tier = true;
  // Its home holds its .d (entry and control files) next to its state.
  CHECK(list(u, tree, "home/1000/agent") == Names{"coder", "coder.d"});
  CHECK(list(u, tree, "home/1000/agent/coder.d") == Names{"entry", "policy"});
  CHECK(ctx::access::plain(u, "home/1000/agent/coder.d"));
  // The system agent "coder" is another agent: not itself, and
  // reviewer's parent file names that one, not this one.
  CHECK(list(u, tree, "agent") == Names{"peer.d"});
  CHECK_FALSE(ctx::access::decide(u, tree, "agent/coder.d/policy"));
  // A system agent of the same name does not see the user agent's .d.
  Viewer s = coder();
  CHECK(list(s, tree, "home/1000/agent") == Names{"coder"});
  CHECK_FALSE(ctx::access::plain(s, "home/1000/agent/coder.d"));
  // The viewer's label and policy are read from the tier it is in.
  for (const std::string d : {"home/1000/agent/coder.d/", "agent/coder.d/"}) f.t.write(d + "owner", "1000\n");
  f.t.write("home/1000/agent/coder.d/label", "user_t\n");
  f.t.write("agent/coder.d/label", "sys_t\n");
  CHECK(ctx::access::load_viewer(f.t.path(), u).subject == "user_t");
  CHECK(ctx::access::load_viewer(f.t.path(), s).subject == "sys_t");
}

TEST_CASE("a tool's or model's own policy must admit every ancestor's type too", "[fs]") {
  Fixture f;
  // guarded admits other_t only; a child of type coder_t whose parent is
  // other_t passes, one whose ancestors include an unknown or another
  // type does not.
  f.t.write("tool/guarded.d/policy", "allow coder_t tool:guarded execute\nallow other_t tool:guarded execute\n");
  f.t.write("model/debug/echo.d/policy", "allow coder_t model:debug/echo use\n");
  Viewer v = coder();
  const auto e = *f.tree->stat("tool/guarded");
  using ctx::access::ToolVerdict;
  CHECK(ctx::access::tool_verdict(v, *f.tree, "tool", "guarded", e) == ToolVerdict::allowed);
  v.ancestors = {"other_t"};
  CHECK(ctx::access::tool_verdict(v, *f.tree, "tool", "guarded", e) == ToolVerdict::allowed);
  CHECK(ctx::access::list(v, *f.tree, "tool") == Names{"fs.read", "fs.read.d", "guarded", "guarded.d"});
  for (const auto& anc : std::vector<std::vector<std::string>>{{"other_t", "root_t"}, {"other_t", ""}, {""}}) {
    v.ancestors = anc;
    std::string refused;
    CHECK(ctx::access::tool_verdict(v, *f.tree, "tool", "guarded", e, &refused) == ToolVerdict::tool_policy);
    CHECK(refused == anc.back());
    CHECK(ctx::access::list(v, *f.tree, "tool") == Names{"fs.read", "fs.read.d"});  // the view agrees
  }
  v.ancestors = {"root_t"};
  CHECK(ctx::access::own_policy_gap(v, "root_t", ctx::policy::Class::tool, "guarded", "execute") ==
        "'allow root_t tool:guarded execute' for coder's ancestor type root_t (ancestor_policy: a child never holds "
        "more than its ancestors)");
  auto c = ctx::access::model_call(v, *f.tree, "debug/echo");
  CHECK(c.verdict == ctx::access::ModelVerdict::model_policy);
  CHECK(c.refused_type == "root_t");
  v.ancestors = {};
  CHECK(ctx::access::model_call(v, *f.tree, "debug/echo").verdict == ctx::access::ModelVerdict::allowed);
}

// docs/abi-policy.md, "session": in the agent's own home the view shows
// its current session and session/index; another session only with
// `session:<name> read`. Another agent's sessions never.
TEST_CASE("the view hides the agent's other sessions without session:<name> read", "[fs]") {
  Fixture f;
  f.t.write("home/1000/agent/coder/session/a/state", "running\n");
  f.t.write("home/1000/agent/coder/session/b/messages.jsonl", "secret\n");
  f.t.write("home/1000/agent/coder/session/index/by-cwd/%2F", "a\n");
  f.t.write("home/1000/agent/coder/session/notes", "not a session\n");
  f.t.write("home/1000/agent/coder/data/f", "data\n");
  const FsTree& tree = *f.tree;
  using ctx::access::decide;
  using ctx::access::list;
  Viewer v = coder();
  v.session = "a";

  CHECK(list(v, tree, "home/1000/agent/coder") == Names{"data", "session"});
  CHECK(list(v, tree, "home/1000/agent/coder/session") == Names{"a", "index"});
  CHECK(decide(v, tree, "home/1000/agent/coder/session/a/state"));
  CHECK(decide(v, tree, "home/1000/agent/coder/session/index/by-cwd/%2F"));
  CHECK(decide(v, tree, "home/1000/agent/coder/data/f"));
  for (const char* hidden : {"b", "b/messages.jsonl", "default", "default/events.jsonl", "notes"}) {
    INFO(hidden);
    CHECK_FALSE(decide(v, tree, std::string("home/1000/agent/coder/session/") + hidden));
  }
  CHECK_FALSE(ctx::access::reachable(v, tree, "home/1000/agent/coder/session/b/messages.jsonl"));

  // The read rule shows that session, and only it.
  Viewer r = v;
  r.policy = *ctx::policy::Policy::parse("coder.d/policy", std::string(kPolicy) + "allow coder_t session:b read\n");
  CHECK(list(r, tree, "home/1000/agent/coder/session") == Names{"a", "b", "index"});
  CHECK(decide(r, tree, "home/1000/agent/coder/session/b/messages.jsonl"));
  CHECK_FALSE(decide(r, tree, "home/1000/agent/coder/session/default"));
  // Without a label the rule grants nothing.
  r.subject.clear();
  CHECK(list(r, tree, "home/1000/agent/coder/session") == Names{"a", "index"});
  // Another agent's session, even one named like a granted one: never.
  CHECK_FALSE(decide(r, tree, "home/1000/agent/other/session/default/messages.jsonl"));

  // The home and its session/ are built name by name; what they hold
  // otherwise (a shown session, data/) may be bound whole.
  CHECK(ctx::access::holds_sessions(v, "home/1000/agent/coder"));
  CHECK(ctx::access::holds_sessions(v, "home/1000/agent/coder/session"));
  CHECK_FALSE(ctx::access::holds_sessions(v, "home/1000/agent/coder/session/a"));
  CHECK_FALSE(ctx::access::holds_sessions(v, "home/1000/agent/coder/data"));
  CHECK_FALSE(ctx::access::holds_sessions(v, "home/1000/agent/other/session"));
}
