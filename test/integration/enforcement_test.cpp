// Enforcement points that a mutation review (scripts/mutate) found held
// only by unit tests, or by one check no launch exercised: each is
// attacked here from a real launch, as root and as the test user where
// both apply, and checked by its exact message. docs/security.md,
// "Mutation check", lists which row of scripts/mutations.tsv each case
// catches.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;
using ctx::test::count_of;
using ctx::test::lexists;
using nlohmann::json;

namespace {

// Waits until a file exists and is not empty.
bool wait_nonempty(const std::string& path, int timeout_ms = 20000) {
  for (int waited = 0; waited < timeout_ms; waited += 20) {
    std::error_code ec;
    if (std::filesystem::file_size(path, ec) > 0 && !ec) return true;
    ::usleep(20000);
  }
  return false;
}

// A parent "coder" that sees /usr, the probe, the CTX root (ro, with the
// ctx helper) and its home (rw), and may create and start "rev"; as root
// it runs with the owner's own ids (iso shared), as children_test does.
struct Parent {
  ctx::test::LaunchMode m = ctx::test::launch_mode();
  CtxTree t{m.owner};
  std::string uid = std::to_string(m.owner.uid);

  explicit Parent(const std::string& extra_policy = "") {
    t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
    t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n" + t.root() + "/home/" +
                                    uid + "/agent/coder\t/ctx/home/" + uid + "/agent/coder\trw\tbind,nosuid,nodev\n"},
                      {"policy", "allow coder_t agent:rev create\nallow coder_t agent:rev start\n" + extra_policy},
                      {"iso", m.privileged ? "shared\n" : "userns\n"}});
  }
  RunResult sh(const std::string& script) { return t.launch({"coder", "--", "/bin/sh", "-c", script}, m.as, 90); }
  std::string rev_output() const {
    return t.root() + "/home/" + uid + "/agent/rev/session/default/output.log";
  }
};

const char* const kRevRequest =
    "{\"name\":\"rev\",\"label\":\"rev_t\",\"mount\":[[\"/usr\",\"/usr\",\"ro\"],[\"/probe\",\"/probe\",\"ro\"]]}";

}  // namespace

// docs/security.md, issue 15: an owned child runs only with --owned-by
// equal to its parent process, which must be the supervisor the parent's
// .d/pid names. The owner's own shell passes the first comparison
// (getppid()) by construction; only the .d/pid comparison refuses it.
TEST_CASE("enforcement: --owned-by naming the caller's own shell is refused by the parent's .d/pid",
          "[root][userns]") {
  Parent p;
  p.t.agent("rev", {{"parent", "agent:coder session:default\n"}, {"life", "owned\n"}});
  // The parent runs, so coder.d/pid names a live supervisor.
  ctx::test::Spawned coder = p.t.spawn({"coder", "--", "/bin/sh", "-c", "sleep 60"}, p.m.as);
  REQUIRE(wait_nonempty(p.t.root() + "/agent/coder.d/pid"));
  const std::string supervisor = ctx::test::read_file(p.t.root() + "/agent/coder.d/pid");
  // The launch is a child of the shell, so getppid() is $$.
  RunResult r = ctx::test::run_command(
      {"/bin/sh", "-c",
       "echo $$; " + ctx::test::built("launcher/ctx-agent-run") + " --ctx-root " + p.t.root() +
           " --owned-by $$ rev -- /probe ids; echo rc=$?"},
      p.m.as);
  REQUIRE(::kill(coder.pid, SIGTERM) == 0);
  ctx::test::wait_command(coder, 30);
  INFO(r.out << r.err);
  const std::string shell = r.out.substr(0, r.out.find('\n'));
  REQUIRE_FALSE(shell.empty());
  CHECK(supervisor != shell + "\n");
  CHECK(r.out == shell + "\nrc=125\n");
  CHECK(r.err == "ctx-agent-run: " + p.t.root() +
                     "/agent/rev.d/parent:1: EPERM: rev is owned by agent coder (life owned): start it from coder "
                     "(ctx agent start rev), so that it is cancelled with its parent; --owned-by " +
                     shell + " is not the supervisor coder.d/pid names; or remove rev.d/parent to run it as an agent "
                             "of its own\n");
  CHECK_FALSE(lexists(p.rev_output()));
  CHECK_FALSE(lexists(p.t.root() + "/agent/rev.d/status"));
}

