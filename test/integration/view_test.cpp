// The agent view (docs/view.md) from inside real sandboxes, launched by
// root (for the test user) and by the test user itself: what a mount of
// the CTX root shows, that it never reaches the host's mount table, that
// a tool run through it is recorded once, that a revoked grant disappears
// while the agent runs, and that a dead view stops the agent.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "test/support/facility.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::count_of;
using ctx::test::CtxTree;
using ctx::test::RunResult;
using ctx::test::TestUser;

namespace {

constexpr const char* kPolicy =
    "allow coder_t tool:fs.read execute\n"
    "allow coder_t model:debug/echo use\n"
    "allow coder_t shared:project-a read\n";

// The two backends of the view (docs/view.md): served over FUSE, and
// built once at launch with tmpfs and binds (--static-view, what a launch
// falls back to where /dev/fuse cannot be used). The tests that hold for
// both run against both.
struct ViewTree {
  TestUser as;
  CtxTree t;
  std::string uid;
  std::string backend;

  ViewTree(const TestUser& owner, const TestUser& launcher, std::string b = "fuse")
      : as(launcher), t(owner), uid(std::to_string(owner.uid)), backend(std::move(b)) {
    t.write("ctx/status", "ready\n");
    t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
    t.write("ctx/tool/fs.read", "#!/bin/sh\necho read-ran\n", 0755);
    t.write("ctx/tool/fs.read.d/schema", "{}\n");
    t.write("ctx/tool/fs.read.d/log", "facts\n");
    t.write("ctx/tool/fs.write", "#!/bin/sh\necho write-ran\n", 0755);
    t.write("ctx/model/debug/echo", "#!/bin/sh\ncat\n", 0755);
    t.write("ctx/model/debug/echo.d/id", "debug/echo\n");
    t.write("ctx/model/debug/echo.d/env", "API_KEY=sk-live-secret\n");
    t.write("ctx/model/openai/gpt-4o", "#!/bin/sh\ncat\n", 0755);
    REQUIRE(::symlink("/ctx/model/debug/echo", (t.root() + "/model/main").c_str()) == 0);
    t.write("ctx/shared/project-a/data/f", "data\n");
    t.write("ctx/shared/project-a/tool/project.test", "#!/bin/sh\necho project-test-ran\n", 0755);
    t.write("ctx/shared/secret/data/f", "secret\n");
    t.write("ctx/home/" + uid + "/agent/other/session/default/messages.jsonl", "private\n");
    t.agent("other", {{"policy", "allow other_t tool:fs.write execute\n"}});
    t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.root() + "/home/" +
                                    uid + "/agent/coder\t/ctx/home/" + uid + "/agent/coder\trw\tbind,nosuid,nodev\n" +
                                    t.root() + "/shared/project-a\t/shared/project-a\tro\trbind,nosuid,nodev\n"},
                      {"policy", kPolicy}});
  }

  std::vector<std::string> args(std::vector<std::string> a) const {
    if (backend == "static") a.insert(a.begin(), "--static-view");
    return a;
  }
  RunResult sh(const std::string& cmd) { return t.launch(args({"coder", "--", "/bin/sh", "-c", cmd}), as); }
  std::string events() {
    std::ifstream in(t.root() + "/home/" + uid + "/agent/coder/session/default/events.jsonl");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
};

ViewTree make_tree(const std::string& backend = "fuse") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  TestUser as = ctx::test::current_facility() == "root" ? TestUser{0, 0, "root"} : *u;
  return ViewTree(*u, as, backend);
}

}  // namespace

