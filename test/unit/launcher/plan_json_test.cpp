// The plan as --dry-run prints it (launcher/plan/plan_json.hpp): each
// step kind with the fields it uses and no others, the ids and the
// namespaces by name.
#include "launcher/plan/plan_json.hpp"

#include <catch2/catch.hpp>

#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

using ctx::launcher::LaunchPlan;
using ctx::launcher::plan_to_json;
using ctx::mountspec::MountStep;
using nlohmann::json;

namespace ms = ctx::mountspec;

TEST_CASE("plan_to_json: every step kind with its own fields", "[unit]") {
  LaunchPlan p;
  ms::RootStep root;
  root.source = "/srv/ctx/home/1000/agent/coder/root";
  ms::BindStep bind;
  bind.target = "/work";
  bind.source = "/home/me/project";
  bind.attrs.nosuid = bind.attrs.nodev = true;
  bind.recursive = true;
  bind.line = 3;
  ms::BindStep child;
  child.target = "/data";
  child.source = "/srv/ctx/home/1000/agent/coder/data";
  child.attrs.rdonly = child.attrs.noexec = true;
  child.beneath = "/srv/ctx/home/1000/agent/coder";
  child.beneath_no_xdev = true;
  ms::MaskStep mask;
  mask.target = "/ctx/shared/secret";
  mask.attrs.rdonly = true;
  mask.why = "no shared:secret read";
  ms::ViewStep view;
  view.target = "/ctx";
  view.attrs.rdonly = true;
  view.line = 4;
  view.built = ms::static_build(view.attrs);
  ms::FsStep proc;
  proc.target = "/proc";
  proc.fstype = "proc";
  proc.options = "hidepid=2";
  proc.attrs.nosuid = proc.attrs.nodev = proc.attrs.noexec = true;
  ms::DevNodeStep null;
  null.target = "/dev/null";
  null.source = "/dev/null";
  ms::SymlinkStep fd;
  fd.target = "/dev/fd";
  fd.link = "/proc/self/fd";
  ms::SocketStep notify;
  notify.target = "/run/ctx/notify";
  notify.datagram = true;
  ms::SocketStep control;
  control.target = "/run/ctx/supervisor";
  ms::SealStep seal;
  seal.target = "/run/ctx";
  seal.attrs.rdonly = true;
  p.mounts = {root, bind, child, mask, view, proc, null, fd, notify, control, seal};
  const json m = plan_to_json(p)["mounts"];
  REQUIRE(m.size() == 11);
  CHECK(m[0] ==
        json{{"step", "root"}, {"target", "/"}, {"source", "/srv/ctx/home/1000/agent/coder/root"}, {"flags", {"rw"}}});
  CHECK(m[1] == json{{"step", "bind"},
                     {"target", "/work"},
                     {"source", "/home/me/project"},
                     {"flags", {"rw", "nosuid", "nodev"}},
                     {"type", "rbind"},
                     {"line", 3}});
  CHECK(m[2] ==
        json{{"step", "bind"},
             {"target", "/data"},
             {"source", "/srv/ctx/home/1000/agent/coder/data"},
             {"flags", {"ro", "noexec"}},
             {"type", "bind"},
             {"beneath", {{"dir", "/srv/ctx/home/1000/agent/coder"}, {"no_symlinks", true}, {"no_xdev", true}}}});
  CHECK(m[3] ==
        json{{"step", "mask"}, {"target", "/ctx/shared/secret"}, {"flags", {"ro"}}, {"why", "no shared:secret read"}});
  // A static view: its tmpfs and the kinds of binds it makes at launch.
  CHECK(m[4] == json{{"step", "view"},
                     {"target", "/ctx"},
                     {"source", "."},
                     {"backend", "static"},
                     {"flags", {"ro"}},
                     {"line", 4},
                     {"static",
                      {{"tmpfs",
                        {{"options", "mode=0755,size=1m,nr_inodes=16384"},
                         {"flags", {"rw", "nosuid", "nodev", "noexec"}},
                         {"sealed", {"ro", "nosuid", "nodev", "noexec"}}}},
                       {"binds",
                        {{"file", {"ro", "nosuid", "nodev"}},
                         {"file_no_exec", {"ro", "nosuid", "nodev", "noexec"}},
                         {"directory", {"ro", "nosuid", "nodev"}},
                         {"tool", {"ro", "nosuid", "nodev"}},
                         {"tool_bytes", {"ro", "nosuid", "nodev", "noexec"}}}}}}});
  CHECK(m[5] == json{{"step", "fs"},
                     {"target", "/proc"},
                     {"fstype", "proc"},
                     {"options", "hidepid=2"},
                     {"flags", {"rw", "nosuid", "nodev", "noexec"}}});
  CHECK(m[6] == json{{"step", "dev_node"}, {"target", "/dev/null"}, {"source", "/dev/null"}, {"flags", {"rw"}}});
  CHECK(m[7] == json{{"step", "symlink"}, {"target", "/dev/fd"}, {"link", "/proc/self/fd"}});
  CHECK(m[8] == json{{"step", "socket"}, {"target", "/run/ctx/notify"}, {"socket", "datagram"}});
  CHECK(m[9] == json{{"step", "socket"}, {"target", "/run/ctx/supervisor"}, {"socket", "stream, listening"}});
  CHECK(m[10] == json{{"step", "seal"}, {"target", "/run/ctx"}, {"flags", {"ro"}}});
}

