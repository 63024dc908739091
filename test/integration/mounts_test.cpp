// What a sandbox's mounts are: only the table's targets, with the flags
// the table gives, submounts as bind or rbind says, exactly the plan's
// mount points. Every TEST_CASE tagged [root][userns] runs twice: launched
// by root (a privileged launch, as from systemd) and by the unprivileged
// test user. ctx-probe reports from inside.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/support/launch.hpp"
#include "test/support/namespaces.hpp"

using ctx::test::CtxTree;
using ctx::test::enter_own_userns;
using ctx::test::probe;
using ctx::test::run_probe;
using ctx::test::RunResult;
using ctx::test::write_file;
using nlohmann::json;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

}  // namespace

TEST_CASE("only the mount table's targets, /proc and /dev are visible", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("data");
  t.write("data/file", "x\n");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/data\t/data\tro\tbind,nosuid,nodev\n"}});
  json j = probe(run_probe(t, m, "coder",
                           {"mounts", "exists:/etc/passwd", "exists:/home", "exists:/data/file", "exists:" + t.root(),
                            "exists:/tmp", "pids"}));
  std::set<std::string> top;
  for (const auto& mnt : j["mounts"]) {
    std::string target = mnt["target"];
    bool allowed = target == "/" || target.rfind("/usr", 0) == 0 || target == "/probe" || target == "/data" ||
                   target.rfind("/proc", 0) == 0 || target.rfind("/dev", 0) == 0 || target.rfind("/run/ctx", 0) == 0;
    INFO(target);
    CHECK(allowed);
    top.insert(target);
  }
  for (const char* want :
       {"/", "/usr", "/probe", "/data", "/proc", "/dev", "/dev/pts", "/dev/shm", "/dev/null", "/run/ctx"})
    CHECK(top.count(want) == 1);
  CHECK(j["exists:/etc/passwd"] == "ENOENT");
  CHECK(j["exists:/home"] == "ENOENT");
  CHECK(j["exists:/tmp"] == "ENOENT");
  CHECK(j["exists:" + t.root()] == "ENOENT");
  CHECK(j["exists:/data/file"] == "yes");
  // Only the sandbox's own processes: its init (1) and the probe.
  std::set<int> pids(j["pids"].begin(), j["pids"].end());
  CHECK(pids == std::set<int>{1, 2});
}

TEST_CASE("ro is EROFS and cannot be remounted rw; rw is writable", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("ro");
  t.mkdir("rw");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/ro\t/ro\tro\tbind\n" + t.dir().path() +
                                  "/rw\t/rw\trw\tbind\n"}});
  json j =
      probe(run_probe(t, m, "coder", {"write:/ro/x", "write:/rw/x", "remount:/ro", "statvfs:/ro", "write:/probe"}));
  CHECK(j["write:/ro/x"] == "EROFS");
  CHECK(j["write:/rw/x"] == "ok");
  CHECK(j["remount:/ro"] == "EPERM");
  CHECK(j["statvfs:/ro"]["rdonly"] == true);
  CHECK(j["write:/probe"] == "EROFS");
  CHECK(t.dir().read("rw/x") == "probe\n");
}

TEST_CASE("nosuid, nodev and noexec are enforced", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("bin");
  t.write("bin/tool", ctx::test::read_file("/usr/bin/true"), 0755);
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/bin\t/noexec\tro\tbind,nosuid,nodev,noexec\n" +
                                  t.dir().path() + "/bin\t/exec\tro\tbind\n"}});
  json j =
      probe(run_probe(t, m, "coder", {"exec:/noexec/tool", "exec:/exec/tool", "statvfs:/noexec", "statvfs:/exec"}));
  CHECK(j["exec:/noexec/tool"] == "EACCES");
  CHECK(j["exec:/exec/tool"] == "ok");
  json flags = j["statvfs:/noexec"];
  flags.erase("bytes");
  CHECK(flags == json{{"rdonly", true}, {"nosuid", true}, {"nodev", true}, {"noexec", true}});
  CHECK(j["statvfs:/exec"]["noexec"] == false);
}