TEST_CASE("a mount of the CTX root shows the agent view, never the durable tree", "[root][userns]") {
  const std::string backend = GENERATE(as<std::string>{}, "fuse", "static");
  INFO("backend " << backend);
  ViewTree v = make_tree(backend);
  RunResult r = v.sh(
      "cd /ctx && ls; echo --; ls tool; echo --; ls model model/debug model/debug/echo.d; echo --; ls agent; echo --; "
      "ls home home/*; ls home/*/agent; echo --; ls shared; echo --; "
      // No symbolic link in the view (the agent's own home is a bind of its own).
      "find /ctx -path /ctx/home/" +
      v.uid +
      "/agent/coder -prune -o -type l -print | wc -l; "
      "cat model/main; cat model/debug/echo.d/env; cat agent/other.d/policy; cat home/" +
      v.uid +
      "/agent/other/session/default/messages.jsonl; cat shared/secret/data/f; cat tool/fs.read.d/log; touch tool/new; mkdir x; echo end");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out ==
        "agent\nbin\nhome\nmodel\nshared\nstatus\ntool\n--\nfs.read\nfs.read.d\n--\nmodel:\ndebug\nmain\n\n"
        "model/debug:\necho\necho.d\n\nmodel/debug/echo.d:\nid\n--\ncoder.d\n--\nhome:\n" +
            v.uid + "\n\nhome/" + v.uid + ":\nagent\n" + "coder\n--\nproject-a\n--\n0\n#!/bin/sh\ncat\nend\n");
  for (const char* hidden : {"model/debug/echo.d/env", "agent/other.d/policy", "other/session/default/messages.jsonl",
                             "shared/secret/data/f", "tool/fs.read.d/log"})
    CHECK(r.err.find(std::string(hidden) + ": No such file or directory") != std::string::npos);
  CHECK(r.err.find("tool/new': Read-only file system") != std::string::npos);
  CHECK(r.err.find("'x': Read-only file system") != std::string::npos);
  CHECK(r.out.find("sk-live-secret") == std::string::npos);
  // The mount is the sandbox's alone.
  std::ifstream mi("/proc/self/mountinfo");
  std::stringstream ss;
  ss << mi.rdbuf();
  CHECK(ss.str().find(v.t.root()) == std::string::npos);
  // ctx view on the host prints the same tree from the same rules.
  RunResult cv = ctx::test::run_command({ctx::test::built("ctx/ctx"), "view", "--ctx-root", v.t.root(), "coder"});
  CHECK(cv.exit_code == 0);
  CHECK(cv.out.find("tool/\n  fs.read  (executable)\n  fs.read.d/\n    schema\n") != std::string::npos);
  CHECK(cv.out.find("  main  = model/debug/echo\n") != std::string::npos);  // a model is never run from the view
  CHECK(cv.out.find("fs.write") == std::string::npos);
  CHECK(cv.out.find("secret") == std::string::npos);
}

TEST_CASE("the ways around the tool gate that the durable tree offered are closed", "[root][userns]") {
  const std::string backend = GENERATE(as<std::string>{}, "fuse", "static");
  INFO("backend " << backend);
  ViewTree v = make_tree(backend);
  // A shared space bound with its tool tier, a model without a grant, the
  // old projection's .ctx-real/ detour.
  RunResult r = v.sh(
      "/shared/project-a/tool/project.test; echo rc=$?; ls /shared/project-a; /ctx/model/openai/gpt-4o </dev/null; "
      "echo rc=$?; ls /ctx/tool/.ctx-real; echo rc=$?");
  INFO(r.out << r.err);
  CHECK(r.out == "rc=127\ndata\ntool\nrc=127\nrc=2\n");
  CHECK(r.out.find("project-test-ran") == std::string::npos);
  CHECK(r.err.find("/shared/project-a/tool/project.test: not found") != std::string::npos);
  CHECK(r.err.find("/ctx/model/openai/gpt-4o: not found") != std::string::npos);
  // Granted, the space's tool runs, and is recorded. A model the agent
  // may use is shown but never runs with the agent's rights (seed 000: a
  // model is an inference endpoint in a sandbox of its own).
  v.t.set_policy("coder", std::string(kPolicy) + "allow coder_t tool:project.test execute\n");
  RunResult ok = v.sh(
      "/shared/project-a/tool/project.test; /ctx/model/debug/echo </dev/null; echo rc=$?; "
      "/ctx/model/main </dev/null; echo rc=$?; cat /ctx/model/main");
  INFO(ok.err);
  CHECK(ok.out == "project-test-ran\nrc=126\nrc=126\n#!/bin/sh\ncat\n");
  CHECK(v.events().find("\"object\":\"tool/project.test\"") != std::string::npos);
}

