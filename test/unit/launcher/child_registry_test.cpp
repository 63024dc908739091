// The registry of owned children and the child supervisor's command line,
// without a sandbox: no process is started.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "launcher/control/child_registry.hpp"
#include "launcher/control/child_spawn.hpp"

using ctx::launcher::ChildRegistry;
using ctx::launcher::OwnedChild;

namespace {

OwnedChild child(pid_t pid, std::vector<int> start_waiters = {}) {
  OwnedChild c;
  c.pid = pid;
  c.start_waiters = std::move(start_waiters);
  return c;
}

}  // namespace

TEST_CASE("the child registry keeps running and ended children by name", "[unit]") {
  ChildRegistry reg;
  CHECK(reg.find("rev") == nullptr);
  CHECK_FALSE(reg.running("rev"));
  CHECK(reg.running() == 0);
  reg.add("rev", child(10, {1}));
  reg.add("doc", child(11, {2}));
  REQUIRE(reg.find("rev") != nullptr);
  CHECK(reg.find("rev")->pid == 10);
  CHECK(reg.running("rev"));
  CHECK(reg.running() == 2);
  CHECK(reg.running_names() == std::vector<std::string>{"doc", "rev"});

  reg.find("rev")->exit_waiters.emplace_back(3, "wait");
  auto w = reg.mark_exited("rev", 143);
  CHECK(w.start == std::vector<int>{1});
  REQUIRE(w.exit.size() == 1);
  CHECK(w.exit[0] == std::pair<int, std::string>{3, "wait"});
  CHECK_FALSE(reg.running("rev"));
  CHECK(reg.find("rev")->exit_status == 143);
  CHECK(reg.find("rev")->start_waiters.empty());
  CHECK(reg.find("rev")->exit_waiters.empty());
  CHECK(reg.running() == 1);
  CHECK(reg.running_names() == std::vector<std::string>{"doc"});
  CHECK(reg.mark_exited("nobody", 1).start.empty());

  // An ended child's name can be started again.
  reg.add("rev", child(12));
  CHECK(reg.running("rev"));
  CHECK(reg.find("rev")->pid == 12);
  CHECK_FALSE(reg.find("rev")->exit_status);
}

TEST_CASE("the child registry polls only running children", "[unit]") {
  // Real descriptors, so that each polled one can be told by its number:
  // rev runs with a pidfd and a status pipe, ann runs with a pidfd only,
  // doc has ended (its descriptors closed and never polled again).
  int rev[2], ann[2], doc[2];
  REQUIRE(::pipe(rev) == 0);
  REQUIRE(::pipe(ann) == 0);
  REQUIRE(::pipe(doc) == 0);
  ::close(ann[1]);
  ChildRegistry reg;
  OwnedChild r = child(10);
  r.pidfd = ctx::UniqueFd(rev[0]);
  r.status = ctx::UniqueFd(rev[1]);
  reg.add("rev", std::move(r));
  OwnedChild a = child(11);
  a.pidfd = ctx::UniqueFd(ann[0]);
  reg.add("ann", std::move(a));
  OwnedChild d = child(12);
  d.pidfd = ctx::UniqueFd(doc[0]);
  d.status = ctx::UniqueFd(doc[1]);
  reg.add("doc", std::move(d));
  reg.mark_exited("doc", 0);
  std::vector<struct pollfd> fds;
  reg.add_poll_fds(fds);
  std::vector<std::pair<int, short>> polled;
  for (const auto& p : fds) polled.emplace_back(p.fd, p.events);
  // In name order: ann's pidfd; rev's pidfd, then its status pipe.
  CHECK(polled == std::vector<std::pair<int, short>>{{ann[0], POLLIN}, {rev[0], POLLIN}, {rev[1], POLLIN}});
}

TEST_CASE("an ended child's descriptors are closed; its record stays", "[unit]") {
  // A parent used to keep one pidfd per child it ever ran, until EMFILE
  // refused its ~1000th distinct child (issue #14).
  ChildRegistry reg;
  OwnedChild c = child(10);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  c.pidfd = ctx::UniqueFd(fds[0]);
  c.status = ctx::UniqueFd(fds[1]);
  reg.add("rev", std::move(c));
  reg.mark_exited("rev", 0);
  CHECK_FALSE(reg.find("rev")->pidfd.valid());
  CHECK_FALSE(reg.find("rev")->status.valid());
  CHECK(::fcntl(fds[0], F_GETFD) < 0);
  CHECK(::fcntl(fds[1], F_GETFD) < 0);
  CHECK(reg.find("rev")->exit_status == 0);
}

TEST_CASE("a connection that goes away waits for nothing", "[unit]") {
  ChildRegistry reg;
  reg.add("rev", child(10, {1, 2}));
  reg.find("rev")->exit_waiters = {{1, "stop"}, {3, "wait"}};
  reg.forget_waiter(1);
  CHECK(reg.find("rev")->start_waiters == std::vector<int>{2});
  REQUIRE(reg.find("rev")->exit_waiters.size() == 1);
  CHECK(reg.find("rev")->exit_waiters[0].first == 3);
  auto all = reg.take_all_waiters();
  REQUIRE(all.size() == 1);
  CHECK(all[0].first == "rev");
  CHECK(all[0].second.start == std::vector<int>{2});
  CHECK(all[0].second.exit.size() == 1);
  CHECK(reg.find("rev")->start_waiters.empty());
  CHECK(reg.find("rev")->exit_waiters.empty());
}

TEST_CASE("a child's status lines release its start waiters once it started", "[unit]") {
  ChildRegistry reg;
  reg.add("rev", child(10, {4, 5}));
  OwnedChild& c = *reg.find("rev");
  CHECK(reg.feed_status(c, R"({"event":"timing","step":"id_maps"})"
                           "\n{\"event\":\"sta")
            .empty());
  CHECK_FALSE(c.runtime_pid);
  CHECK(reg.feed_status(c, "rted\",\"pid\":4242}\n").size() == 2);
  CHECK(c.runtime_pid == 4242);
  CHECK(c.start_waiters.empty());
  CHECK(c.status_buf.empty());
  CHECK(reg.feed_status(c, "not json\n").empty());
}

TEST_CASE("a child's supervisor command line", "[unit]") {
  ctx::launcher::SpawnConfig cfg;
  cfg.self_exe = "/usr/bin/ctx-agent-run";
  cfg.cancel_grace_ms = 500;
  CHECK(ctx::launcher::child_supervisor_argv(cfg, "/ctx", 77, "rev", {}) ==
        std::vector<std::string>{"/usr/bin/ctx-agent-run", "--ctx-root", "/ctx", "--owned-by", "77",
                                 "--cancel-grace-ms", "500", "--json-status-fd", "3", "rev"});
  cfg.agent_cgroup = "/sys/fs/cgroup/agent-coder";
  cfg.require_cgroup = true;
  CHECK(ctx::launcher::child_supervisor_argv(cfg, "/ctx", 77, "rev", {"/probe", "sleep:1"}) ==
        std::vector<std::string>{"/usr/bin/ctx-agent-run", "--ctx-root", "/ctx", "--owned-by", "77",
                                 "--cancel-grace-ms", "500", "--json-status-fd", "3", "--cgroup-base",
                                 "/sys/fs/cgroup/agent-coder/child", "--cgroup-leaf", "rev", "--require-cgroup", "rev",
                                 "--", "/probe", "sleep:1"});
}
