// The launch plan is pure: these tests build specs in code and check
// every decision without privileges.
#include <catch2/catch.hpp>

#include <sched.h>

#include <algorithm>
#include <cstdlib>

#include "agentdir/load.hpp"
#include "agentdir/mount_rules.hpp"
#include "base/path.hpp"
#include "launcher/control/tool_gate.hpp"
#include "launcher/plan/plan.hpp"
#include "mountspec/table.hpp"
#include "policy/policy.hpp"

using ctx::agentdir::AgentSpec;
using ctx::agentdir::Iso;
using ctx::launcher::Caller;
using ctx::launcher::PlanOptions;
using ctx::mountspec::BindStep;
using ctx::mountspec::MaskStep;
using ctx::mountspec::MountStep;
using ctx::mountspec::RootStep;
using ctx::mountspec::StepKind;
using ctx::mountspec::ViewStep;

namespace {

AgentSpec coder(Iso iso = Iso::userns) {
  AgentSpec s;
  s.name = "coder";
  s.ctx_root = "/srv/ctx";
  s.owner = 1000;
  s.uid = 1000;
  s.gid = 1000;
  s.label = ctx::agentdir::Label{"user_u", "agent_r", "coder_t", "s0"};
  s.iso = iso;
  s.root = "/srv/ctx/home/1000/agent/coder/root";
  s.cwd = "/work";
  s.env = {{"LANG", "C.UTF-8"}};
  s.mounts = *ctx::mountspec::parse("coder.d/mount",
                                    "/home/me/project/sub\t/work/sub\tro\tbind\n"
                                    "/usr\t/usr\tro\trbind,nodev\n"
                                    "/home/me/project\t/work\trw\trbind,nosuid,nodev\n");
  s.policy = *ctx::policy::Policy::parse("coder.d/policy", "allow coder_t tool:fs.read execute\n");
  return s;
}

// The plan of a spec whose policy also holds the rules its mount table
// needs (the check itself is tested below and in mount_rules_test).
ctx::Result<ctx::launcher::LaunchPlan> plan_of(AgentSpec s, const Caller& c, const PlanOptions& o) {
  if (!s.subject().empty()) {
    auto rules = s.policy.rules();
    for (auto& r : ctx::agentdir::mount_rules(s.mounts, s.subject())) rules.push_back(r);
    s.policy = *ctx::policy::Policy::from_rules(rules);
  }
  return ctx::launcher::make_plan(s, c, o);
}

Caller user(std::uint32_t uid = 1000) {
  Caller c;
  c.uid = uid;
  c.gid = uid;
  return c;
}

Caller root() {
  Caller c;
  c.owner_groups = {1000, 27};
  c.owner_primary_gid = 1000;
  c.owner_ids.uid = 1000;
  c.owner_ids.primary_gid = 1000;
  c.owner_ids.groups = {1000, 27};
  c.owner_ids.subuid = {{2000000, 65536}};
  c.owner_ids.subgid = {{2000000, 65536}};
  return c;
}

template <typename Kind>
std::vector<Kind> of_kind(const ctx::launcher::LaunchPlan& p) {
  std::vector<Kind> out;
  for (const auto& m : p.mounts)
    if (const auto* k = std::get_if<Kind>(&m)) out.push_back(*k);
  return out;
}
std::vector<BindStep> binds(const ctx::launcher::LaunchPlan& p) { return of_kind<BindStep>(p); }
std::vector<MaskStep> masks(const ctx::launcher::LaunchPlan& p) { return of_kind<MaskStep>(p); }

bool has_map(const std::vector<ctx::sys::IdMapLine>& m, std::uint32_t in, std::uint32_t out) {
  return m.size() == 1 && m[0].inner == in && m[0].outer == out && m[0].count == 1;
}

}  // namespace

TEST_CASE("unprivileged userns plan", "[unit]") {
  AgentSpec s = coder();
  s.uid = 0;  // namespace-local root, mapped to the owner
  auto p = plan_of(s, user(), {});
  REQUIRE(p);
  CHECK(p->clone_flags ==
        (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWNET));
  CHECK(p->unshare_flags == 0);
  CHECK(p->ids.user_ns);
  CHECK_FALSE(p->ids.privileged);
  CHECK(p->ids.deny_setgroups);
  CHECK(has_map(p->ids.uid_map, 0, 1000));
  CHECK(has_map(p->ids.gid_map, 1000, 1000));
  CHECK(p->ids.uid == 0);
  CHECK(p->ids.host_uid == 1000);
  // Parents before children, whatever the file order.
  REQUIRE(binds(*p).size() == 3);
  CHECK(binds(*p)[0].target == "/usr");
  CHECK(binds(*p)[1].target == "/work");
  CHECK(binds(*p)[2].target == "/work/sub");
  CHECK(binds(*p)[1].recursive);
  CHECK_FALSE(binds(*p)[1].attrs.rdonly);
  CHECK(binds(*p)[1].attrs.nosuid);
  CHECK(binds(*p)[2].attrs.rdonly);
  CHECK(binds(*p)[2].line == 1);
  CHECK(p->argv == std::vector<std::string>{"/ctx/agent/coder"});
  CHECK(p->env == std::vector<std::string>{"CTX_ROOT=/ctx", "CTX_HOME=/ctx/home/1000",
                                           "CTX_PATH=/ctx/tool:/ctx/home/1000/tool", "HOME=/ctx/home/1000/agent/coder",
                                           "PATH=/ctx/bin:/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8",
                                           "CTX_AGENT=coder", "CTX_SESSION=default", "NOTIFY_SOCKET=/run/ctx/notify",
                                           "LISTEN_FDS=1", "LISTEN_FDNAMES=coder.sock",
                                           // No network: the proxy that says so.
                                           "HTTP_PROXY=http://127.0.0.1:7180", "HTTPS_PROXY=http://127.0.0.1:7180",
                                           "http_proxy=http://127.0.0.1:7180", "https_proxy=http://127.0.0.1:7180",
                                           "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1"});
}

TEST_CASE("env may override PATH and HOME, never CTX_*; path builds CTX_PATH", "[unit]") {
  AgentSpec s = coder();
  s.env = {{"PATH", "/bin"}, {"HOME", "/work"}};
  s.path = {"/ctx/tool", "/ctx/shared/p/tool"};
  s.path_set = true;
  PlanOptions o;
  o.session = "s1";
  o.command = {"sh", "-c", "true"};
  auto p = plan_of(s, user(), o);
  REQUIRE(p);
  CHECK(p->env[2] == "CTX_PATH=/ctx/tool:/ctx/shared/p/tool");
  CHECK(p->env[3] == "HOME=/work");
  CHECK(p->env[4] == "PATH=/bin");
  CHECK(p->env[6] == "CTX_SESSION=s1");
  CHECK(p->argv == std::vector<std::string>{"sh", "-c", "true"});
}