TEST_CASE("a tool run through the view is recorded once, as through ctx tool", "[root][userns]") {
  const std::string backend = GENERATE(as<std::string>{}, "fuse", "static");
  // bin/ as a test writes it (the full helper at bin/ctx) and as ctx init
  // lays it out (the small program of tool calls, the full helper beside).
  const std::string helpers = GENERATE(as<std::string>{}, "full", "small");
  INFO("backend " << backend << ", bin/ctx " << helpers);
  ViewTree v = make_tree(backend);
  if (helpers == "small") {
    v.t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx-call")), 0755);
    v.t.write("ctx/bin/ctx-helper", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
  }
  std::string before = v.events();
  RunResult d = v.sh(
      "/ctx/tool/fs.read; /ctx/bin/ctx tool fs.read </dev/null; cat /ctx/tool/fs.read >/dev/null; "
      "/ctx/bin/ctx --version");
  INFO(d.out << d.err);
  CHECK(d.out == "read-ran\nread-ran\nctx 0.1.0\n");
  std::string added = v.events().substr(before.size());
  CHECK(count_of(added, "\"type\":\"tool.call\"") == 2);  // two runs; reading it is not a call
  CHECK(count_of(added, "\"object\":\"tool/fs.read\"") == 2);
  // Both recorded by the supervisor: the exec runs the helper shown at the
  // tool's name, which asks it (a direct call); ctx tool asks it itself.
  CHECK(count_of(added, "\"via\":\"exec\"") == 1);
  CHECK(count_of(added, "\"via\":\"ctx tool\"") == 1);
}

TEST_CASE("a revoked grant leaves the running agent's view", "[root][userns]") {
  ViewTree v = make_tree();
  // The runtime waits until fs.read is gone from its view and says so.
  auto sp = v.t.spawn({"coder", "--", "/bin/sh", "-c",
                       "while [ ! -e /ctx/home/" + v.uid +
                           "/agent/coder/started ]; do sleep 0.05; done; "
                           "i=0; while [ -e /ctx/tool/fs.read ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done; "
                           "[ -e /ctx/tool/fs.read ] && echo still-there || echo gone; "
                           "ls /ctx/model"},
                      v.as);
  // Started: the view showed fs.read; now the owner revokes it.
  v.t.write("ctx/home/" + v.uid + "/agent/coder/started", "");
  ::usleep(300000);
  v.t.set_policy("coder", "allow coder_t model:debug/echo use\nallow coder_t model:openai/gpt-4o use\n");
  RunResult r = ctx::test::wait_command(sp, 30);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  // Gone within the 10 s the runtime waits (docs/view.md: under a second);
  // a model granted meanwhile appears.
  CHECK(r.out == "gone\ndebug\nmain\nopenai\n");
}

// The view keeps pages and names for up to 0.5 s (docs/view.md, "Live"):
// a status file changed on the host is read as it is now within that, and
// never cut or mixed meanwhile (a read is the old content or the new).
TEST_CASE("a status file replaced or rewritten while the agent runs is read through the view as it is now",
          "[root][userns]") {
  ViewTree v = make_tree();
  std::string home = "/ctx/home/" + v.uid + "/agent/coder/";
  std::string host_home = v.t.root() + "/home/" + v.uid + "/agent/coder/";
  // seen NEW OLD: reads until NEW (at most about 2 s: generous against a
  // loaded machine; the bound the docs give is 0.5 s), saying any read
  // that is neither.
  const std::string seen =
      "seen() { i=0; while [ $i -lt 100 ]; do c=$(cat /ctx/status); "
      "if [ \"$c\" = \"$1\" ]; then echo \"$1\"; return; fi; "
      "[ \"$c\" = \"$2\" ] || echo \"odd:$c\"; sleep 0.02; i=$((i+1)); done; echo \"stale:$1\"; }; ";
  auto wait = [&](const std::string& f) { return "while [ ! -e " + home + f + " ]; do sleep 0.02; done; "; };
  auto sp = v.t.spawn({"coder", "--", "/bin/sh", "-c",
                       seen + "cat /ctx/status; cat /ctx/status; touch " + home + "a; " + wait("b") +
                           "seen fresh ready; touch " + home + "c; " + wait("d") + "seen again fresh; touch " + home +
                           "e; " + wait("f") + "seen 'fresh, and longer' again"},
                      v.as);
  REQUIRE(ctx::test::wait_for_file(host_home + "a", ""));
  // Replaced by rename with the same size and the same mtime: only the
  // inode (and ctime) says it is another file.
  std::string status = v.t.root() + "/status";
  struct stat old {};
  REQUIRE(::stat(status.c_str(), &old) == 0);
  v.t.write("ctx/status.new", "fresh\n");
  const struct timespec times[2] = {old.st_atim, old.st_mtim};
  REQUIRE(::utimensat(AT_FDCWD, (status + ".new").c_str(), times, 0) == 0);
  REQUIRE(::rename((status + ".new").c_str(), status.c_str()) == 0);
  v.t.write("ctx/home/" + v.uid + "/agent/coder/b", "");
  REQUIRE(ctx::test::wait_for_file(host_home + "c", ""));
  // Written in place, the same size.
  {
    std::fstream f(status, std::ios::in | std::ios::out | std::ios::binary);
    f.write("again\n", 6);
  }
  v.t.write("ctx/home/" + v.uid + "/agent/coder/d", "");
  REQUIRE(ctx::test::wait_for_file(host_home + "e", ""));
  // Replaced by a longer file while the kernel may still hold the old
  // size: read whole, never cut at the old size.
  v.t.write("ctx/status.new", "fresh, and longer\n");
  REQUIRE(::rename((status + ".new").c_str(), status.c_str()) == 0);
  v.t.write("ctx/home/" + v.uid + "/agent/coder/f", "");
  RunResult r = ctx::test::wait_command(sp, 60);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "ready\nready\nfresh\nagain\nfresh, and longer\n");
}

