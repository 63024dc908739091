// The access rules' tool and model decisions (access/rules.hpp:
// tool_verdict, model_call, own_policy_refuses) over an in-memory tree:
// each layer's refusal, in the order of seed 000's permission check.
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "access/rules.hpp"

using ctx::access::HostEntry;
using ctx::access::HostTree;
using ctx::access::ModelVerdict;
using ctx::access::ToolVerdict;
using ctx::access::Viewer;
using ctx::policy::Class;
using ctx::policy::Policy;
using Type = HostEntry::Type;

namespace {

// A CTX tree held in memory: entries by relative path, with a file's text
// or a link's target.
class MemTree : public HostTree {
 public:
  void file(const std::string& rel, const std::string& text, std::uint32_t mode = 0755, std::uint32_t uid = 1000,
            std::uint32_t gid = 1000) {
    nodes_[rel] = Node{HostEntry{Type::regular, mode, uid, gid, text.size(), 0, 0}, text, std::nullopt};
  }
  void dir(const std::string& rel) { nodes_[rel] = Node{HostEntry{Type::directory, 0755, 1000, 1000}, {}, {}}; }
  void link(const std::string& rel, const std::string& target) {
    nodes_[rel] = Node{HostEntry{Type::symlink, 0777, 1000, 1000}, std::nullopt, target};
  }
  void unreadable(const std::string& rel) { nodes_[rel].text.reset(); }

  std::optional<HostEntry> stat(const std::string& rel) const override {
    auto it = nodes_.find(rel);
    return it == nodes_.end() ? std::nullopt : std::optional<HostEntry>(it->second.entry);
  }
  std::optional<std::string> read(const std::string& rel) const override {
    auto it = nodes_.find(rel);
    return it == nodes_.end() || it->second.entry.type != Type::regular ? std::nullopt : it->second.text;
  }
  std::optional<std::string> read_link(const std::string& rel) const override {
    auto it = nodes_.find(rel);
    return it == nodes_.end() ? std::nullopt : it->second.target;
  }
  std::vector<std::string> list(const std::string& rel) const override {
    std::vector<std::string> out;
    const std::string prefix = rel.empty() ? "" : rel + "/";
    for (const auto& [path, node] : nodes_)
      if (path.compare(0, prefix.size(), prefix) == 0 && path.size() > prefix.size() &&
          path.find('/', prefix.size()) == std::string::npos)
        out.push_back(path.substr(prefix.size()));
    return out;
  }

 private:
  struct Node {
    HostEntry entry;
    std::optional<std::string> text;
    std::optional<std::string> target;
  };
  std::map<std::string, Node> nodes_;
};

Policy parsed(const std::string& text) {
  auto p = Policy::parse("test/policy", text);
  REQUIRE(p);
  return *p;
}

// coder_t, running as uid 1000 gid 1000, with the grants given.
Viewer viewer(const std::string& policy) {
  Viewer v;
  v.agent = "coder";
  v.owner = 1000;
  v.subject = "coder_t";
  v.policy = parsed(policy);
  v.uid = 1000;
  v.gid = 1000;
  return v;
}

ToolVerdict verdict(const Viewer& v, const MemTree& t, const std::string& name, std::string* refused = nullptr) {
  auto e = t.stat("tool/" + name);
  REQUIRE(e);
  return ctx::access::tool_verdict(v, t, "tool", name, *e, refused);
}

}  // namespace

TEST_CASE("own_policy_refuses: the viewer's type first, then each ancestor's; no label is never admitted", "[unit]") {
  const Policy own = parsed("allow coder_t tool:t execute\nallow parent_t tool:t execute\n");
  Viewer v = viewer("");
  CHECK_FALSE(ctx::access::own_policy_refuses(v, own, Class::tool, "t", "execute"));
  // Another object or permission: the viewer's own type is named.
  CHECK(ctx::access::own_policy_refuses(v, own, Class::tool, "u", "execute") == std::optional<std::string>("coder_t"));
  CHECK(ctx::access::own_policy_refuses(v, own, Class::model, "t", "use") == std::optional<std::string>("coder_t"));
  v.ancestors = {"parent_t"};
  CHECK_FALSE(ctx::access::own_policy_refuses(v, own, Class::tool, "t", "execute"));
  v.ancestors = {"parent_t", "root_t", "other_t"};
  CHECK(ctx::access::own_policy_refuses(v, own, Class::tool, "t", "execute") == std::optional<std::string>("root_t"));
  v.ancestors = {"", "parent_t"};
  CHECK(ctx::access::own_policy_refuses(v, own, Class::tool, "t", "execute") == std::optional<std::string>(""));
  // No label: refused as "", before any ancestor is asked.
  v.subject.clear();
  v.ancestors = {"parent_t"};
  CHECK(ctx::access::own_policy_refuses(v, own, Class::tool, "t", "execute") == std::optional<std::string>(""));
  v.subject = "coder_t";
  CHECK(
      ctx::access::own_policy_gap(v, "", Class::tool, "t", "execute") ==
      "'allow <no label> tool:t execute' for an ancestor of coder that has no label or cannot be read (ancestor_policy: a "
      "child never holds more than its ancestors)");
  CHECK(ctx::access::own_policy_gap(v, "coder_t", Class::tool, "t", "execute") == "'allow coder_t tool:t execute'");
}