TEST_CASE("bind hides the source's submounts, rbind shows them", "[root]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("src/sub");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/src\t/b\tro\tbind\n" + t.dir().path() +
                                  "/src\t/r\tro\trbind\n"}});
  // The submount is made in a private mount namespace of a helper that
  // then runs the launcher: the host's mounts stay untouched.
  std::string script = "set -e; mount --make-rprivate /; mount -t tmpfs -o size=64k tmpfs " + t.dir().path() +
                       "/src/sub; touch " + t.dir().path() + "/src/sub/marker; exec " +
                       ctx::test::built("launcher/ctx-agent-run") + " --ctx-root " + t.root() +
                       " coder -- /probe exists:/b/sub/marker exists:/r/sub/marker exists:/b/sub";
  RunResult r =
      ctx::test::run_command({"/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script});
  json j = probe(r);
  CHECK(j["exists:/b/sub"] == "yes");
  CHECK(j["exists:/b/sub/marker"] == "ENOENT");
  CHECK(j["exists:/r/sub/marker"] == "yes");
}

TEST_CASE("unprivileged: bind of a source with submounts is refused, rbind shows them", "[userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("src/sub");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/src\t/b\tro\tbind\n" + t.dir().path() +
                                  "/src\t/r\tro\trbind\n"}});
  // The submount lives in a user and mount namespace of the test's own,
  // in which the launcher then runs (and nests its sandbox).
  std::string sub = t.dir().path() + "/src/sub";
  auto with_submount = [&]() {
    if (!enter_own_userns(m.owner, CLONE_NEWNS)) return false;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) < 0) return false;
    if (::mount("tmpfs", sub.c_str(), "tmpfs", 0, "size=64k") < 0) return false;
    return write_file((sub + "/marker").c_str(), "", O_CREAT);
  };
  // A non-recursive bind of a source with (locked) submounts is refused by
  // the kernel in a user namespace; rbind shows them.
  RunResult b = ctx::test::run_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder",
                                        "--", "/probe", "exists:/b/sub/marker"},
                                       m.as, 60, {}, with_submount);
  CHECK(b.exit_code == 125);
  CHECK(b.err ==
        "ctx-agent-run: coder.d/mount:3: " + t.dir().path() + "/src -> /b: source " + t.dir().path() +
            "/src: EINVAL: has mounts below it that a non-recursive bind would uncover, which the kernel refuses "
            "in a user namespace; use rbind\n");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/src\t/r\tro\trbind\n"}});
  RunResult r = ctx::test::run_command({ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder",
                                        "--", "/probe", "exists:/r/sub/marker"},
                                       m.as, 60, {}, with_submount);
  CHECK(probe(r)["exists:/r/sub/marker"] == "yes");
}