TEST_CASE("plan_to_json: the live view says so; a view of a subtree names it and why", "[unit]") {
  LaunchPlan p;
  ms::ViewStep view;
  view.target = "/ctx";
  view.attrs.rdonly = true;
  view.source = "shared/p/tool";
  view.why = "a tool tier the bind brings";
  p.mounts = {view};
  CHECK(plan_to_json(p)["mounts"][0] == json{{"step", "view"},
                                             {"target", "/ctx"},
                                             {"source", "shared/p/tool"},
                                             {"backend", "fuse"},
                                             {"flags", {"ro"}},
                                             {"why", "a tool tier the bind brings"}});
}

TEST_CASE("plan_to_json: ids, namespaces by name, tier, network and the optional parts", "[unit]") {
  LaunchPlan p;
  p.name = "coder";
  p.session = "default";
  p.ids.privileged = true;
  p.ids.user_ns = true;
  p.ids.user_ns_after_mounts = true;
  p.ids.deny_setgroups = true;
  p.ids.uid_map = {{1000, 100000, 1}};
  p.ids.uid = 1000;
  p.ids.groups = {5};
  p.ids.host_uid = 100000;
  p.ids.fs = {1000, 1000, {27}};
  p.clone_flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS;
  p.unshare_flags = CLONE_NEWUSER;
  json j = plan_to_json(p);
  CHECK(j["agent"] == "coder");
  CHECK(j["tier"] == "system");
  CHECK(j["network"] == "loopback");
  CHECK(j["namespaces"] == json{"mnt", "pid", "net", "ipc", "uts"});
  CHECK(j["namespaces_after_mounts"] == json{"user"});
  CHECK(j["ids"] == json{{"privileged_caller", true},
                         {"user_namespace", true},
                         {"user_namespace_after_mounts", true},
                         {"maps_via_newuidmap", false},
                         {"setgroups", "deny"},
                         {"uid_map", {{{"inner", 1000}, {"outer", 100000}, {"count", 1}}}},
                         {"gid_map", json::array()},
                         {"inside", {{"uid", 1000}, {"gid", 0}, {"groups", {5}}}},
                         {"outside", {{"uid", 100000}, {"gid", 0}, {"groups", json::array()}}},
                         {"mount_sources_opened_as", {{"uid", 1000}, {"gid", 1000}, {"groups", {27}}}}});
  CHECK(j["terminal"].is_null());
  CHECK(j["limits"].is_null());
  p.tier_user = 1000;
  p.net_ns = false;
  p.terminal = true;
  p.limits = ctx::cgroup::Limits{};
  p.limits->pids_max = "20";
  p.clone_flags = CLONE_NEWUSER | CLONE_NEWCGROUP;
  j = plan_to_json(p);
  CHECK(j["tier"] == "user:1000");
  CHECK(j["network"] == "host");
  CHECK(j["namespaces"] == json{"user", "cgroup"});
  CHECK(j["terminal"] == "a pty of the sandbox's own devpts, relayed by the supervisor");
  CHECK(j["limits"] == json{{"memory.max", ""}, {"pids.max", "20"}, {"cpu.max", ""}});
}

// docs/launcher.md shows a static view step as --dry-run prints it.
TEST_CASE("plan_to_json: a static view step is as docs/launcher.md shows it", "[unit]") {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  std::ifstream in(std::string(src) + "/docs/launcher.md");
  REQUIRE(in);
  std::stringstream all;
  all << in.rdbuf();
  const std::string doc = all.str();
  const std::size_t intro = doc.find("For a view of `/ctx` from a bind `ro,nosuid,nodev` on line 4:");
  REQUIRE(intro != std::string::npos);
  const std::size_t open = doc.find("```json\n", intro);
  REQUIRE(open != std::string::npos);
  const std::size_t close = doc.find("```", open + 8);
  REQUIRE(close != std::string::npos);
  const json shown = json::parse(doc.substr(open + 8, close - open - 8));
  ms::ViewStep view;
  view.target = "/ctx";
  view.attrs = {.rdonly = true, .nosuid = true, .nodev = true};
  view.line = 4;
  view.built = ms::static_build(view.attrs);
  LaunchPlan p;
  p.mounts = {view};
  CHECK(plan_to_json(p)["mounts"][0] == shown);
}

TEST_CASE("plan_to_json: the model endpoint, and the proxy of a sandbox without network", "[unit]") {
  LaunchPlan p;
  CHECK(plan_to_json(p)["model_endpoint"].is_null());
  p.endpoint = ctx::launcher::EndpointPlan{7180, std::string(64, 'a'), "ctx-agent-run: EACCES: no network"};
  CHECK(plan_to_json(p)["model_endpoint"] == json{{"program", "ctx-model-endpoint"},
                                                  {"listen", "127.0.0.1:7180"},
                                                  {"started", "at the first connection"},
                                                  {"models", true},
                                                  {"proxy", "ctx-agent-run: EACCES: no network"}});
  // The host's network and a model: no proxy; the token is never shown.
  p.endpoint = ctx::launcher::EndpointPlan{0, std::string(64, 'a'), ""};
  const json e = plan_to_json(p)["model_endpoint"];
  CHECK(e["listen"] == "127.0.0.1, a port the kernel picks");
  CHECK(e["models"] == true);
  CHECK(e["proxy"].is_null());
  CHECK(plan_to_json(p).dump().find(std::string(64, 'a')) == std::string::npos);
}