TEST_CASE("tool_verdict: not a tool, then the agent's policy, the execute bit, the tool's own policy", "[unit]") {
  MemTree t;
  t.dir("tool");
  t.file("tool/ok", "#!/bin/sh\n");
  t.file("tool/ungranted", "#!/bin/sh\n");
  t.file("tool/plain", "#!/bin/sh\n", 0644);
  t.dir("tool/dir");
  t.link("tool/link", "ok");
  t.file("tool/x.d", "#!/bin/sh\n");
  Viewer v = viewer(
      "allow coder_t tool:ok execute\nallow coder_t tool:plain execute\nallow coder_t tool:dir execute\n"
      "allow coder_t tool:link execute\n");
  CHECK(verdict(v, t, "ok") == ToolVerdict::allowed);
  CHECK(verdict(v, t, "dir") == ToolVerdict::not_a_tool);
  CHECK(verdict(v, t, "link") == ToolVerdict::not_a_tool);
  CHECK(verdict(v, t, "x.d") == ToolVerdict::not_a_tool);  // a name no tool may have
  CHECK(verdict(v, t, "ungranted") == ToolVerdict::agent_policy);
  CHECK(verdict(v, t, "plain") == ToolVerdict::mode);
  // Without a label nothing is granted.
  Viewer unlabelled = v;
  unlabelled.subject.clear();
  CHECK(verdict(unlabelled, t, "ok") == ToolVerdict::agent_policy);
}

TEST_CASE("tool_verdict: the execute bit that applies to the viewer's ids", "[unit]") {
  MemTree t;
  t.file("tool/owner-only", "", 0700, 1000, 2000);
  t.file("tool/group-only", "", 0010, 3000, 2000);
  t.file("tool/other-only", "", 0001, 3000, 3000);
  Viewer v = viewer(
      "allow coder_t tool:owner-only execute\nallow coder_t tool:group-only execute\n"
      "allow coder_t tool:other-only execute\n");
  CHECK(verdict(v, t, "owner-only") == ToolVerdict::allowed);
  CHECK(verdict(v, t, "group-only") == ToolVerdict::mode);
  CHECK(verdict(v, t, "other-only") == ToolVerdict::allowed);
  v.groups = {2000};  // a supplementary group counts as the group
  CHECK(verdict(v, t, "group-only") == ToolVerdict::allowed);
  v.gid = 3000;  // the owner of the file by group: its group bit, not other's
  CHECK(verdict(v, t, "other-only") == ToolVerdict::mode);
  v.uid = 3000;  // the file's owner: only the owner bit counts
  CHECK(verdict(v, t, "group-only") == ToolVerdict::mode);
  v.uid = 0;  // root: any execute bit
  CHECK(verdict(v, t, "group-only") == ToolVerdict::allowed);
  t.file("tool/none", "", 0644, 0, 0);
  v = viewer("allow coder_t tool:none execute\n");
  v.uid = 0;
  CHECK(verdict(v, t, "none") == ToolVerdict::mode);
}

TEST_CASE("tool_verdict: a tool's own .d/policy that refuses, is not a file or cannot be read", "[unit]") {
  MemTree t;
  const std::string grants =
      "allow coder_t tool:guarded execute\nallow coder_t tool:open execute\nallow coder_t tool:bad execute\n"
      "allow coder_t tool:odd execute\nallow coder_t tool:hidden execute\nallow coder_t tool:nometa execute\n";
  Viewer v = viewer(grants);
  for (const char* n : {"guarded", "open", "bad", "odd", "hidden", "nometa"}) t.file(std::string("tool/") + n, "");
  t.dir("tool/guarded.d");
  t.file("tool/guarded.d/policy", "allow other_t tool:guarded execute\n", 0644);
  t.dir("tool/open.d");  // a .d/ without policy: nothing more to ask
  t.file("tool/open.d/name", "open\n", 0644);
  t.dir("tool/bad.d");
  t.file("tool/bad.d/policy", "this is no policy\n", 0644);
  t.dir("tool/odd.d");
  t.dir("tool/odd.d/policy");
  t.dir("tool/hidden.d");
  t.file("tool/hidden.d/policy", "allow coder_t tool:hidden execute\n", 0644);
  t.unreadable("tool/hidden.d/policy");
  t.file("tool/nometa.d", "", 0644);  // a .d that is no directory
  std::string refused = "unset";
  CHECK(verdict(v, t, "guarded", &refused) == ToolVerdict::tool_policy);
  CHECK(refused == "coder_t");
  CHECK(verdict(v, t, "open") == ToolVerdict::allowed);
  for (const char* n : {"bad", "odd", "hidden", "nometa"}) {
    INFO(n);
    refused = "unset";
    CHECK(verdict(v, t, n, &refused) == ToolVerdict::tool_policy);
    CHECK(refused == "unset");  // no type to name: the policy was not read
  }
  // The own policy admits coder_t but not the parent's type.
  t.file("tool/guarded.d/policy", "allow coder_t tool:guarded execute\n", 0644);
  CHECK(verdict(v, t, "guarded") == ToolVerdict::allowed);
  v.ancestors = {"parent_t"};
  CHECK(verdict(v, t, "guarded", &refused) == ToolVerdict::tool_policy);
  CHECK(refused == "parent_t");
}