// The plan is the truth: the mount points a sandbox has (its mountinfo)
// are exactly the plan's, no more and no fewer, with a mask, a tool view
// (wrapped tools included), the list of the agent's sessions over a bind
// of its home, and the handful of fixed ones.
TEST_CASE("the mounts inside are exactly the plan's mount points", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("ctx/shared/hidden");
  t.write("ctx/tool/fs.read", "#!/bin/sh\n", 0755);
  t.mkdir("ctx/tool/fs.read.d");
  t.write("ctx/tool/shell.exec", "#!/bin/sh\n", 0755);
  t.write("ctx/bin/ctx", "#!/bin/sh\n", 0755);
  const std::string uid = std::to_string(m.owner.uid);
  t.mkdir("ctx/home/" + uid + "/agent/coder/session/review");
  t.mkdir("ctx/home/" + uid + "/agent/coder/session/old");
  const std::string home = t.root() + "/home/" + uid + "/agent/coder";
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + home +
                                  "\t/home/coder\trw\tbind,nosuid,nodev\n"},
                    {"policy", "allow coder_t tool:fs.read execute\nallow coder_t session:review read\n"}});
  RunResult dry = t.launch({"--dry-run", "coder", "--", "/probe", "mounts"}, m.as);
  REQUIRE(dry.exit_code == 0);
  json plan = json::parse(dry.out);
  std::multiset<std::string> want;
  for (const auto& p : plan["mount_points"]) want.insert(p.get<std::string>());
  CHECK(want.count("/ctx") == 1);                // the agent view
  CHECK(want.count("/ctx/shared/hidden") == 0);  // the view never shows it: no mask
  for (const char* listed : {"/home/coder/session", "/home/coder/session/default", "/home/coder/session/index",
                             "/home/coder/session/review"})
    CHECK(want.count(listed) == 1);
  CHECK(want.count("/home/coder/session/old") == 0);
  json j = probe(run_probe(t, m, "coder", {"mounts"}));
  std::multiset<std::string> seen;
  for (const auto& mnt : j["mounts"]) seen.insert(mnt["target"].get<std::string>());
  INFO("plan: " << plan["mount_points"].dump() << "\ninside: " << j["mounts"].dump());
  CHECK(seen == want);
}

// A static view (docs/view.md, "Without FUSE") is in the plan too: its
// step makes the tmpfs, and every other mount the sandbox shows below it
// is a bind the view reports in its started report, of a kind the plan
// names, under the view's step.
TEST_CASE("a static view's mounts inside are the plan's mount points and the binds it reports", "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  t.mkdir("ctx/shared/hidden");
  t.write("ctx/tool/fs.read", "#!/bin/sh\n", 0755);
  t.mkdir("ctx/tool/fs.read.d");
  t.write("ctx/tool/shell.exec", "#!/bin/sh\n", 0755);
  t.write("ctx/bin/ctx", "#!/bin/sh\n", 0755);
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"},
                    {"policy", "allow coder_t tool:fs.read execute\n"}});
  RunResult dry = t.launch({"--static-view", "--dry-run", "coder", "--", "/probe", "mounts"}, m.as);
  REQUIRE(dry.exit_code == 0);
  json plan = json::parse(dry.out);
  json view;
  for (const auto& s : plan["mounts"])
    if (s["step"] == "view") view = s;
  REQUIRE(view["target"] == "/ctx");
  REQUIRE(view["backend"] == "static");
  std::multiset<std::string> want;
  for (const auto& p : plan["mount_points"]) want.insert(p.get<std::string>());

  RunResult r = t.launch({"--static-view", "--json-status-fd", "1", "coder", "--", "/probe", "mounts"}, m.as);
  REQUIRE(r.exit_code == 0);
  json started;
  json inside;
  for (std::size_t at = 0, nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1) {
    json j = json::parse(r.out.substr(at, nl - at));
    if (j.contains("event") && j["event"] == "started") started = j;
    if (j.contains("mounts")) inside = j;
  }
  REQUIRE(started.contains("static_view_binds"));
  std::set<std::string> kinds;
  for (const auto& b : started["static_view_binds"]) {
    const std::string target = b["target"].get<std::string>();
    CHECK(target.rfind("/ctx/", 0) == 0);
    CHECK(view["static"]["binds"].contains(b["kind"].get<std::string>()));
    kinds.insert(b["kind"].get<std::string>());
    want.insert(target);
  }
  // The helper at the allowed tool's name, the agent's home whole, files.
  CHECK(kinds == std::set<std::string>{"directory", "file", "tool"});
  CHECK(want.count("/ctx/tool/fs.read") == 1);
  CHECK(want.count("/ctx/tool/shell.exec") == 0);
  std::multiset<std::string> seen;
  for (const auto& mnt : inside["mounts"]) seen.insert(mnt["target"].get<std::string>());
  INFO("plan: " << plan["mount_points"].dump() << "\nbinds: " << started["static_view_binds"].dump()
                << "\ninside: " << inside["mounts"].dump());
  CHECK(seen == want);
}