TEST_CASE("a dead view server stops the agent; the sandbox sees ENOTCONN", "[root][userns]") {
  ViewTree v = make_tree();
  // On the supervisor's SIGTERM the runtime looks at its view once more.
  auto sp = v.t.spawn({"coder", "--", "/bin/sh", "-c",
                       "trap 'ls /ctx/status 2>&1 >/dev/null | cat >&2; exit 3' TERM; cd /ctx/home/" + v.uid +
                           "/agent/coder && touch up; i=0; while [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"},
                      v.as);
  REQUIRE(ctx::test::wait_for_file(v.t.root() + "/home/" + v.uid + "/agent/coder/up", ""));
  // The view's server: a process named ctx-view whose command line is its
  // supervisor's (it is forked, not executed).
  pid_t server = 0;
  for (int pid : ctx::test::processes_mentioning(v.t.root())) {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    if (name == "ctx-view") server = pid;
  }
  REQUIRE(server > 0);
  REQUIRE(::kill(server, SIGKILL) == 0);
  RunResult r = ctx::test::wait_command(sp, 30);
  INFO(r.out << r.err);
  CHECK(r.err.find("ls: cannot access '/ctx/status': Transport endpoint is not connected") != std::string::npos);
  CHECK(r.err.find("the agent view's server ended") != std::string::npos);
  CHECK(r.exit_code == 3);
  std::string log = v.t.dir().read("ctx/agent/coder.d/log");
  CHECK(log.find("\"type\":\"agent.view\"") != std::string::npos);
  CHECK(log.find("\"reason\":\"view_dead\"") != std::string::npos);
  CHECK(ctx::test::processes_mentioning(v.t.root()).empty());
}

// Root is needed to look into the sandbox's processes (its init is not
// dumpable); both kinds of launch are checked.
TEST_CASE("no process of the sandbox holds a /dev/fuse descriptor", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  const std::string backend = GENERATE(as<std::string>{}, "fuse", "static");
  for (const TestUser& as : {TestUser{0, 0, "root"}, *u}) {
    INFO("launched by " << as.name << ", backend " << backend);
    ViewTree v(*u, as, backend);
    auto sp = v.t.spawn(
        v.args({"coder", "--", "/bin/sh", "-c", "cd /ctx/home/" + v.uid + "/agent/coder && touch up; exec sleep 30"}),
        v.as);
    REQUIRE(ctx::test::wait_for_file(v.t.root() + "/home/" + v.uid + "/agent/coder/up", ""));
    // No process of the sandbox holds a /dev/fuse descriptor: the one the
    // sandbox opened went to the supervisor.
    auto link = [](const std::string& p) {
      char buf[256] = {};
      ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
      return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
    };
    std::string our_pidns = link("/proc/self/ns/pid"), sandbox_mnt;
    for (int pid : ctx::test::processes_mentioning(v.t.root()))
      if (link("/proc/" + std::to_string(pid) + "/ns/pid") != our_pidns)
        sandbox_mnt = link("/proc/" + std::to_string(pid) + "/ns/mnt");
    REQUIRE_FALSE(sandbox_mnt.empty());
    int in_sandbox = 0, fuse_fds = 0;
    for (const auto& pid : ctx::test::names_in("/proc")) {
      if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
      if (link("/proc/" + pid + "/ns/mnt") != sandbox_mnt) continue;
      ++in_sandbox;
      for (const auto& fd : ctx::test::names_in("/proc/" + pid + "/fd"))
        if (link("/proc/" + pid + "/fd/" + fd) == "/dev/fuse") ++fuse_fds;
    }
    CHECK(in_sandbox >= 2);  // its init and the runtime
    CHECK(fuse_fds == 0);
    ::kill(sp.pid, SIGTERM);
    ctx::test::wait_command(sp, 30);
  }
}

