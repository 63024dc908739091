// The model's sandbox is built from the calling agent's plan, never from
// its mounts (issue 12): pure, so every property is checked here.
#include <catch2/catch.hpp>

#include <sched.h>

#include <algorithm>

#include "launcher/plan/model_plan.hpp"

using ctx::launcher::LaunchPlan;
using ctx::launcher::ModelEntry;
using ctx::mountspec::BindStep;
using ctx::mountspec::FsStep;
using ctx::mountspec::RootStep;
using ctx::mountspec::SealStep;
using ctx::mountspec::SocketStep;
using ctx::mountspec::ViewStep;

namespace {

LaunchPlan agent_plan() {
  LaunchPlan a;
  a.name = "coder";
  a.session = "default";
  a.ctx_root = "/srv/ctx";
  a.owner = 1000;
  a.clone_flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUSER | CLONE_NEWNET;
  a.ids.user_ns = true;
  a.ids.host_uid = 1000;
  a.nproc = 1024;
  BindStep b;
  b.source = "/home/me/project";
  b.target = "/work";
  b.attrs = {.nosuid = true, .nodev = true};
  a.mounts.push_back(b);
  a.env = {"CTX_AGENT=coder", "SECRET_OF_THE_AGENT=1"};
  return a;
}

ModelEntry echo() {
  ModelEntry m;
  m.name = "debug/echo";
  m.host_path = "/srv/ctx/model/debug/echo";
  m.meta_dir = "/srv/ctx/model/debug/echo.d";
  m.env = {{"API_KEY", "sk-live"}};
  return m;
}

const std::vector<std::pair<std::string, std::string>> kNetFiles = {
    {"/etc/resolv.conf", "/run/systemd/resolve/stub-resolv.conf"}, {"/etc/hosts", "/etc/hosts"}};

template <typename Kind>
const Kind* at(const LaunchPlan& p, const std::string& target) {
  for (const auto& m : p.mounts)
    if (const auto* k = std::get_if<Kind>(&m); k != nullptr && k->target == target) return k;
  return nullptr;
}

}  // namespace

TEST_CASE("a model's sandbox: none of the agent's mounts, a fresh read-only root, its own entry, no sockets",
          "[unit]") {
  LaunchPlan p = ctx::launcher::model_plan(agent_plan(), echo(), "/run/anchor", {"/usr"}, kNetFiles);
  REQUIRE_FALSE(p.mounts.empty());
  REQUIRE(std::holds_alternative<RootStep>(p.mounts.front()));
  CHECK(std::get<RootStep>(p.mounts.front()).fresh);
  CHECK(std::get<RootStep>(p.mounts.front()).source == "/run/anchor");
  REQUIRE(std::holds_alternative<SealStep>(p.mounts.back()));
  CHECK(std::get<SealStep>(p.mounts.back()).target == "/");
  CHECK(std::get<SealStep>(p.mounts.back()).attrs.rdonly);
  // Nothing of the agent's: no /work, no CTX root, no socket, no view.
  CHECK(at<BindStep>(p, "/work") == nullptr);
  for (const auto& m : p.mounts) {
    CHECK_FALSE(std::holds_alternative<SocketStep>(m));
    CHECK_FALSE(std::holds_alternative<ViewStep>(m));
    const auto* b = std::get_if<BindStep>(&m);
    if (b != nullptr) CHECK(b->attrs.rdonly);
    if (b != nullptr && b->source.rfind("/srv/ctx", 0) == 0)
      CHECK((b->source == "/srv/ctx/model/debug/echo" || b->source == "/srv/ctx/model/debug/echo.d"));
  }
  const BindStep* model = at<BindStep>(p, "/ctx/model/debug/echo");
  REQUIRE(model != nullptr);
  CHECK_FALSE(model->attrs.noexec);
  const BindStep* meta = at<BindStep>(p, "/ctx/model/debug/echo.d");
  REQUIRE(meta != nullptr);
  CHECK(meta->attrs.noexec);
  REQUIRE(at<BindStep>(p, "/usr") != nullptr);
  REQUIRE(at<FsStep>(p, "/tmp") != nullptr);
  CHECK(at<FsStep>(p, "/tmp")->fstype == "tmpfs");
  // Its credentials in its environment; nothing of the agent's there.
  CHECK(std::count(p.env.begin(), p.env.end(), "API_KEY=sk-live") == 1);
  CHECK(std::none_of(p.env.begin(), p.env.end(), [](const std::string& e) { return e.rfind("SECRET_OF", 0) == 0; }));
  CHECK(p.argv == std::vector<std::string>{"/ctx/model/debug/echo"});
  // The agent's ids and user namespace, a pid namespace of its own, no
  // network unless its cap names it.
  CHECK(p.ids.host_uid == 1000);
  CHECK((p.clone_flags & CLONE_NEWUSER) != 0);
  CHECK((p.clone_flags & CLONE_NEWPID) != 0);
  CHECK((p.clone_flags & CLONE_NEWNET) != 0);
  ModelEntry net = echo();
  net.network = true;
  CHECK((ctx::launcher::model_plan(agent_plan(), net, "/run/anchor", {"/usr"}, kNetFiles).clone_flags & CLONE_NEWNET) == 0);
}

TEST_CASE("a model's sandbox has the host's resolver files, read-only, only when its cap names the network",
          "[unit]") {
  LaunchPlan closed = ctx::launcher::model_plan(agent_plan(), echo(), "/run/anchor", {"/usr"}, kNetFiles);
  CHECK(at<BindStep>(closed, "/etc/resolv.conf") == nullptr);
  CHECK(at<BindStep>(closed, "/etc/hosts") == nullptr);
  ModelEntry net = echo();
  net.network = true;
  LaunchPlan open = ctx::launcher::model_plan(agent_plan(), net, "/run/anchor", {"/usr"}, kNetFiles);
  const BindStep* resolv = at<BindStep>(open, "/etc/resolv.conf");
  REQUIRE(resolv != nullptr);
  CHECK(resolv->source == "/run/systemd/resolve/stub-resolv.conf");
  CHECK(resolv->attrs.rdonly);
  CHECK_FALSE(resolv->recursive);
  REQUIRE(at<BindStep>(open, "/etc/hosts") != nullptr);
  CHECK(at<BindStep>(open, "/etc/hosts")->source == "/etc/hosts");
}