TEST_CASE("privileged plans drop to host ids after the mounts", "[unit]") {
  SECTION("userns") {
    auto p = plan_of(coder(), root(), {});
    REQUIRE(p);
    CHECK((p->clone_flags & CLONE_NEWUSER) == 0);
    CHECK(p->unshare_flags == CLONE_NEWUSER);
    CHECK(p->ids.user_ns_after_mounts);
    REQUIRE(p->ids.host_ids);
    CHECK(p->ids.host_ids->uid == 1000);
    CHECK(p->ids.fs.uid == 1000);
    CHECK(p->ids.fs.groups == std::vector<std::uint32_t>{1000, 27});
    CHECK(has_map(p->ids.uid_map, 1000, 1000));
  }
  SECTION("uid") {
    AgentSpec s = coder(Iso::uid);
    s.uid = 1500;
    s.gid = 1501;
    s.groups = {20, 21};
    s.id_source = {true, true, true};  // root wrote uid, gid and groups
    auto p = plan_of(s, root(), {});
    REQUIRE(p);
    CHECK(p->clone_flags ==
          (CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_NEWNET));
    CHECK(p->unshare_flags == 0);
    REQUIRE(p->ids.host_ids);
    CHECK(p->ids.host_ids->uid == 1500);
    CHECK(p->ids.host_ids->gid == 1501);
    CHECK(p->ids.host_ids->groups == std::vector<std::uint32_t>{20, 21});
    CHECK(p->ids.fs.uid == 1000);  // sources are opened as the owner
  }
  SECTION("shared") {
    auto p = plan_of(coder(Iso::shared), root(), {});
    REQUIRE(p);
    CHECK_FALSE(p->ids.user_ns);
    CHECK(p->ids.host_ids->uid == 1000);
  }
}

TEST_CASE("a root launch gives only ids the owner is entitled to, unless root wrote them", "[unit]") {
  auto msg = [](const AgentSpec& s) {
    auto p = plan_of(s, root(), {});
    REQUIRE_FALSE(p);
    CHECK(p.error().code == EPERM);
    return p.error().msg;
  };
  const std::string tail =
      "; a root launch gives an agent only ids its owner is entitled to unless root owns the file: ";
  AgentSpec u = coder(Iso::uid);
  u.uid = 0;
  CHECK(msg(u) == "coder.d/uid: EPERM: uid 0 is neither the owner (1000) nor in the owner's /etc/subuid ranges" + tail +
                      "write 1000, delegate the uid to the owner in /etc/subuid, or have root own coder.d/uid");
  u.uid = 1001;  // another user
  CHECK(msg(u).rfind("coder.d/uid: EPERM: uid 1001 is neither", 0) == 0);
  const std::string gid_rule =
      " is not the owner's primary group (1000), not a group uid 1000 is a member of, and not "
      "in uid 1000's /etc/subgid ranges";
  for (Iso iso : {Iso::uid, Iso::shared}) {
    AgentSpec g = coder(iso);
    g.gid = 42;
    CHECK(msg(g) == "coder.d/gid: EPERM: gid 42" + gid_rule + tail +
                        "write 1000, add the owner to the group, or have root own coder.d/gid");
  }
  for (Iso iso : {Iso::uid, Iso::shared, Iso::userns}) {
    AgentSpec g = coder(iso);
    g.groups = {27, 0, 42};
    CHECK(msg(g) == "coder.d/groups: EPERM: gid 0" + gid_rule + tail +
                        "remove it, add the owner to the group, or have root own coder.d/groups");
  }
  // iso userns: uid and gid are namespace-local, mapped onto the owner's.
  AgentSpec ns = coder(Iso::userns);
  ns.uid = 0;
  ns.gid = 0;
  auto p = plan_of(ns, root(), {});
  REQUIRE(p);
  CHECK(p->ids.host_uid == 1000);
  CHECK(p->ids.host_gid == 1000);
  // Entitled: the owner's groups and its subordinate ranges.
  AgentSpec ok = coder(Iso::uid);
  ok.uid = 2000005;
  ok.gid = 2000007;
  ok.groups = {27, 1000, 2065535};
  REQUIRE(plan_of(ok, root(), {}));
  // Root decided: any ids, each file on its own.
  AgentSpec r = coder(Iso::uid);
  r.uid = 0;
  r.gid = 0;
  r.groups = {0, 42};
  r.id_source = {true, true, false};
  CHECK(msg(r).rfind("coder.d/groups: EPERM: gid 0", 0) == 0);
  r.id_source.groups_by_root = true;
  auto rp = plan_of(r, root(), {});
  REQUIRE(rp);
  CHECK(rp->ids.host_ids->uid == 0);
  CHECK(rp->ids.host_ids->groups == std::vector<std::uint32_t>{0, 42});
}

TEST_CASE("plans an unprivileged caller cannot have are refused with the fix", "[unit]") {
  auto msg = [](const AgentSpec& s, const Caller& c) {
    auto p = plan_of(s, c, {});
    REQUIRE_FALSE(p);
    return p.error().msg;
  };
  CHECK(msg(coder(), user(1001)) ==
        "coder: owned by uid 1000, launched by uid 1001: only the owner or root may launch it");
  CHECK(msg(coder(Iso::uid), user()) ==
        "coder: iso uid needs privilege: launch it as root (a systemd unit), or install uidmap (newuidmap/newgidmap) "
        "and delegate uid 1000 to uid 1000 in /etc/subuid and /etc/subgid");
  Caller helpers = user();
  helpers.have_id_map_helpers = true;
  helpers.subuid = {{100000, 65536}};
  AgentSpec u = coder(Iso::uid);
  u.uid = 5;
  CHECK(msg(u, helpers) ==
        "coder: iso uid: uid 5 is not delegated to uid 1000 in /etc/subuid; add a range that holds it");
  u.uid = 100005;
  CHECK(msg(u, helpers) ==
        "coder: iso uid: gid 1000 is not delegated to uid 1000 in /etc/subgid; add a range that holds it");
  helpers.subgid = {{1000, 1}};
  auto ok = plan_of(u, helpers, {});
  REQUIRE(ok);
  CHECK(ok->ids.map_via_helpers);
  REQUIRE(ok->ids.uid_map.size() == 2);
  CHECK(ok->ids.uid_map[0].inner == 1000);  // the caller, for the setup
  CHECK(ok->ids.uid_map[1].inner == 100005);
  CHECK(ok->ids.uid_map[1].outer == 100005);

  AgentSpec g = coder();
  g.groups = {27};
  CHECK(msg(g, user()) ==
        "coder: groups lists 27 but an unprivileged launch keeps the caller's supplementary groups none (they cannot "
        "be changed without privilege): make groups list exactly these, or launch as root (a systemd unit)");
  AgentSpec sh = coder(Iso::shared);
  sh.gid = 50;
  CHECK(msg(sh, user()) ==
        "coder: iso shared: gid 50 differs from the caller's gid 1000, which is the only gid an unprivileged launch "
        "can map; write 1000 to gid or launch as root");
}