// A machine whose /dev/fuse only root may open (mode 0600, as here before
// scripts/setup): in a mount namespace of the test's own, a file of mode
// 0600 takes the device's place, and the test user launches there.
TEST_CASE("where /dev/fuse cannot be used, the view is built at launch, with a warning; --require-view refuses",
          "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  ViewTree v(*u, *u);
  ctx::test::TempDir scratch;
  scratch.write("fuse", "", 0600);
  auto launch = [&](const std::string& flag) {
    std::string cmd = "mount --bind " + scratch.path() +
                      "/fuse /dev/fuse && exec setpriv --reuid=" + std::to_string(u->uid) +
                      " --regid=" + std::to_string(u->gid) + " --clear-groups " +
                      ctx::test::built("launcher/ctx-agent-run") + " --ctx-root " + v.t.root() + " " + flag +
                      " coder -- /bin/sh -c 'ls /ctx/tool; grep \" /ctx \" /proc/self/mountinfo | sed \"s/.* - //\" "
                      "| cut -d\" \" -f1; /ctx/tool/fs.read'";
    return ctx::test::run_command({"/usr/bin/unshare", "-m", "--propagation", "private", "/bin/sh", "-c", cmd});
  };
  RunResult r = launch("");
  INFO(r.out << r.err << r.warnings);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "fs.read\nfs.read.d\ntmpfs\nread-ran\n");
  CHECK(r.warnings.find("/dev/fuse cannot be used") != std::string::npos);
  CHECK(r.warnings.find("chmod 0666 /dev/fuse") != std::string::npos);
  CHECK(v.events().find("\"via\":\"exec\"") != std::string::npos);  // the direct call was recorded
  RunResult refused = launch("--require-view");
  INFO(refused.err);
  CHECK(refused.exit_code != 0);
  CHECK(refused.err.find("--require-view: /dev/fuse cannot be used") != std::string::npos);
  CHECK(refused.out.empty());
}

// A writer of a shared space (another agent of the same uid, say) swaps
// the space's tool/ for one of its own while the agent runs: through the
// view, its tools are still only the ones the agent may run, in both
// backends (the static view built the space name by name at launch).
TEST_CASE("a space's tool tier swapped in after launch is still the view's", "[root][userns]") {
  const std::string backend = GENERATE(as<std::string>{}, "fuse", "static");
  INFO("backend " << backend);
  ViewTree v = make_tree(backend);
  auto sp = v.t.spawn(v.args({"coder", "--", "/bin/sh", "-c",
                              "touch /ctx/home/" + v.uid + "/agent/coder/up; i=0; while [ ! -e /ctx/home/" + v.uid +
                                  "/agent/coder/go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; sleep 1; "
                                  "ls /ctx/shared/project-a/tool; /ctx/shared/project-a/tool/evil; echo rc=$?"}),
                      v.as);
  REQUIRE(ctx::test::wait_for_file(v.t.root() + "/home/" + v.uid + "/agent/coder/up", ""));
  const std::string space = v.t.root() + "/shared/project-a";
  REQUIRE(::rename((space + "/tool").c_str(), (space + "/tool.old").c_str()) == 0);
  v.t.write("ctx/shared/project-a/tool/evil", "#!/bin/sh\necho evil-ran\n", 0755);
  v.t.write("ctx/home/" + v.uid + "/agent/coder/go", "");
  RunResult r = ctx::test::wait_command(sp, 60);
  INFO(r.out << r.err);
  CHECK(r.out.find("evil") == std::string::npos);
  CHECK(r.out.find("rc=127") != std::string::npos);
}

// Directory walkers (find, os.walk) read the entry type of a listing: the
// view's must never say "file" for a directory, or they stop at the first
// level.
TEST_CASE("find walks the whole view", "[root][userns]") {
  const std::string backend = GENERATE(as<std::string>{}, "fuse", "static");
  INFO("backend " << backend);
  ViewTree v = make_tree(backend);
  RunResult r = v.sh("find /ctx/tool /ctx/model | sort");
  INFO(r.err);
  CHECK(r.out ==
        "/ctx/model\n/ctx/model/debug\n/ctx/model/debug/echo\n/ctx/model/debug/echo.d\n/ctx/model/debug/echo.d/id\n"
        "/ctx/model/main\n/ctx/tool\n/ctx/tool/fs.read\n/ctx/tool/fs.read.d\n/ctx/tool/fs.read.d/schema\n");
}