// A child's files are the owner's to edit after create. One that gains a
// mount line its parent does not see (with the mount rule it needs: mount
// rules are judged by the table) is refused when the parent starts it;
// nothing runs.
TEST_CASE("enforcement: a child's mount file widened after create is refused at start", "[root][userns]") {
  Parent p("allow coder_t mount:/hostetc read\n");
  RunResult made = p.sh(std::string("/ctx/bin/ctx agent create '") + kRevRequest + "'");
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  const std::string mount = ctx::test::read_file(p.t.root() + "/agent/rev.d/mount");
  const std::string policy = ctx::test::read_file(p.t.root() + "/agent/rev.d/policy");
  const std::size_t line = static_cast<std::size_t>(std::count(mount.begin(), mount.end(), '\n')) + 1;
  p.t.write("ctx/agent/rev.d/mount", mount + "/etc\t/hostetc\tro\tbind,nosuid,nodev\n");
  p.t.write("ctx/agent/rev.d/policy", policy + "allow rev_t mount:/hostetc read\n");
  RunResult start = p.sh("/ctx/bin/ctx agent start rev -- /probe read:/hostetc/hostname");
  INFO(start.out << start.err);
  CHECK(start.exit_code == 13);
  json a = json::parse(start.err.substr(0, start.err.find('\n')));
  CHECK(a["reason"] == "mount_not_visible");
  CHECK(a["message"] == "rev: " + p.t.root() + "/agent/rev.d/mount:" + std::to_string(line) +
                            ": /etc -> /hostetc: EACCES: not visible to the parent (no parent mount shows /etc); "
                            "remove the line or create the child again from coder");
  CHECK_FALSE(lexists(p.rev_output()));
}

// docs/security.md, "Links an agent plants for its next launch": any
// source reached through a symbolic link is refused, not only the home's
// data/ (which the session's start refuses first). The agent plants a
// link in its rw bind where the table names a directory; the next
// launch is refused, naming the source, and runs nothing.
TEST_CASE("enforcement: a symbolic link in a table's source is refused anywhere on its path", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.mkdir("secret");
  t.write("secret/key", "owner-only\n");
  t.mkdir("work/out");
  const std::string work = t.dir().path() + "/work";
  const std::string mounts =
      t.base_mounts() + work + "\t/work\trw\tbind,nosuid,nodev\n" + work + "/out\t/out\tro\tbind,nosuid,nodev\n";
  t.agent("coder", {{"mount", mounts}});
  RunResult plant = t.launch(
      {"coder", "--", "/bin/sh", "-c", "rmdir /work/out && ln -s " + t.dir().path() + "/secret /work/out && echo planted"},
      m.as);
  INFO(plant.out << plant.err);
  REQUIRE(plant.out == "planted\n");
  const std::string refused = "source " + work + "/out: ELOOP: reaches through a symbolic link, which a launch never " +
                              "follows (a link in a directory the agent can write would choose its next launch's " +
                              "mounts); name the real path (realpath " + work + "/out)";
  RunResult next = t.launch({"coder", "--", "/bin/sh", "-c", "cat /out/key; echo ran"}, m.as);
  INFO(next.out << next.err);
  CHECK(next.exit_code == 125);
  CHECK(next.out.empty());
  CHECK(next.err.find("coder.d/mount:4: " + work + "/out -> /out: " + refused) != std::string::npos);
  // A link higher up the path: the table names a directory below it.
  REQUIRE(::unlink((work + "/out").c_str()) == 0);
  t.mkdir("real/sub");
  REQUIRE(::symlink((t.dir().path() + "/real").c_str(), (t.dir().path() + "/linked").c_str()) == 0);
  const std::string via = t.dir().path() + "/linked/sub";
  t.agent("coder", {{"mount", t.base_mounts() + via + "\t/sub\tro\tbind,nosuid,nodev\n"}});
  RunResult up = t.launch({"coder", "--", "/bin/sh", "-c", "echo ran"}, m.as);
  INFO(up.out << up.err);
  CHECK(up.exit_code == 125);
  CHECK(up.out.empty());
  CHECK(up.err.find("coder.d/mount:3: " + via + " -> /sub: source " + via +
                    ": ELOOP: reaches through a symbolic link") != std::string::npos);
}