TEST_CASE("targets the launcher provides are reserved", "[unit]") {
  for (const char* t : {"/proc", "/dev/shm", "/run/ctx"}) {
    AgentSpec s = coder();
    s.mounts = *ctx::mountspec::parse("coder.d/mount", std::string("/usr\t") + t + "\tro\tbind\n");
    auto p = plan_of(s, user(), {});
    REQUIRE_FALSE(p);
    CHECK(p.error().msg == std::string("coder.d/mount:1: EINVAL: target ") + t +
                               " is provided by the launcher (fresh /proc, minimal /dev, /run/ctx); remove the line");
  }
}

TEST_CASE("network namespace unless network:default connect", "[unit]") {
  AgentSpec s = coder();
  CHECK(plan_of(s, user(), {})->net_ns);
  s.policy = *ctx::policy::Policy::parse("p", "allow coder_t network:default connect\n");
  auto p = plan_of(s, user(), {});
  CHECK_FALSE(p->net_ns);
  CHECK((p->clone_flags & CLONE_NEWNET) == 0);
  s.label.reset();  // no label: default deny (and no mount)
  s.mounts = {};
  CHECK(plan_of(s, user(), {})->net_ns);
}

TEST_CASE("the HTTP model endpoint: planned for a model grant or no network, its token where SDKs look, the agent's env first",
          "[unit]") {
  auto env_of = [](const ctx::launcher::LaunchPlan& p, const std::string& key) {
    for (const auto& kv : p.env)
      if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
    return std::string("unset");
  };
  const std::string token(64, 'a');
  PlanOptions o;
  o.model_token = token;
  AgentSpec s = coder();
  // No model grant, no network: the endpoint as the proxy that refuses,
  // no token, no model URL.
  auto none = plan_of(s, user(), o);
  REQUIRE(none->endpoint);
  CHECK(none->endpoint->token.empty());
  CHECK(none->endpoint->refusal ==
        "ctx-agent-run: EACCES: agent coder has no network: its policy grants none, so nothing beyond the "
        "sandbox's loopback is reachable (name lookups fail for the same reason). This is the sandbox's policy, "
        "not a fault; retrying will not help. To allow it, add 'allow coder_t network:default connect' to the "
        "policy of coder (agent/coder.d/policy in its CTX tree) and launch again.");
  CHECK(env_of(*none, "CTX_MODEL_TOKEN") == "unset");
  CHECK(env_of(*none, "CTX_MODEL_URL") == "unset");
  for (const char* key : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"})
    CHECK(env_of(*none, key) == "http://127.0.0.1:7180");
  CHECK(env_of(*none, "NO_PROXY") == "localhost,127.0.0.1,::1");
  CHECK(env_of(*none, "no_proxy") == "localhost,127.0.0.1,::1");
  s.policy = *ctx::policy::Policy::parse("p", "allow coder_t model:main use\n");
  s.env = {{"OPENAI_API_KEY", "sk-own"}};
  auto p = plan_of(s, user(), o);
  REQUIRE(p->endpoint);
  CHECK(p->endpoint->port == 7180);
  CHECK(p->endpoint->token == token);
  CHECK(env_of(*p, "CTX_MODEL_URL") == "http://127.0.0.1:7180");
  CHECK(env_of(*p, "CTX_MODEL_TOKEN") == token);
  CHECK(env_of(*p, "ANTHROPIC_API_KEY") == token);
  CHECK(env_of(*p, "OPENAI_API_KEY") == "sk-own");
  CHECK(p->endpoint->refusal.size() > none->endpoint->refusal.size());
  CHECK(p->endpoint->refusal.substr(none->endpoint->refusal.size()) ==
        " Models are reached through $CTX_MODEL_URL.");
  // The host's network: a port the kernel picks, so no URL in the plan.
  s.policy = *ctx::policy::Policy::parse("p", "allow coder_t model:main use\nallow coder_t network:default connect\n");
  auto host = plan_of(s, user(), o);
  REQUIRE(host->endpoint);
  CHECK(host->endpoint->port == 0);
  CHECK(env_of(*host, "CTX_MODEL_URL") == "unset");
  CHECK(host->endpoint->refusal.empty());
  CHECK(env_of(*host, "HTTPS_PROXY") == "unset");
  // The host's network and no model: nothing to answer, no endpoint.
  s.policy = *ctx::policy::Policy::parse("p", "allow coder_t network:default connect\n");
  CHECK_FALSE(plan_of(s, user(), o)->endpoint);
  // A grant of another subject's is inert: no token.
  s.policy = *ctx::policy::Policy::parse("p", "allow other_t model:main use\n");
  CHECK(plan_of(s, user(), o)->endpoint->token.empty());
}

TEST_CASE("shared spaces: permission for direct mounts, masks under wider ones", "[unit]") {
  AgentSpec s = coder();
  s.mounts = *ctx::mountspec::parse("coder.d/mount", "/srv/ctx/shared/a/data\t/a\tro\tbind\n");
  auto denied = plan_of(s, user(), {});
  REQUIRE_FALSE(denied);
  CHECK(denied.error().code == EACCES);
  CHECK(denied.error().reason == "shared_policy");
  CHECK(denied.error().msg ==
        "coder.d/mount:1: EACCES: source /srv/ctx/shared/a/data is in shared space a and the "
        "policy lacks 'allow coder_t shared:a read'");

  s.mounts = *ctx::mountspec::parse("coder.d/mount", "/srv/ctx\t/ctx\trw\trbind\n");
  s.policy = *ctx::policy::Policy::parse("p",
                                         "allow coder_t shared:a read\nallow coder_t shared:b read\n"
                                         "allow coder_t shared:b write\n");
  PlanOptions o;
  o.shared_spaces = {"a", "b", "c"};
  auto p = plan_of(s, user(), o);
  REQUIRE(p);
  // Without the view (this plan has none), the pins of the list of the
  // agent's sessions come first: below.
  std::vector<BindStep> table;
  for (const auto& b : binds(*p))
    if (!b.pin) table.push_back(b);
  REQUIRE(table.size() == 2);
  CHECK(table[1].source == "/srv/ctx/shared/a");  // read only: rebound ro
  CHECK(table[1].target == "/ctx/shared/a");
  CHECK(table[1].attrs.rdonly);
  std::vector<MaskStep> empty;
  for (const auto& k : masks(*p))
    if (k.keep.empty()) empty.push_back(k);
  REQUIRE(empty.size() == 1);
  CHECK(empty[0].target == "/ctx/shared/c");
}

TEST_CASE("plans of the example agents", "[fs]") {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  std::string root = std::string(src) + "/examples/ctx";
  auto coder = ctx::agentdir::load(root, "coder");
  REQUIRE(coder);
  // The example's host paths assume it is installed at /ctx.
  coder->ctx_root = "/ctx";
  PlanOptions o;
  o.shared_spaces = {"project-a", "project-b"};
  auto p = plan_of(*coder, user(), o);
  REQUIRE(p);
  std::vector<std::string> targets;
  for (const auto& b : binds(*p)) targets.push_back(b.target);
  // The table's five lines in apply order; project-a is allowed rw, and
  // project-b, which the whole-/ctx mount would expose, is masked.
  CHECK(targets ==
        std::vector<std::string>{"/ctx", "/ctx/home/1000/agent/coder", "/shared/project-a", "/usr", "/work"});
  // The home's sessions listed where each of the two binds that show
  // them would (a plan with the agent view keeps the home's only).
  REQUIRE(masks(*p).size() == 3);
  CHECK(masks(*p)[0].target == "/ctx/home/1000/agent/coder/session");
  CHECK(masks(*p)[1].target == "/ctx/home/1000/agent/coder/session");
  CHECK(masks(*p)[2].target == "/ctx/shared/project-b");
  CHECK(masks(*p)[2].keep.empty());
  CHECK(p->net_ns);
  CHECK(p->cwd == "/work");
  CHECK(p->root == "/ctx/home/1000/agent/coder/root");
  CHECK(p->argv == std::vector<std::string>{"/ctx/agent/coder"});
  CHECK(std::find(p->env.begin(), p->env.end(), "CTX_PATH=/ctx/tool:/ctx/home/1000/tool:/ctx/shared/project-a/tool") !=
        p->env.end());
  CHECK(std::find(p->env.begin(), p->env.end(), "GREETING=hello $USER, no expansion here") != p->env.end());

  auto reviewer = ctx::agentdir::load(root, "reviewer");
  REQUIRE(reviewer);
  reviewer->ctx_root = "/ctx";
  auto r = plan_of(*reviewer, user(), o);
  REQUIRE(r);
  CHECK(r->ids.user_ns);  // iso userns, as its parent coder's
  CHECK(r->ids.uid == 1000);
  CHECK(has_map(r->ids.uid_map, 1000, 1000));
  REQUIRE(binds(*r).size() == 3);
  CHECK(binds(*r)[0].target == "/ctx");
  CHECK(binds(*r)[1].target == "/shared/project-a");
  CHECK(binds(*r)[1].attrs.rdonly);
  // The whole /ctx shows project-a (read) but hides project-b, and lists
  // the reviewer's own sessions.
  REQUIRE(masks(*r).size() == 2);
  CHECK(masks(*r)[0].target == "/ctx/home/1000/agent/reviewer/session");
  CHECK(masks(*r)[1].target == "/ctx/shared/project-b");
  // The reviewer's policy reads project-a but cannot write it: an rw mount
  // of the space is refused.
  reviewer->mounts[2].attrs.rdonly = false;
  auto rw = plan_of(*reviewer, user(), o);
  REQUIRE_FALSE(rw);
  CHECK(rw.error().reason == "shared_policy");
}

TEST_CASE("an owned child: handoff binds, ancestors' sessions masked, binds tied to a parent's non-recursive bind",
          "[unit]") {
  AgentSpec s = coder();
  s.name = "rev";
  s.root = "/srv/ctx/home/1000/agent/rev/root";
  s.parent = ctx::agentdir::Parent{"coder", "default", "r1"};
  s.mounts = *ctx::mountspec::parse("rev.d/mount",
                                    "/srv/ctx\t/ctx\tro\trbind,nosuid,nodev\n"
                                    "/data/sub\t/x\tro\tbind\n"
                                    "/usr\t/usr\tro\trbind,nodev\n");
  PlanOptions po;
  po.handoff_dir = "/srv/ctx/home/1000/agent/coder/session/default/context/child/rev";
  po.hidden_dirs = {"/srv/ctx/home/1000/agent/coder/session"};
  po.parent_mounts = *ctx::mountspec::parse("coder.d/mount", "/data\t/data\tro\tbind\n/usr\t/usr\tro\trbind,nodev\n");
  auto p = plan_of(s, user(), po);
  REQUIRE(p);
  auto bind = [&](const std::string& target) {
    const auto all = binds(*p);
    auto it = std::find_if(all.begin(), all.end(), [&](const auto& b) { return b.target == target; });
    REQUIRE(it != all.end());
    return *it;
  };
  CHECK(bind("/x").beneath == "/data");
  CHECK(bind("/x").beneath_no_xdev);  // the parent's bind hides submounts
  CHECK(bind("/usr").beneath == "/usr");
  CHECK_FALSE(bind("/usr").beneath_no_xdev);  // the parent's rbind shows them
  CHECK(bind("/ctx").beneath.empty());        // no parent mount holds /srv/ctx
  CHECK(bind("/handoff/result.md").beneath == "/srv/ctx");
  REQUIRE(std::holds_alternative<RootStep>(p->mounts.front()));
  CHECK(std::get<RootStep>(p->mounts.front()).beneath == "/srv/ctx");
  CHECK(bind("/handoff/handoff.md").attrs.rdonly);
  CHECK(bind("/handoff/handoff.md").source == po.handoff_dir + "/handoff.md");
  for (const char* rw : {"/handoff/result.md", "/handoff/refs.jsonl", "/handoff/artifact"}) {
    CHECK_FALSE(bind(rw).attrs.rdonly);
    CHECK(bind(rw).attrs.noexec);
  }
  // The parent's sessions masked; its own listed.
  REQUIRE(masks(*p).size() == 2);
  CHECK(masks(*p)[0].target == "/ctx/home/1000/agent/rev/session");
  CHECK(masks(*p)[0].keep.size() == 2);
  CHECK(masks(*p)[1].target == "/ctx/home/1000/agent/coder/session");
  CHECK(masks(*p)[1].keep.empty());
  CHECK(std::find(p->env.begin(), p->env.end(), "CTX_HANDOFF=/handoff") != p->env.end());
  // The handoff directory is the launcher's: a mount there is refused.
  s.mounts.push_back({.source = "/usr",
                      .target = "/handoff/x",
                      .attrs = {.rdonly = true},
                      .kind = ctx::mountspec::Kind::bind,
                      .line = 4});
  auto refused = plan_of(s, user(), po);
  REQUIRE_FALSE(refused);
  CHECK(refused.error().msg ==
        "rev.d/mount:4: EINVAL: target /handoff/x is provided by the launcher (fresh /proc, "
        "minimal /dev, /run/ctx, /handoff); remove the line");
}

// Coder's sessions for the tests of the list: default (the launch's),
// review, old, and the index; its policy reads old.
const std::string kCoderHome = "/srv/ctx/home/1000/agent/coder";
AgentSpec reading_old() {
  AgentSpec s = coder();
  s.policy = *ctx::policy::Policy::parse("coder.d/policy", "allow coder_t session:old read\n");
  return s;
}
PlanOptions sessions_of_coder() {
  PlanOptions po;
  po.session = "default";
  po.sessions = {"default", "review", "old", "index"};
  return po;
}

// The binds and masks of a plan in order, a mask with what it keeps
// ("name:ro", "name:as-shown", ":required").
std::vector<std::string> order_of(const ctx::launcher::LaunchPlan& p) {
  std::vector<std::string> order;
  for (const auto& m : p.mounts) {
    if (const auto* b = std::get_if<BindStep>(&m)) order.push_back("bind " + b->target + " <- " + b->source);
    if (const auto* k = std::get_if<MaskStep>(&m)) {
      std::string kept;
      for (const auto& e : k->keep)
        kept += " " + e.name + (e.rw ? ":as-shown" : ":ro") + (e.required ? ":required" : "");
      order.push_back("mask " + k->target + kept);
    }
  }
  return order;
}

// docs/abi-policy.md, "session": wherever a bind shows the agent's own
// session/, a list covers it right after that bind (before any bind
// below it): the launch's session as the bind shows it, index and the
// sessions with session:<name> read read-only, nothing else; in a rw bind
// the directories between the bind's root and the list are pinned
// (docs/security.md, "Sessions an agent moves away").
TEST_CASE("a bind of the home lists its sessions; a rw bind above it pins the directories between", "[unit]") {
  AgentSpec s = reading_old();
  const std::string home = kCoderHome;
  PlanOptions po = sessions_of_coder();
  for (const char* mode : {"rw", "ro"}) {
    INFO(mode);
    s.mounts = *ctx::mountspec::parse("coder.d/mount", home + "\t/h\t" + mode + "\tbind,nosuid,nodev\n" + home +
                                                           "/session/default\t/h/session/default/x\tro\tbind\n");
    auto p = plan_of(s, user(), po);
    REQUIRE(p);
    CHECK(order_of(*p) == std::vector<std::string>{
                              "bind /h <- " + home,
                              "mask /h/session default:as-shown:required index:ro:required old:ro",
                              "bind /h/session/default/x <- " + home + "/session/default",
                          });
    CHECK(lists_home_sessions(*p));
  }
  // A shared session: the home's session/ shows index and what may be read.
  po.session_space = "proj";
  s.policy = *ctx::policy::Policy::parse("coder.d/policy",
                                         "allow coder_t session:old read\nallow coder_t shared:proj write\n");
  s.mounts = *ctx::mountspec::parse("coder.d/mount", home + "\t/h\trw\tbind\n");
  auto shared = plan_of(s, user(), po);
  REQUIRE(shared);
  CHECK(order_of(*shared) == std::vector<std::string>{"bind /h <- " + home, "mask /h/session index:ro old:ro"});
  po.session_space.clear();
  // Above the home (a plan without the view, which would replace it): pins.
  s.mounts = *ctx::mountspec::parse("coder.d/mount", "/srv/ctx/home/1000/agent\t/a\trw\tbind,nosuid,nodev\n");
  auto above = plan_of(s, user(), po);
  REQUIRE(above);
  CHECK(order_of(*above) == std::vector<std::string>{
                                "bind /a <- /srv/ctx/home/1000/agent",
                                "bind /a/coder <- " + home,
                                "mask /a/coder/session default:as-shown:required index:ro:required old:ro",
                            });
  const auto pin = binds(*above)[1];
  CHECK(pin.pin);
  CHECK_FALSE(pin.attrs.rdonly);
  CHECK(pin.attrs.nosuid);
  CHECK(pin.line == 1);
  s.mounts = *ctx::mountspec::parse("coder.d/mount", "/srv/ctx/home/1000/agent\t/a\tro\tbind\n");
  auto above_ro = plan_of(s, user(), po);
  REQUIRE(above_ro);
  CHECK(binds(*above_ro).size() == 1);
}

// docs/abi-policy.md, "session": what would reach past the list of the
// agent's sessions is refused at plan time, with the fix: a source or a
// root in a session the list does not show, a rw line or a root in one it
// shows read-only, a target beside what it keeps, a root at session/;
// a root at the home itself gets the list.
TEST_CASE("a line or a root that would reach past the list of the agent's sessions is refused", "[unit]") {
  AgentSpec s = reading_old();
  const std::string home = kCoderHome;
  PlanOptions po = sessions_of_coder();
  // A source or a root inside a session the policy hides is refused.
  s.mounts =
      *ctx::mountspec::parse("coder.d/mount", "/tmp\t/t\tro\tbind\n" + home + "/session/review/x\t/r\tro\tbind\n");
  auto inside = plan_of(s, user(), po);
  REQUIRE_FALSE(inside);
  CHECK(inside.error().code == EACCES);
  CHECK(inside.error().msg == "coder.d/mount:2: " + home +
                                  "/session/review/x: EACCES: lies in the agent's session review, which its policy "
                                  "hides; add 'allow coder_t session:review read' or show another directory");
  s.mounts = *ctx::mountspec::parse("coder.d/mount", home + "/session/old\t/r\tro\tbind\n" + home +
                                                         "/session/default/y\t/d\trw\tbind\n" + home +
                                                         "/session/index\t/i\tro\tbind\n");
  CHECK(plan_of(s, user(), po));
  // Only the launch's own session may be written: a readable one and the
  // index are shown read-only, and a rw line there is refused.
  for (const std::string entry : {"old", "index"}) {
    INFO(entry);
    s.mounts = *ctx::mountspec::parse("coder.d/mount", home + "/session/" + entry + "\t/r\trw\tbind\n");
    auto rw = plan_of(s, user(), po);
    REQUIRE_FALSE(rw);
    CHECK(rw.error().code == EACCES);
    CHECK(rw.error().msg.find("coder.d/mount:1: " + home + "/session/" + entry + ": EACCES: lies in ") == 0);
    CHECK(rw.error().msg.find("shown read-only; make the line ro") != std::string::npos);
  }
  // A target the list of sessions does not keep: refused at plan time
  // (the list is read-only, so no mount point could be made there).
  s.mounts = *ctx::mountspec::parse("coder.d/mount", home +
                                                         "\t/h\trw\tbind\n/tmp\t/h/session/notes\tro\tbind\n"
                                                         "/tmp\t/h/session/default/notes\tro\tbind\n");
  auto beside = plan_of(s, user(), po);
  REQUIRE_FALSE(beside);
  CHECK(beside.error().msg ==
        "coder.d/mount:2: target /h/session/notes: EACCES: lies in /h/session, the list of the agent's sessions, "
        "which shows only default, index, old and is read-only; put the target elsewhere");
  s.mounts = *ctx::mountspec::parse("coder.d/mount", "/usr\t/usr\tro\trbind\n");
  s.root = home + "/session/review/root";
  auto root_inside = plan_of(s, user(), po);
  REQUIRE_FALSE(root_inside);
  CHECK(root_inside.error().msg.find("coder.d/root: " + home +
                                     "/session/review/root: EACCES: lies in the agent's "
                                     "session review") == 0);
  s.root = home + "/session/old/root";
  auto root_readable = plan_of(s, user(), po);
  REQUIRE_FALSE(root_readable);
  CHECK(root_readable.error().msg.find("put the root elsewhere (it is written)") != std::string::npos);
  s.root = home + "/session/default/root";
  CHECK(plan_of(s, user(), po));
  s.root = home + "/session";
  auto root_sessions = plan_of(s, user(), po);
  REQUIRE_FALSE(root_sessions);
  CHECK(root_sessions.error().code == EACCES);
  // A root at the home lists its sessions too.
  s.root = home;
  auto root_home = plan_of(s, user(), po);
  REQUIRE(root_home);
  CHECK(order_of(*root_home) == std::vector<std::string>{
                                    "mask /session default:as-shown:required index:ro:required old:ro",
                                    "bind /usr <- /usr",
                                });
}

// With the agent view a bind of the home stays a bind, and so does its
// list of sessions; a rw bind of the CTX root becomes the view
// (read-only, its own sessions filtered by the view's rules), and neither
// a pin nor a list brings a bind of the home back over it.
TEST_CASE(
    "with the agent view, the list of sessions stays with a bind of the home and goes with a bind the view "
    "replaces",
    "[unit]") {
  AgentSpec s = coder();
  const std::string home = "/srv/ctx/home/1000/agent/coder";
  PlanOptions po;
  po.view = true;
  po.sessions = {"default", "review"};
  s.mounts = *ctx::mountspec::parse("coder.d/mount", home + "\t/h\trw\tbind,nosuid,nodev\n");
  auto homed = plan_of(s, user(), po);
  REQUIRE(homed);
  std::vector<std::string> targets;
  for (const auto& b : binds(*homed)) targets.push_back(b.target);
  CHECK(targets == std::vector<std::string>{"/h"});
  REQUIRE(masks(*homed).size() == 1);
  CHECK(masks(*homed)[0].target == "/h/session");
  for (const char* above : {"/srv/ctx\t/ctx", "/srv/ctx/home/1000/agent\t/ctx/home/1000/agent"}) {
    INFO(above);
    s.mounts = *ctx::mountspec::parse("coder.d/mount", std::string(above) + "\trw\trbind,nosuid,nodev\n");
    auto whole = plan_of(s, user(), po);
    REQUIRE(whole);
    for (const auto& b : binds(*whole)) {
      INFO(b.target);
      CHECK_FALSE(ctx::path_is_at_or_under(b.target, "/ctx"));
    }
    CHECK(masks(*whole).empty());
    CHECK(of_kind<ViewStep>(*whole).size() >= 1);
    // No list is left: a shared session's launch makes no session/ in
    // the home for one.
    CHECK_FALSE(lists_home_sessions(*whole));
  }
  CHECK(lists_home_sessions(*homed));
}

TEST_CASE("ctx tool's tiers: the planned CTX_PATH, where the plan shows the CTX tree, with the mount's noexec",
          "[unit]") {
  AgentSpec s = coder();
  s.mounts = *ctx::mountspec::parse("coder.d/mount",
                                    "/srv/ctx\t/ctx\tro\trbind,nosuid,nodev\n"
                                    "/srv/ctx\t/mirror\tro\tbind,noexec\n"
                                    "/srv/ctx/shared/project-a\t/shared/project-a\trw\trbind\n"
                                    "/srv/other\t/other\tro\tbind\n");
  s.policy = *ctx::policy::Policy::parse("coder.d/policy",
                                         "allow coder_t shared:project-a read\nallow coder_t shared:project-a write\n");
  s.path = {"/other/tool",         "/mirror/tool", "/ctx/tool", "/shared/project-a/tool",
            "/ctx/home/1000/tool", "/nowhere",     "/ctx/tool"};
  s.path_set = true;
  PlanOptions po;
  po.view = true;
  po.shared_spaces = {"project-a"};
  auto p = plan_of(s, user(), po);
  REQUIRE(p);
  std::vector<std::string> got;
  for (const auto& t : ctx::launcher::tool_tiers(*p))
    got.push_back(t.inner + " " + t.rel + (t.noexec ? " noexec" : ""));
  // Left out: a directory from outside the CTX tree, one no mount shows,
  // and a repeat; kept in CTX_PATH order, each with where it lies below
  // the CTX root whether a view or a bind shows it.
  CHECK(got == std::vector<std::string>{"/mirror/tool tool noexec", "/ctx/tool tool",
                                        "/shared/project-a/tool shared/project-a/tool",
                                        "/ctx/home/1000/tool home/1000/tool"});
  // Without the view (the durable tree bound), the binds say the same.
  po.view = false;
  auto d = plan_of(s, user(), po);
  REQUIRE(d);
  CHECK(ctx::launcher::tool_tiers(*d).size() == 4);
}

TEST_CASE("a root never shows the durable CTX tree: above it, the view at its place; inside it, only the own home",
          "[unit]") {
  AgentSpec s = coder();
  s.mounts = {};
  PlanOptions po;
  po.view = true;
  s.root = "/";
  auto p = plan_of(s, user(), po);
  REQUIRE(p);
  REQUIRE(p->mounts.size() >= 2);
  CHECK(std::holds_alternative<RootStep>(p->mounts[0]));
  REQUIRE(std::holds_alternative<ViewStep>(p->mounts[1]));
  CHECK(std::get<ViewStep>(p->mounts[1]).target == "/srv/ctx");
  CHECK(std::get<ViewStep>(p->mounts[1]).source.empty());
  for (const char* inside : {"/srv/ctx", "/srv/ctx/home/1000/agent/other/root", "/srv/ctx/tool"}) {
    s.root = inside;
    auto q = plan_of(s, user(), po);
    REQUIRE_FALSE(q);
    CHECK(q.error().code == EACCES);
    CHECK(q.error().msg.find("lies in the CTX tree outside the agent's own home") != std::string::npos);
  }
  s.root = "/srv/ctx/home/1000/agent/coder/root";
  CHECK(plan_of(s, user(), po));
  s.root = "/srv/roots/coder";
  CHECK(plan_of(s, user(), po));
}

TEST_CASE("the agent view takes the place of every bind of the durable CTX tree", "[unit]") {
  AgentSpec s = coder();
  s.mounts = *ctx::mountspec::parse("coder.d/mount",
                                    "/srv/ctx\t/ctx\tro\trbind,nosuid,nodev\n"
                                    "/srv/ctx/home/1000/agent/coder\t/ctx/home/1000/agent/coder\trw\tbind\n"
                                    "/srv/ctx/shared/project-a\t/shared/project-a\trw\trbind\n"
                                    "/srv\t/host\tro\trbind\n"
                                    "/srv/ctx/agent\t/agents\tro\tbind,noexec\n"
                                    "/srv/ctx/home/1000/tool\t/ctx/home/1000/tool\tro\tbind\n"
                                    "/srv/ctx/home/1000/model\t/ctx/home/1000/model\tro\tbind,noexec\n");
  s.policy = *ctx::policy::Policy::parse("coder.d/policy",
                                         "allow coder_t shared:project-a read\nallow coder_t shared:project-a write\n");
  PlanOptions po;
  po.view = true;
  po.shared_spaces = {"project-a", "secret"};
  auto p = plan_of(s, user(), po);
  REQUIRE(p);
  std::vector<std::string> got;
  for (const MountStep& m : p->mounts) {
    const std::string kind(ctx::mountspec::to_string(ctx::mountspec::kind_of(m)));
    if (const auto* v = std::get_if<ViewStep>(&m))
      got.push_back(kind + " " + v->target + " " + v->source + (v->attrs.noexec ? " noexec" : ""));
    if (const auto* b = std::get_if<BindStep>(&m))
      got.push_back(kind + " " + b->target + " " + b->source + (b->attrs.noexec ? " noexec" : ""));
    if (const auto* k = std::get_if<MaskStep>(&m))
      got.push_back(kind + " " + k->target + " " + (k->attrs.noexec ? " noexec" : ""));
  }
  // In the plan's order (targets parents first). A gated part bound at its
  // own place adds nothing (home/1000/tool is gone); with a flag it is
  // that part of the view with the flag; the agent's own home and a space
  // stay binds (the home with the list of its sessions), the tier the
  // space brings is the view's; a bind above the CTX root keeps the rest
  // and gets the view at the root's place; no mask is needed for the
  // space without read, nor a list of sessions where the view shows them.
  CHECK(got == std::vector<std::string>{
                   "view /agents agent noexec",
                   "view /ctx ",
                   "bind /ctx/home/1000/agent/coder /srv/ctx/home/1000/agent/coder",
                   "mask /ctx/home/1000/agent/coder/session  noexec",
                   "view /ctx/home/1000/model home/1000/model noexec",
                   "bind /host /srv",
                   "view /host/ctx ",
                   "bind /shared/project-a /srv/ctx/shared/project-a",
                   "view /shared/project-a/tool shared/project-a/tool",
               });
  // Without the view, the same table binds the durable tree.
  po.view = false;
  auto old = plan_of(s, user(), po);
  REQUIRE(old);
  CHECK(std::none_of(old->mounts.begin(), old->mounts.end(),
                     [](const MountStep& m) { return std::holds_alternative<ViewStep>(m); }));
}

TEST_CASE("plan: every mount line needs its mount rule, rw its write", "[unit]") {
  AgentSpec s = coder();
  s.mounts = *ctx::mountspec::parse("coder.d/mount",
                                    "/usr\t/usr\tro\trbind,nodev\n"
                                    "/home/me/project\t/work\trw\trbind,nosuid,nodev\n");
  auto r = ctx::launcher::make_plan(s, user(), {});
  REQUIRE_FALSE(r);
  CHECK(r.error().code == EACCES);
  CHECK(r.error().reason == "mount_policy");
  CHECK(r.error().msg ==
        "coder.d/mount:1: EACCES: ro mount /usr -> /usr needs 'allow coder_t mount:/usr read' in coder.d/policy; "
        "add the rule or remove the line");
  s.policy = *ctx::policy::Policy::parse("coder.d/policy",
                                         "allow coder_t mount:/usr read\n"
                                         "allow coder_t mount:/work read\n");
  r = ctx::launcher::make_plan(s, user(), {});
  REQUIRE_FALSE(r);
  CHECK(r.error().msg.find("coder.d/mount:2: EACCES: rw mount /home/me/project -> /work needs 'allow coder_t "
                           "mount:/work write'") == 0);
  s.policy = *ctx::policy::Policy::parse("coder.d/policy",
                                         "allow coder_t mount:/usr read\n"
                                         "allow coder_t mount:/work read\n"
                                         "allow coder_t mount:/work write\n");
  CHECK(ctx::launcher::make_plan(s, user(), {}));
  CHECK(ctx::launcher::make_plan(s, root(), {}));
  // No label: no mount at all.
  s.label.reset();
  r = ctx::launcher::make_plan(s, user(), {});
  REQUIRE_FALSE(r);
  CHECK(r.error().reason == "mount_policy");
}

TEST_CASE("session policy: a new session needs write, a resume also resume; an owned child's is its parent's",
          "[unit]") {
  using ctx::launcher::check_session_policy;
  AgentSpec s = coder();
  // Nothing about sessions: neither new nor resumed.
  auto none = check_session_policy(s, "default", false);
  REQUIRE_FALSE(none);
  CHECK(none.error().code == EACCES);
  CHECK(none.error().msg ==
        "/srv/ctx/agent/coder.d/policy: EACCES: creating session default needs 'allow coder_t session:default write'; "
        "add that line to the policy (the agent was not started)");
  CHECK_FALSE(check_session_policy(s, "default", true));
  s.policy = *ctx::policy::Policy::parse("coder.d/policy", "allow coder_t session:default write\n");
  CHECK(check_session_policy(s, "default", false));
  auto resume = check_session_policy(s, "default", true);
  REQUIRE_FALSE(resume);
  CHECK(resume.error().msg.find("resuming session default needs 'allow coder_t session:default resume'") !=
        std::string::npos);
  // Names are concrete: default's rules say nothing about review.
  CHECK_FALSE(check_session_policy(s, "review", false));
  s.policy = *ctx::policy::Policy::parse("coder.d/policy",
                                         "allow coder_t session:default write\nallow coder_t session:default resume\n");
  CHECK(check_session_policy(s, "default", true));
  // resume alone does not make a new one, nor write-less resume continue.
  s.policy = *ctx::policy::Policy::parse("coder.d/policy", "allow coder_t session:default resume\n");
  CHECK_FALSE(check_session_policy(s, "default", false));
  CHECK_FALSE(check_session_policy(s, "default", true));
  // No label: no rule can name it.
  s.label.reset();
  auto unlabeled = check_session_policy(s, "default", false);
  REQUIRE_FALSE(unlabeled);
  CHECK(unlabeled.error().msg.find("'allow <no label> session:default write'") != std::string::npos);
  // An owned child: its default session comes with agent:<child> start.
  s.parent = ctx::agentdir::Parent{"coder", "default", ""};
  CHECK(check_session_policy(s, "default", true));
}

TEST_CASE("an interactive launch passes the caller's TERM, COLORTERM and locale; the agent's env wins", "[unit]") {
  AgentSpec s = coder();
  s.env = {{"LC_ALL", "C"}};
  PlanOptions o;
  o.caller_env = {"TERM=xterm-256color", "COLORTERM=truecolor", "LANG=de_DE.UTF-8", "LC_ALL=fr_FR.UTF-8",
                  "LC_CTYPE=../../tmp/x",   "SSH_AUTH_SOCK=/tmp/agent", "TERMINFO=/tmp/ti", "LANGUAGE=de:en"};
  auto has = [](const std::vector<std::string>& env, const std::string& kv) {
    return std::find(env.begin(), env.end(), kv) != env.end();
  };
  auto prefixed = [](const std::vector<std::string>& env, const std::string& key) {
    return std::any_of(env.begin(), env.end(), [&](const std::string& kv) { return kv.rfind(key + "=", 0) == 0; });
  };
  SECTION("without a terminal nothing of the caller passes") {
    auto p = plan_of(s, user(), o);
    REQUIRE(p);
    CHECK_FALSE(prefixed(p->env, "TERM"));
    CHECK_FALSE(prefixed(p->env, "LANG"));
    CHECK(has(p->env, "LC_ALL=C"));
  }
  SECTION("with a terminal: the listed variables with plain values, the agent's env over them") {
    o.terminal = true;
    auto p = plan_of(s, user(), o);
    REQUIRE(p);
    CHECK(has(p->env, "TERM=xterm-256color"));
    CHECK(has(p->env, "COLORTERM=truecolor"));
    CHECK(has(p->env, "LANG=de_DE.UTF-8"));
    CHECK(has(p->env, "LANGUAGE=de:en"));
    CHECK(has(p->env, "LC_ALL=C"));
    CHECK_FALSE(has(p->env, "LC_ALL=fr_FR.UTF-8"));
    CHECK_FALSE(prefixed(p->env, "LC_CTYPE"));  // a path is no locale name
    CHECK_FALSE(prefixed(p->env, "SSH_AUTH_SOCK"));
    CHECK_FALSE(prefixed(p->env, "TERMINFO"));
  }
}

TEST_CASE("terminal variables pass only with plain values", "[unit]") {
  using ctx::launcher::terminal_env_value_ok;
  CHECK(terminal_env_value_ok("xterm-256color"));
  CHECK(terminal_env_value_ok("en_US.UTF-8@euro"));
  CHECK(terminal_env_value_ok("de:en"));
  CHECK_FALSE(terminal_env_value_ok(""));
  CHECK_FALSE(terminal_env_value_ok("/usr/share/terminfo/x/xterm"));
  CHECK_FALSE(terminal_env_value_ok("xterm\x1b]0;title"));
  CHECK_FALSE(terminal_env_value_ok("a b"));
  CHECK_FALSE(terminal_env_value_ok(std::string(129, 'a')));
}

// Before: the session directory's place was the deepest bind whose source
// held it, even where a deeper bind of another source lay over that place
// (the runtime was told a directory that showed something else).
TEST_CASE("CTX_SESSION_DIR is where the plan shows the session; unset where another mount covers it", "[unit]") {
  AgentSpec s = coder();
  s.policy = *ctx::policy::Policy::parse("coder.d/policy", "allow coder_t shared:p read\nallow coder_t shared:p write\n");
  PlanOptions o;
  o.session_space = "p";
  auto env_of = [&](const std::string& table) -> std::optional<std::string> {
    s.mounts = *ctx::mountspec::parse("coder.d/mount", table);
    auto p = plan_of(s, user(), o);
    REQUIRE(p);
    for (const auto& kv : p->env)
      if (kv.rfind("CTX_SESSION_DIR=", 0) == 0) return kv.substr(16);
    return std::nullopt;
  };
  CHECK(env_of("/srv/ctx/shared/p\t/p\trw\tbind\n") == "/p/agent/coder/session/default");
  CHECK(env_of("/srv/ctx/shared/p/agent\t/a\trw\tbind\n") == "/a/coder/session/default");
  CHECK(env_of("/srv/ctx/shared/p\t/p\trw\tbind\n/home/me/other\t/p/agent\tro\tbind\n") == std::nullopt);
  CHECK(env_of("/home/me/project\t/work\trw\tbind\n") == std::nullopt);
}