TEST_CASE("model_call: names, tiers and aliases decided before any grant", "[unit]") {
  MemTree t;
  t.file("model/debug/echo", "");
  t.file("home/1000/model/mine", "");
  t.file("model/mine", "");  // the user tier's entry of that name comes first
  t.link("model/main", "/ctx/model/debug/echo");
  t.link("home/1000/model/main", "/ctx/home/1000/model/mine");
  t.link("model/evil", "/etc/passwd");
  t.link("model/gone", "/ctx/model/debug/nothing");
  t.dir("model/debug");
  Viewer v = viewer("allow coder_t model:debug/echo use\nallow coder_t model:mine use\n");
  auto c = ctx::access::model_call(v, t, "main");
  CHECK(c.verdict == ModelVerdict::allowed);
  CHECK(c.name == "mine");
  CHECK(c.rel == "home/1000/model/mine");
  CHECK(c.alias == "home/1000/model/main");
  c = ctx::access::model_call(v, t, "mine");
  CHECK(c.rel == "home/1000/model/mine");
  CHECK(c.alias.empty());
  c = ctx::access::model_call(v, t, "debug/echo");
  CHECK(c.verdict == ModelVerdict::allowed);
  CHECK(c.rel == "model/debug/echo");
  // An alias out of the model tiers names nothing.
  c = ctx::access::model_call(v, t, "evil");
  CHECK(c.verdict == ModelVerdict::not_found);
  CHECK(c.rel.empty());
  // An alias to a model that is not there: its name, not found.
  c = ctx::access::model_call(v, t, "gone");
  CHECK(c.verdict == ModelVerdict::not_found);
  CHECK(c.alias == "model/gone");
  CHECK(c.name == "debug/nothing");
  // Names no model may have are not looked up.
  for (const char* bad : {"", "../x", "a/../b", "x.", "debug/", "a b", "debug/x.d"}) {
    INFO(bad);
    c = ctx::access::model_call(v, t, bad);
    CHECK(c.verdict == ModelVerdict::not_found);
    CHECK(c.rel.empty());
  }
  // A provider directory is no model; without the grant the answer does
  // not say whether a model exists.
  CHECK(ctx::access::model_call(v, t, "debug").verdict == ModelVerdict::agent_policy);
  CHECK(ctx::access::model_call(v, t, "debug/other").verdict == ModelVerdict::agent_policy);
  Viewer granted = viewer("allow coder_t model:debug/other use\n");
  CHECK(ctx::access::model_call(granted, t, "debug/other").verdict == ModelVerdict::not_found);
}

TEST_CASE("model_call: the agent's grant, the execute bit, then the model's own policy", "[unit]") {
  MemTree t;
  t.file("model/p/ok", "");
  t.file("model/p/plain", "", 0644);
  t.file("model/p/guarded", "");
  t.file("model/p/guarded.d/policy", "allow other_t model:p/guarded use\n", 0644);
  t.file("model/p/admits", "");
  t.file("model/p/admits.d/policy", "allow coder_t model:p/admits use\n", 0644);
  t.file("model/p/bad", "");
  t.file("model/p/bad.d/policy", "no policy\n", 0644);
  t.link("model/alias", "/ctx/model/p/guarded");
  Viewer v = viewer(
      "allow coder_t model:p/ok use\nallow coder_t model:p/plain use\nallow coder_t model:p/guarded use\n"
      "allow coder_t model:p/admits use\nallow coder_t model:p/bad use\n");
  CHECK(ctx::access::model_call(v, t, "p/ok").verdict == ModelVerdict::allowed);
  CHECK(ctx::access::model_call(v, t, "p/plain").verdict == ModelVerdict::mode);
  auto c = ctx::access::model_call(v, t, "p/guarded");
  CHECK(c.verdict == ModelVerdict::model_policy);
  CHECK(c.refused_type == "coder_t");
  // Through an alias the model it names is checked, under that name.
  c = ctx::access::model_call(v, t, "alias");
  CHECK(c.verdict == ModelVerdict::model_policy);
  CHECK(c.name == "p/guarded");
  CHECK(ctx::access::model_call(v, t, "p/admits").verdict == ModelVerdict::allowed);
  CHECK(ctx::access::model_call(v, t, "p/bad").verdict == ModelVerdict::model_policy);
  v.ancestors = {"parent_t"};
  c = ctx::access::model_call(v, t, "p/admits");
  CHECK(c.verdict == ModelVerdict::model_policy);
  CHECK(c.refused_type == "parent_t");
  // The grant is asked before the mode.
  Viewer ungranted = viewer("");
  CHECK(ctx::access::model_call(ungranted, t, "p/plain").verdict == ModelVerdict::agent_policy);
}