// DESIGN.md 4b, identity entitlement: ctx check run as root refuses what
// a root launch refuses, uid and gid as well as groups, with the same
// sentence, each refused id once (a launch names only the first); the
// same file owned by root is root's decision.
TEST_CASE("enforcement: ctx check run as root reports a uid and a gid the owner is not entitled to", "[root]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string owner = std::to_string(m.owner.uid);
  const std::string mounts = t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n";
  t.write("ctx/agent/coder", "#!/bin/sh\n", 0755);
  auto check = [&] { return ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"}); };
  const std::string tail = "; a root launch gives an agent only ids its owner is entitled to unless root owns the file: ";
  const std::string uid0 = "coder.d/uid: EPERM: uid 0 is neither the owner (" + owner +
                           ") nor in the owner's /etc/subuid ranges" + tail + "write " + owner +
                           ", delegate the uid to the owner in /etc/subuid, or have root own coder.d/uid";
  const std::string group0 = "coder.d/groups: EPERM: gid 0 is not the owner's primary group (" +
                             std::to_string(m.owner.gid) + "), not a group uid " + owner +
                             " is a member of, and not in uid " + owner + "'s /etc/subgid ranges" + tail +
                             "remove it, add the owner to the group, or have root own coder.d/groups";
  // Two refused ids: the check names each once; the launch names the first.
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "0\n"}, {"groups", "0\n"}, {"mount", mounts}});
  RunResult c = check();
  INFO(c.out << c.err);
  CHECK(c.exit_code != 0);
  CHECK(count_of(c.out, uid0 + "\n") == 1);
  CHECK(count_of(c.out, group0 + "\n") == 1);
  CHECK(c.out.find("\n2 errors, ") != std::string::npos);
  RunResult l = t.launch({"coder", "--", "/probe", "ids"}, m.as);
  CHECK(l.exit_code == 125);
  CHECK(l.err == "ctx-agent-run: " + uid0 + "\n");
  // gid 42 under iso shared.
  REQUIRE(::unlink((t.root() + "/agent/coder.d/groups").c_str()) == 0);
  t.agent("coder", {{"iso", "shared\n"}, {"uid", owner + "\n"}, {"gid", "42\n"}, {"mount", mounts}});
  RunResult g = check();
  INFO(g.out << g.err);
  CHECK(g.exit_code != 0);
  CHECK(g.out.find("coder.d/gid: EPERM: gid 42 is not the owner's primary group (" + std::to_string(m.owner.gid) +
                   "), not a group uid " + owner + " is a member of, and not in uid " + owner +
                   "'s /etc/subgid ranges" + tail) != std::string::npos);
  CHECK(g.out.find("coder.d/uid: EPERM") == std::string::npos);
  // Root's own files decide: nothing refused.
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "0\n"}, {"mount", mounts}});
  REQUIRE(::chown((t.root() + "/agent/coder.d/uid").c_str(), 0, 0) == 0);
  RunResult ok = check();
  INFO(ok.out << ok.err);
  CHECK(ok.exit_code == 0);
  CHECK(ok.out.find("EPERM") == std::string::npos);
}

// docs/abi-policy.md, "session": a table that binds the agent's home, or
// only its session/ directory, shows there only the list of sessions the
// agent may see (the launcher's list over the bind, a mechanism apart
// from the view's rule): another session is absent; with
// session:<name> read it shows.
TEST_CASE("enforcement: a bind of the agent's home or of its session/ hides its other sessions", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string rel = "ctx/home/" + std::to_string(m.owner.uid) + "/agent/coder";
  const std::string home = t.dir().path() + "/" + rel;
  const std::string mounts = t.base_mounts() + home + "\t/home/coder\trw\tbind,nosuid,nodev\n" + home +
                             "/session\t/sessions\tro\tbind,nosuid,nodev\n";
  t.agent("coder", {{"mount", mounts}});
  REQUIRE(t.launch({"--session", "review", "coder", "--", "/bin/true"}, m.as).exit_code == 0);
  t.write(rel + "/session/review/messages.jsonl", "secret\n");
  const std::string look =
      "cat /home/coder/session/review/messages.jsonl /sessions/review/messages.jsonl; "
      "ls -A /home/coder/session/review /sessions/review; cat /sessions/default/state; echo end";
  RunResult hidden = t.launch({"coder", "--", "/bin/sh", "-c", look}, m.as);
  INFO(hidden.out << hidden.err);
  CHECK(hidden.exit_code == 0);
  CHECK(hidden.out == "running\nend\n");
  CHECK(hidden.err.find("ls: cannot access '/home/coder/session/review': No such file or directory") !=
        std::string::npos);
  CHECK(hidden.err.find("ls: cannot access '/sessions/review': No such file or directory") != std::string::npos);
  CHECK(hidden.err.find("/home/coder/session/review/messages.jsonl: No such file or directory") != std::string::npos);
  CHECK(hidden.err.find("/sessions/review/messages.jsonl: No such file or directory") != std::string::npos);
  t.agent("coder", {{"mount", mounts}, {"policy", "allow coder_t session:review read\n"}});
  RunResult shown = t.launch(
      {"coder", "--", "/bin/sh", "-c", "cat /home/coder/session/review/messages.jsonl /sessions/review/messages.jsonl"},
      m.as);
  INFO(shown.err);
  CHECK(shown.out == "secret\nsecret\n");
}

