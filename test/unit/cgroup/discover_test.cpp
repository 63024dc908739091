#include <catch2/catch.hpp>

#include "cgroup/discover.hpp"
#include "cgroup/placement.hpp"

using namespace ctx::cgroup;

TEST_CASE("the cgroup2 mount is found in the mount table, wherever it is", "[unit]") {
  using ctx::sys::MountEntry;
  std::vector<MountEntry> hybrid{
      {"/sys/fs/cgroup", "tmpfs", "/"},
      {"/sys/fs/cgroup/memory", "cgroup", "/"},
      {"/sys/fs/cgroup/unified", "cgroup2", "/"},
      {"/mnt/later", "cgroup2", "/"},
  };
  auto m = find_cgroup2(hybrid);
  REQUIRE(m);
  CHECK(m->mount_point == "/sys/fs/cgroup/unified");
  CHECK(m->root == "/");
  // Mount points and roots come decoded from either path of
  // sys::mount_table(): a space or a newline is part of the name.
  auto esc = find_cgroup2({{"/mnt/c g", "cgroup2", "/sub"}});
  REQUIRE(esc);
  CHECK(esc->mount_point == "/mnt/c g");
  CHECK(esc->root == "/sub");
  auto nl = find_cgroup2({{"/", "ext4", "/"}, {"/mnt/c\ng h", "cgroup2", "/a\nb"}});
  REQUIRE(nl);
  CHECK(nl->mount_point == "/mnt/c\ng h");
  CHECK(nl->root == "/a\nb");
  CHECK_FALSE(find_cgroup2({{"/sys/fs/cgroup/memory", "cgroup", "/"}}));
  CHECK_FALSE(find_cgroup2({}));
  CHECK(dir_of(*esc, "/sub/a/b") == std::optional<std::string>("/mnt/c g/a/b"));
  CHECK_FALSE(dir_of(*esc, "/other"));
  CHECK(dir_of(*nl, "/a\nb/x") == std::optional<std::string>("/mnt/c\ng h/x"));
}

TEST_CASE("the v2 line of /proc/self/cgroup", "[unit]") {
  CHECK(v2_path("4:memory:/x\n0::/system.slice/agent@coder.service\n") ==
        std::optional<std::string>("/system.slice/agent@coder.service"));
  CHECK_FALSE(v2_path("4:memory:/x\n"));
}

TEST_CASE("choosing the base cgroup", "[unit]") {
  BaseInputs in;
  in.mount = Cgroup2Mount{"/sys/fs/cgroup", "/"};
  in.owner = 1000;
  in.own_path = "/";
  CHECK(choose_base(in).dir.empty());
  CHECK(
      choose_base(in).why_not ==
      "the launcher's own cgroup / is not writable by this user and no --cgroup-base was given");
  in.systemd = true;  // the remedy only where systemd can give it
  CHECK(choose_base(in).why_not ==
        "the launcher's own cgroup / is not writable by this user and no --cgroup-base was given "
        "(systemd-run --user --scope -p Delegate=yes gives one)");
  in.systemd = false;
  in.privileged = true;  // root outside systemd: a subtree of our own
  CHECK(choose_base(in).dir == "/sys/fs/cgroup/cortexfs/user-1000");
  CHECK(choose_base(in).create);
  in.own_path = "/system.slice/agent@coder.service";  // under systemd, Delegate=yes
  in.own_writable = true;
  CHECK(choose_base(in).dir == "/sys/fs/cgroup/system.slice/agent@coder.service");
  in.privileged = false;
  in.own_path = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-1.scope";
  CHECK(choose_base(in).dir == "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/run-1.scope");
  in.explicit_base = "/sys/fs/cgroup/mine";
  CHECK(choose_base(in).dir == "/sys/fs/cgroup/mine");
  in.mount.reset();
  CHECK(choose_base(in).why_not == "no cgroup2 file system is mounted (see /proc/self/mountinfo)");
}

TEST_CASE("agent cgroup names keep CTX roots apart", "[unit]") {
  CHECK(agent_cgroup_name("coder", "/ctx") == "agent-coder");
  std::string a = agent_cgroup_name("coder", "/srv/a/ctx"), b = agent_cgroup_name("coder", "/srv/b/ctx");
  CHECK(a.rfind("agent-coder-", 0) == 0);
  CHECK(a.size() == std::string("agent-coder-").size() + 8);
  CHECK(a != b);
  CHECK(a == agent_cgroup_name("coder", "/srv/a/ctx"));
}
