// A symbolic link in an agent's root or home never leads a launch: no
// mount, mkdir or root is reached through one.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "test/support/launch.hpp"

using ctx::test::CtxTree;
using ctx::test::home_of;
using ctx::test::probe;
using ctx::test::run_probe;
using ctx::test::RunResult;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

}  // namespace

TEST_CASE("a symlink in root never leads a mount or mkdir outside it", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("outside");
  t.mkdir("src");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/src\t/work/sub\tro\tbind\n"}});
  std::string link = home_of(t, "coder") + "/root/work";
  REQUIRE(::symlink((t.dir().path() + "/outside").c_str(), link.c_str()) == 0);
  if (::geteuid() == 0) REQUIRE(::lchown(link.c_str(), m.owner.uid, m.owner.gid) == 0);
  RunResult r = run_probe(t, m, "coder", {"ids"});
  CHECK(r.exit_code == 125);
  CHECK(r.err.find("coder.d/mount:3: " + t.dir().path() + "/src -> /work/sub: openat2 work/sub: ELOOP") !=
        std::string::npos);
  struct stat st {};
  CHECK(::lstat((t.dir().path() + "/outside/sub").c_str(), &st) == -1);
  CHECK(t.dir().read("ctx/agent/coder.d/status") == "dead\n");
}

// The agent can write in its home (where its root lies) and in its rw
// binds. A symbolic link it plants there must not choose its next launch's
// root or mounts: the owner's other files, the durable CTX tree.
TEST_CASE("a symbolic link an agent plants in its home does not choose its next launch's root or mounts",
          "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  const std::string home = t.root() + "/home/" + uid + "/agent/coder";
  t.mkdir("secret");
  t.write("secret/key", "owner-only\n");
  t.mkdir("ctx/home/" + uid + "/agent/coder/data");
  t.agent("coder", {{"mount", t.base_mounts() + home + "\t/home/coder\trw\tbind,nosuid,nodev\n" + home +
                                  "/data\t/data\trw\tbind,nosuid,nodev\n"}});
  // First launch: the agent swaps its data directory and its root for
  // links to places of its choice.
  RunResult plant = t.launch({"coder", "--", "/bin/sh", "-c",
                              "cd /home/coder && rmdir data && ln -s " + t.dir().path() +
                                  "/secret data && mv root root.real && ln -s " + t.root() + " root && echo planted"},
                             m.as);
  INFO(plant.out << plant.err);
  REQUIRE(plant.out == "planted\n");
  // Next launch: refused, naming the link; nothing ran.
  RunResult next = t.launch({"coder", "--", "/bin/sh", "-c", "cat /data/key; ls /; echo ran"}, m.as);
  INFO(next.out << next.err);
  CHECK(next.exit_code != 0);
  CHECK(next.out.find("ran") == std::string::npos);
  CHECK(next.out.find("owner-only") == std::string::npos);
  // The session's start makes the home's data/ first: the link there is
  // refused before any mount (docs/abi.md, "Sessions").
  CHECK(next.err.find(home + "/data: openat data: ENOTDIR") != std::string::npos);
  CHECK(next.err.find("the agent was not started") != std::string::npos);
  // With the root back, the data link alone is refused too.
  REQUIRE(::unlink((home + "/root").c_str()) == 0);
  REQUIRE(::rename((home + "/root.real").c_str(), (home + "/root").c_str()) == 0);
  RunResult data = t.launch({"coder", "--", "/bin/sh", "-c", "cat /data/key; echo ran"}, m.as);
  INFO(data.out << data.err);
  CHECK(data.exit_code != 0);
  CHECK(data.out.find("owner-only") == std::string::npos);
  CHECK(data.err.find(home + "/data: openat data: ENOTDIR") != std::string::npos);
  // The root link alone (data a directory again): the root is not followed.
  REQUIRE(::unlink((home + "/data").c_str()) == 0);
  t.mkdir("ctx/home/" + uid + "/agent/coder/data");
  REQUIRE(::rename((home + "/root").c_str(), (home + "/root.real").c_str()) == 0);
  REQUIRE(::symlink(t.root().c_str(), (home + "/root").c_str()) == 0);
  RunResult root = t.launch({"coder", "--", "/bin/sh", "-c", "ls /; echo ran"}, m.as);
  INFO(root.out << root.err);
  CHECK(root.exit_code != 0);
  CHECK(root.out.find("ran") == std::string::npos);
  CHECK(root.err.find("ELOOP: reaches through a symbolic link, which a launch never follows") != std::string::npos);
}