// docs/abi-policy.md, "What each class gates": agent:<x> read is the
// view's; no bind of the CTX tree goes around it, and nothing is writable.
TEST_CASE("another agent's control files are shown only with agent read, never writable", "[root][userns]") {
  const std::string backend = GENERATE(as<std::string>{}, "fuse", "static");
  INFO("backend " << backend);
  ViewTree v = make_tree(backend);
  const std::string cmd = "ls /ctx/agent; cat /ctx/agent/other.d/policy; echo x >> /ctx/agent/other.d/policy; echo end";
  RunResult without = v.sh(cmd);
  INFO(without.out << without.err);
  CHECK(without.exit_code == 0);
  CHECK(without.out == "coder.d\nend\n");
  CHECK(without.err.find("other.d/policy: No such file or directory") != std::string::npos);
  // A line binding the other agent's .d is that part of the view, which
  // it does not have: the launch fails.
  const std::string peer = v.t.root() + "/agent/other.d\t/peer\tro\tbind,nosuid,nodev\n";
  std::string mounts = ctx::test::read_file(v.t.root() + "/agent/coder.d/mount");
  v.t.agent("coder", {{"mount", mounts + peer}, {"policy", kPolicy}});
  RunResult bypass = v.sh("cat /peer/policy");
  CHECK(bypass.exit_code == 125);
  CHECK(bypass.err.find("agent view") != std::string::npos);
  CHECK(bypass.out.find("other_t") == std::string::npos);
  // With the rule: shown, read-only, and no socket.
  v.t.agent("coder", {{"mount", mounts + peer}, {"policy", std::string(kPolicy) + "allow coder_t agent:other read\n"}});
  RunResult with = v.sh(cmd + "; cat /peer/policy");
  INFO(with.out << with.err);
  CHECK(with.exit_code == 0);
  const std::string theirs = ctx::test::read_file(v.t.root() + "/agent/other.d/policy");
  CHECK(theirs.find("allow other_t tool:fs.write execute\n") != std::string::npos);
  CHECK(with.out == "coder.d\nother.d\n" + theirs + "end\n" + theirs);
  // Refused (EACCES by the mode bits over FUSE, EROFS in the static view),
  // and the file is unchanged.
  CHECK(with.err.find("cannot create /ctx/agent/other.d/policy") != std::string::npos);
  CHECK(ctx::test::read_file(v.t.root() + "/agent/other.d/policy") == theirs);
}

// The static view lists a directory, then binds its files one by one,
// while the supervisor replaces <name>.d/status and pid (a temporary file
// renamed over each) and any writer may do the same: a listed name that
// is gone by then, or a file renamed over between its clone and its
// attach (move_mount: ENOENT), failed the launch. Here a file of the
// agent's home (built name by name, like <name>.d/) are replaced in a
// loop while the agent starts, a hundred times; without the fix one to
// four launches in a hundred failed, in 7 runs of 10.
TEST_CASE("the static view is built while the tree's files are replaced", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"}});
  const std::string dir = t.root() + "/home/" + std::to_string(m.owner.uid) + "/agent/coder";
  std::vector<std::string> files;
  for (const char* f : {"notes", "plan", "todo"}) {
    t.write("ctx/home/" + std::to_string(m.owner.uid) + "/agent/coder/" + f, "0\n");
    files.push_back(dir + "/" + f);
  }
  // Killed and reaped on every way out.
  struct Replacer {
    pid_t pid = -1;
    ~Replacer() {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } replacer;
  replacer.pid = ::fork();
  REQUIRE(replacer.pid >= 0);
  if (replacer.pid == 0) {
    for (;;)
      for (const auto& f : files) {
        const std::string tmp = f + ".tmp";
        int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) ::close(fd);
        ::rename(tmp.c_str(), f.c_str());
      }
  }
  int failed = 0;
  std::string errors;
  for (int i = 0; i < 100; ++i) {
    RunResult r =
        t.launch({"--static-view", "coder", "--", "/bin/sh", "-c", "test -f /ctx/home/*/agent/coder/notes"}, m.as);
    if (r.exit_code != 0) ++failed, errors += r.err;
  }
  INFO(errors);
  CHECK(failed == 0);
}