// docs/view.md: in the agent view a tool's .d/ shows only name,
// description, schema, cap and status, a model's only id, driver, cap,
// default and status, and an agent's .d/ only its regular files: never
// a policy, a log, an env or anything else its owner keeps there. Both
// backends, a tool of the user tier too.
TEST_CASE("enforcement: a .d/ in the agent view shows only the files its rule lists", "[root][userns]") {
  const std::string backend = GENERATE(as<std::string>{}, "fuse", "static");
  INFO("backend " << backend);
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  t.write("ctx/tool/fs.read", "#!/bin/sh\n", 0755);
  for (const char* f : {"name", "description", "schema", "cap", "status", "log", "env", "notes"})
    t.write(std::string("ctx/tool/fs.read.d/") + f, "x\n");
  t.write("ctx/tool/fs.read.d/policy", "allow coder_t tool:fs.read execute\n");
  t.write("ctx/tool/fs.read.d/schema.d/f", "x\n");
  t.write("ctx/home/" + uid + "/tool/mine", "#!/bin/sh\n", 0755);
  for (const char* f : {"schema", "log", "policy.bak"}) t.write("ctx/home/" + uid + "/tool/mine.d/" + f, "x\n");
  t.write("ctx/model/debug/echo", "#!/bin/sh\n", 0755);
  for (const char* f : {"id", "driver", "cap", "default", "status", "env", "log", "notes"})
    t.write(std::string("ctx/model/debug/echo.d/") + f, "x\n");
  t.write("ctx/model/debug/echo.d/policy", "allow coder_t model:debug/echo use\n");
  t.agent("rev", {{"parent", "agent:coder session:default\n"}, {"life", "owned\n"}});
  t.write("ctx/agent/rev.d/kept/notes", "x\n");
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"},
                    {"policy", "allow coder_t tool:fs.read execute\nallow coder_t tool:mine execute\n"
                               "allow coder_t model:debug/echo use\n"}});
  std::vector<std::string> args{"coder", "--", "/bin/sh", "-c",
                                "cd /ctx; ls -A tool/fs.read.d home/" + uid +
                                    "/tool/mine.d model/debug/echo.d agent/rev.d; "
                                    "cat tool/fs.read.d/policy tool/fs.read.d/log model/debug/echo.d/env "
                                    "agent/rev.d/kept/notes; echo end"};
  if (backend == "static") args.insert(args.begin(), "--static-view");
  RunResult r = t.launch(args, m.as);
  INFO(r.out << r.err << r.warnings);
  CHECK(r.exit_code == 0);
  CHECK(r.out == "agent/rev.d:\ngid\niso\nlabel\nlife\nmount\nowner\nparent\npolicy\nroot\n\n"
                 "home/" + uid + "/tool/mine.d:\nschema\n\n"
                 "model/debug/echo.d:\ncap\ndefault\ndriver\nid\nstatus\n\n"
                 "tool/fs.read.d:\ncap\ndescription\nname\nschema\nstatus\nend\n");
  for (const char* hidden :
       {"tool/fs.read.d/policy", "tool/fs.read.d/log", "model/debug/echo.d/env", "agent/rev.d/kept/notes"})
    CHECK(r.err.find(std::string(hidden) + ": No such file or directory") != std::string::npos);
}
