// Sessions as seeds 000, 001 and 003 shape them (docs/abi.md, "Sessions"):
// the files a launch keeps in its session directory, the by-cwd index,
// the agent home's data/, cache/ and log/, and the launches refused.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::lexists;
using ctx::test::RunResult;
using nlohmann::json;

namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

uid_t owner_of(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 ? st.st_uid : static_cast<uid_t>(-1);
}

// Agent coder with its home bound rw at /home/coder, and its session
// "review" holding a secret: the home's path and the mount table.
template <class Mode>
std::pair<std::string, std::string> secret_review(CtxTree& t, const Mode& m) {
  const std::string home = t.root() + "/home/" + std::to_string(m.owner.uid) + "/agent/coder";
  const std::string mounts = t.base_mounts() + home + "\t/home/coder\trw\tbind,nosuid,nodev\n";
  t.agent("coder", {{"mount", mounts}});
  REQUIRE(t.launch({"--session", "review", "coder", "--", "/bin/true"}, m.as).exit_code == 0);
  t.write("ctx/home/" + std::to_string(m.owner.uid) + "/agent/coder/session/review/messages.jsonl", "secret\n");
  return {home, mounts};
}

}  // namespace

TEST_CASE("session: a launch keeps created_at, updated_at, cwd, meta.json, context/, state and the by-cwd index",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"cwd", "/usr\n"}});
  const std::string home = t.root() + "/home/" + std::to_string(m.owner.uid) + "/agent/coder";
  const std::string s = home + "/session/default";
  RunResult r = t.launch({"coder", "--", "/probe", "ids"}, m.as);
  INFO(r.err << r.warnings);
  REQUIRE(r.exit_code == 0);
  for (const char* d : {"data", "cache", "log", "session/index/by-cwd"}) {
    INFO(d);
    CHECK(is_dir(home + "/" + d));
    CHECK(owner_of(home + "/" + d) == m.owner.uid);
  }
  CHECK(is_dir(s + "/context"));
  CHECK(owner_of(s) == m.owner.uid);
  const std::string created = ctx::test::read_file(s + "/created_at");
  CHECK(created.rfind("20", 0) == 0);
  CHECK(created.find("Z\n") == created.size() - 2);
  CHECK(ctx::test::read_file(s + "/updated_at").size() == created.size());
  CHECK(ctx::test::read_file(s + "/cwd") == "/usr\n");
  CHECK(ctx::test::read_file(s + "/state") == "done\n");
  json meta = json::parse(ctx::test::read_file(s + "/meta.json"));
  CHECK(meta["agent"] == "coder");
  CHECK(meta["session"] == "default");
  CHECK(meta["space"] == "home");
  CHECK(ctx::test::read_file(home + "/session/index/by-cwd/%2Fusr") == "default\n");
  CHECK(ctx::test::read_file(s + "/events.jsonl").find("\"type\":\"agent.start\"") != std::string::npos);
  // messages.jsonl and latest.md are the runtime's: the launcher makes neither.
  CHECK_FALSE(lexists(s + "/messages.jsonl"));
  CHECK_FALSE(lexists(s + "/latest.md"));

  // Another session in the same cwd takes the index entry; a failed run
  // ends "failed"; created_at of a resumed session stays.
  ::sleep(1);
  RunResult other = t.launch({"--session", "review", "coder", "--", "/probe", "exit:3"}, m.as);
  CHECK(other.exit_code == 3);
  CHECK(ctx::test::read_file(home + "/session/review/state") == "failed\n");
  CHECK(ctx::test::read_file(home + "/session/index/by-cwd/%2Fusr") == "review\n");
  REQUIRE(t.launch({"coder", "--", "/probe", "ids"}, m.as).exit_code == 0);
  CHECK(ctx::test::read_file(s + "/created_at") == created);
  CHECK(ctx::test::read_file(s + "/updated_at") > created);
  CHECK(ctx::test::read_file(home + "/session/index/by-cwd/%2Fusr") == "default\n");
}

TEST_CASE("session: the name 'index' is refused before anything is made", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  RunResult r = t.launch({"--session", "index", "coder", "--", "/probe", "ids"}, m.as);
  CHECK(r.exit_code == 2);
  CHECK(r.err.find("--session index: 'index' is reserved") != std::string::npos);
  CHECK_FALSE(lexists(t.root() + "/agent/coder.d/status"));
  CHECK_FALSE(lexists(t.root() + "/home/" + std::to_string(m.owner.uid) + "/agent/coder/session"));
}

TEST_CASE("session: a launch that cannot make its session directory is refused and writes no record",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  const std::string rel = "ctx/home/" + std::to_string(m.owner.uid) + "/agent/coder/session";
  t.mkdir(rel);
  // A symlink where the session directory goes: never followed.
  REQUIRE(::symlink("/tmp",
                    (t.root() + "/home/" + std::to_string(m.owner.uid) + "/agent/coder/session/default").c_str()) == 0);
  RunResult r = t.launch({"coder", "--", "/probe", "ids"}, m.as);
  INFO(r.err);
  CHECK(r.exit_code == 125);
  CHECK(r.err.find(t.root() + "/home/" + std::to_string(m.owner.uid) + "/agent/coder/session/default") !=
        std::string::npos);
  CHECK(r.err.find("the agent was not started") != std::string::npos);
  CHECK_FALSE(lexists(t.root() + "/agent/coder.d/status"));
  CHECK_FALSE(lexists(t.root() + "/agent/coder.d/pid"));
  CHECK_FALSE(lexists(t.root() + "/agent/coder.d/log"));
  CHECK_FALSE(lexists("/tmp/created_at"));
}

TEST_CASE("session policy: a launch into a session its policy does not grant is refused and runs nothing",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string sessions = t.root() + "/home/" + std::to_string(m.owner.uid) + "/agent/coder/session";
  const std::string policy = t.root() + "/agent/coder.d/policy";
  // No session rule: a new session is refused, nothing is made or run.
  t.agent("coder", {{"policy", "allow coder_t tool:fs.read execute\n"}}, true, false);
  RunResult none = t.launch({"coder", "--", "/bin/sh", "-c", "echo ran"}, m.as);
  CHECK(none.exit_code == 125);
  CHECK(none.out.empty());
  CHECK(none.err == "ctx-agent-run: " + policy +
                        ": EACCES: creating session default needs 'allow coder_t session:default write'; add that "
                        "line to the policy (the agent was not started)\n");
  CHECK_FALSE(lexists(sessions + "/default"));
  CHECK_FALSE(lexists(t.root() + "/agent/coder.d/status"));
  // write makes it; resuming it needs resume.
  t.agent("coder", {{"policy", "allow coder_t session:default write\n"}}, true, false);
  RunResult made = t.launch({"coder", "--", "/bin/sh", "-c", "echo ran"}, m.as);
  INFO(made.err);
  CHECK(made.exit_code == 0);
  CHECK(made.out == "ran\n");
  RunResult again = t.launch({"coder", "--", "/bin/sh", "-c", "echo ran"}, m.as);
  CHECK(again.exit_code == 125);
  CHECK(again.out.empty());
  CHECK(again.err.find("resuming session default needs 'allow coder_t session:default resume'") != std::string::npos);
  CHECK(ctx::test::read_file(sessions + "/default/state") == "done\n");
  // Another session's rules grant nothing here.
  RunResult other = t.launch({"--session", "review", "coder", "--", "/bin/sh", "-c", "echo ran"}, m.as);
  CHECK(other.exit_code == 125);
  CHECK(other.err.find("'allow coder_t session:review write'") != std::string::npos);
  CHECK_FALSE(lexists(sessions + "/review"));
}

// docs/abi-policy.md, "session": the agent's other sessions are masked
// wherever a bind shows them unless its policy has session:<name> read.
TEST_CASE("session policy: another session is hidden in the sandbox without session:<name> read", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const auto [home, mounts] = secret_review(t, m);
  // Files in session/ are no sessions: nothing to mask, no refusal.
  t.write("ctx/home/" + std::to_string(m.owner.uid) + "/agent/coder/session/.keep", "");
  t.write("ctx/home/" + std::to_string(m.owner.uid) + "/agent/coder/session/notes", "");
  const std::string look =
      "cat /home/coder/session/review/messages.jsonl; cat /home/coder/session/review/state; "
      "ls /home/coder/session/review | wc -l; echo > /home/coder/session/review/x 2>/dev/null && echo wrote; "
      "cat /home/coder/session/default/state";
  RunResult hidden = t.launch({"coder", "--", "/bin/sh", "-c", look}, m.as);
  INFO(hidden.out << hidden.err);
  CHECK(hidden.exit_code == 0);
  CHECK(hidden.out == "0\nrunning\n");
  CHECK(hidden.out.find("secret") == std::string::npos);
  // With the read rule the session shows.
  t.agent("coder", {{"mount", mounts}, {"policy", "allow coder_t session:review read\n"}});
  RunResult shown = t.launch({"coder", "--", "/bin/sh", "-c", "cat /home/coder/session/review/messages.jsonl"}, m.as);
  INFO(shown.err);
  CHECK(shown.out == "secret\n");
  // Under iso uid as well: the runtime runs as a uid delegated to the
  // owner (2000001 lies in the range scripts/setup delegates to the test
  // user), and the list is made the same way.
  t.agent("coder", {{"mount", mounts}, {"iso", "uid\n"}, {"uid", "2000001\n"}, {"gid", "2000002\n"}});
  RunResult iso = t.launch(
      {"coder", "--", "/bin/sh", "-c", "id -u; ls /home/coder/session; cat /home/coder/session/review/messages.jsonl"},
      m.as);
  INFO(iso.out << iso.err);
  CHECK(iso.exit_code != 0);  // cat: the session is not there
  CHECK(iso.out == "2000001\ndefault\nindex\n");
  CHECK(iso.err.find("/home/coder/session/review/messages.jsonl: No such file or directory") != std::string::npos);
}

// A mask is a mount over a directory, and a mount moves with a directory
// above it that is renamed: the agent moved session/ to s2 and read the
// other session there at its next launch, whose masks were planned from
// session/ (docs/security.md). session/ is the list of its sessions now,
// a mount point, which cannot be renamed.
TEST_CASE("session policy: an agent cannot carry a hidden session away by renaming the directory above it",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const auto [home, mounts] = secret_review(t, m);
  RunResult mv = t.launch(
      {"coder", "--", "/bin/sh", "-c", "mv /home/coder/session /home/coder/s2 2>&1; rmdir /home/coder/session 2>&1"},
      m.as);
  INFO(mv.out << mv.err);
  CHECK(mv.out.find("Device or resource busy") != std::string::npos);
  CHECK(is_dir(home + "/session/review"));
  CHECK_FALSE(lexists(home + "/s2"));
  RunResult next =
      t.launch({"coder", "--", "/bin/sh", "-c", "cat /home/coder/s2/review/messages.jsonl; echo ran"}, m.as);
  INFO(next.err);
  CHECK(next.exit_code == 0);
  CHECK(next.out.find("secret") == std::string::npos);
  CHECK(next.out.find("ran") != std::string::npos);
}

// The agent owns its home's session directory. A launch that could not
// list it would hide none of the sessions its policy hides and take a
// resume for a new session (write, not resume). The agent cannot chmod it
// from inside any more (the list over it is read-only), but its owner
// can, or an agent of an older launcher did: an unprivileged launch
// refuses it; root lists it all the same.
TEST_CASE("session policy: an agent that makes its sessions unlistable gets neither a hidden session nor a resume",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const auto [home, mounts] = secret_review(t, m);
  RunResult locked = t.launch({"coder", "--", "/bin/sh", "-c", "chmod 0311 /home/coder/session 2>&1"}, m.as);
  INFO(locked.out << locked.err);
  CHECK(locked.exit_code != 0);
  CHECK(locked.out.find("Read-only file system") != std::string::npos);
  REQUIRE(::chmod((home + "/session").c_str(), 0311) == 0);
  const std::string refusal = "ctx-agent-run: " + home +
                              "/session: EACCES: the agent's sessions cannot be listed, so the launch cannot hide "
                              "those its policy does not let it read; give the agent's owner read and search rights "
                              "there again (chmod u+rx)\n";
  // It would open its session directory again and read the other one.
  const std::string look =
      "chmod 0755 /home/coder/session; cat /home/coder/session/review/messages.jsonl 2>/dev/null; echo ran";
  RunResult r = t.launch({"coder", "--", "/bin/sh", "-c", look}, m.as);
  INFO(r.out << r.err);
  CHECK(r.out.find("secret") == std::string::npos);
  if (m.privileged) {
    // Root lists it, and shows only what the list keeps.
    CHECK(r.exit_code == 0);
    CHECK(r.out == "ran\n");
  } else {
    CHECK(r.exit_code == 125);
    CHECK(r.err == refusal);
  }
  // Session default exists: launching it again is a resume, which write
  // alone does not grant.
  t.agent("coder", {{"mount", mounts}, {"policy", "allow coder_t session:default write\n"}}, true, false);
  RunResult resumed = t.launch({"coder", "--", "/bin/sh", "-c", "echo ran"}, m.as);
  INFO(resumed.err);
  CHECK(resumed.exit_code == 125);
  CHECK(resumed.out.empty());
  if (m.privileged)
    CHECK(resumed.err.find("resuming session default needs 'allow coder_t session:default resume'") !=
          std::string::npos);
  else
    CHECK(resumed.err == refusal);
  REQUIRE(::chmod((home + "/session").c_str(), 0755) == 0);
}

// docs/security.md, "Sessions an agent moves away": a rw bind of the
// home showed a session made while the agent ran (another launch's), and
// the agent could move it into its own session and keep it. The home's
// session/ is a list of what the agent may see now, made at launch.
TEST_CASE("session policy: a session made while the agent runs stays hidden and cannot be carried into its own",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const auto [home, mounts] = secret_review(t, m);
  const std::string rel = "ctx/home/" + std::to_string(m.owner.uid) + "/agent/coder/";
  const std::string look =
      "while [ ! -e /home/coder/data/go ]; do sleep 0.05; done; cat /home/coder/session/late/messages.jsonl 2>&1; "
      "ls /home/coder/session; mv /home/coder/session/late /home/coder/session/default/kept 2>&1; echo end";
  auto sp = t.spawn({"coder", "--", "/bin/sh", "-c", look}, m.as);
  REQUIRE(ctx::test::wait_for_file(home + "/session/default/state", "running\n"));
  t.write(rel + "session/late/messages.jsonl", "secret\n");
  t.write(rel + "data/go", "");
  RunResult r = ctx::test::wait_command(sp);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("secret") == std::string::npos);
  CHECK(r.out.find("cat: /home/coder/session/late/messages.jsonl: No such file or directory\ndefault\nindex\n") == 0);
  CHECK(r.out.find("\nend\n") != std::string::npos);
  CHECK_FALSE(lexists(home + "/session/default/kept"));
  CHECK(ctx::test::read_file(home + "/session/late/messages.jsonl") == "secret\n");
}

// docs/security.md, "Sessions an agent moves away": an agent made
// session/<T> through a rw bind of its home and filled it; a later
// `--session T` took it for a resume of a session that was never
// launched. Nothing can be made in the list of its sessions.
TEST_CASE("session policy: an agent cannot make a session ahead for a later launch to take", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const auto [home, mounts] = secret_review(t, m);
  RunResult plant = t.launch({"coder", "--", "/bin/sh", "-c",
                              "mkdir -p /home/coder/session/next 2>&1; echo planted > "
                              "/home/coder/session/next/messages.jsonl 2>&1; echo end"},
                             m.as);
  INFO(plant.out << plant.err);
  CHECK(plant.exit_code == 0);
  CHECK(plant.out.find("Read-only file system") != std::string::npos);
  CHECK_FALSE(lexists(home + "/session/next"));
  // A new session needs write only; a resume would need resume too.
  t.agent("coder", {{"mount", mounts}, {"policy", "allow coder_t session:next write\n"}}, true, false);
  RunResult next = t.launch({"--session", "next", "coder", "--", "/bin/sh", "-c",
                             "cat /home/coder/session/next/messages.jsonl 2>&1; echo end"},
                            m.as);
  INFO(next.out << next.err);
  CHECK(next.exit_code == 0);
  CHECK(next.out.find("planted") == std::string::npos);
  CHECK(next.out.find("end") != std::string::npos);
  // An agent whose launches all keep their session in a shared space has
  // no session/ in its home: the launch makes it, for the list to cover.
  const std::string uid = std::to_string(m.owner.uid);
  t.mkdir("ctx/shared/proj");
  t.mkdir("ctx/home/" + uid + "/agent/solo/data");
  const std::string solo = t.root() + "/home/" + uid + "/agent/solo";
  t.agent("solo", {{"mount", t.base_mounts() + solo + "\t/home/solo\trw\tbind,nosuid,nodev\n"},
                   {"policy", "allow solo_t shared:proj write\nallow solo_t session:next write\n"}});
  REQUIRE_FALSE(lexists(solo + "/session"));
  RunResult shared = t.launch({"--session-space", "proj", "solo", "--", "/bin/sh", "-c",
                               "ls -A /home/solo/session; mkdir /home/solo/session/next 2>&1; echo end"},
                              m.as);
  INFO(shared.out << shared.err);
  CHECK(shared.exit_code == 0);
  CHECK(shared.out.find("Read-only file system") != std::string::npos);
  CHECK(is_dir(solo + "/session"));
  CHECK(owner_of(solo + "/session") == m.owner.uid);
  CHECK_FALSE(lexists(solo + "/session/next"));
}

// docs/abi-policy.md, "session": a root at the agent's home showed all of
// its sessions at /session; it shows the list a bind of the home shows.
TEST_CASE("session policy: a root at the agent's home shows only the sessions the policy lets it see",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  const std::string rel = "ctx/home/" + uid + "/agent/coder";
  const std::string home = t.root() + "/home/" + uid + "/agent/coder";
  t.agent("coder", {{"root", home + "\n"}});
  for (const char* l : {"bin", "lib", "lib64", "sbin"}) {
    const std::string link = home + "/" + l;
    REQUIRE(::symlink((std::string("usr/") + l).c_str(), link.c_str()) == 0);
    REQUIRE(::lchown(link.c_str(), m.owner.uid, m.owner.gid) == 0);
  }
  REQUIRE(t.launch({"--session", "review", "coder", "--", "/bin/true"}, m.as).exit_code == 0);
  t.write(rel + "/session/review/messages.jsonl", "secret\n");
  RunResult r = t.launch({"coder", "--", "/bin/sh", "-c",
                          "ls /session; cat /session/review/messages.jsonl 2>&1; mkdir /session/x 2>&1; echo end"},
                         m.as);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("default\nindex\n") == 0);
  CHECK(r.out.find("secret") == std::string::npos);
  CHECK(r.out.find("Read-only file system") != std::string::npos);
  CHECK_FALSE(lexists(home + "/session/x"));
}

// docs/abi-policy.md, "session": a table that shows the CTX root (the
// agent view) and does not bind the agent's home gets the home from the
// view, which shows the current session and session/index and another
// session only with session:<name> read; both backends of the view.
TEST_CASE("session policy: the agent view hides another session without session:<name> read", "[root][userns]") {
  const std::string backend = GENERATE(as<std::string>{}, "fuse", "static");
  INFO("backend " << backend);
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  const std::string mounts = t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n";
  const std::string sessions =
      "allow coder_t session:a write\nallow coder_t session:a resume\nallow coder_t session:b write\n";
  t.agent("coder", {{"mount", mounts}, {"policy", sessions}});
  auto launch = [&](std::vector<std::string> args) {
    if (backend == "static") args.insert(args.begin(), "--static-view");
    return t.launch(args, m.as);
  };
  REQUIRE(launch({"--session", "b", "coder", "--", "/bin/true"}).exit_code == 0);
  t.write("ctx/home/" + uid + "/agent/coder/session/b/messages.jsonl", "secret\n");
  const std::string dir = "/ctx/home/" + uid + "/agent/coder/session";
  const std::string look = "ls " + dir + "; cat " + dir + "/b/messages.jsonl; ls -d " + dir + "/b; cat " + dir +
                           "/a/state; ls " + dir + "/index; echo end";
  RunResult hidden = launch({"--session", "a", "coder", "--", "/bin/sh", "-c", look});
  INFO(hidden.out << hidden.err << hidden.warnings);
  CHECK(hidden.exit_code == 0);
  CHECK(hidden.out == "a\nindex\nrunning\nby-cwd\nend\n");
  CHECK(hidden.out.find("secret") == std::string::npos);
  CHECK(hidden.err.find(dir + "/b/messages.jsonl: No such file or directory") != std::string::npos);
  CHECK(hidden.err.find(dir + "/b': No such file or directory") != std::string::npos);  // ls -d
  // With the read rule the session shows.
  t.agent("coder", {{"mount", mounts}, {"policy", sessions + "allow coder_t session:b read\n"}});
  RunResult shown = launch({"--session", "a", "coder", "--", "/bin/sh", "-c", look});
  INFO(shown.out << shown.err);
  CHECK(shown.exit_code == 0);
  CHECK(shown.out == "a\nb\nindex\nsecret\n" + dir + "/b\nrunning\nby-cwd\nend\n");
  // A shared session named b is not the home's b: the view shows the
  // home's sessions as others then (found by the list's attack review).
  t.mkdir("ctx/shared/proj");
  t.agent("coder", {{"mount", mounts}, {"policy", sessions + "allow coder_t shared:proj write\n"}});
  RunResult shared = launch({"--session-space", "proj", "--session", "b", "coder", "--", "/bin/sh", "-c",
                             "ls " + dir + "; cat " + dir + "/b/messages.jsonl 2>/dev/null; echo end"});
  INFO(shared.out << shared.err);
  CHECK(shared.exit_code == 0);
  CHECK(shared.out == "index\nend\n");
}

// docs/abi.md, "Shared sessions": --session-space P keeps the session in
// <ctx>/shared/P/agent/<name>/session/<s>/ instead of the agent's home.
TEST_CASE("shared session: --session-space keeps the session files, events.jsonl and the by-cwd entry in the space",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.mkdir("ctx/shared/proj");
  const std::string space = t.root() + "/shared/proj";
  const std::string mounts = t.base_mounts() + space + "\t/shared/proj\trw\tbind,nosuid,nodev\n";
  t.agent("coder", {{"cwd", "/usr\n"}, {"mount", mounts}, {"policy", "allow coder_t shared:proj write\n"}});
  const std::string home = t.root() + "/home/" + std::to_string(m.owner.uid) + "/agent/coder";
  const std::string s = space + "/agent/coder/session/review";
  RunResult r = t.launch({"--session-space", "proj", "--session", "review", "coder", "--", "/bin/sh", "-c",
                          "echo \"$CTX_SESSION $CTX_SESSION_SPACE $CTX_SESSION_DIR\"; cat \"$CTX_SESSION_DIR/state\""},
                         m.as);
  INFO(r.err << r.warnings);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "review proj /shared/proj/agent/coder/session/review\nrunning\n");
  CHECK(is_dir(s + "/context"));
  CHECK(owner_of(s) == m.owner.uid);
  CHECK(owner_of(space + "/agent/coder") == m.owner.uid);
  const std::string created = ctx::test::read_file(s + "/created_at");
  CHECK(created.rfind("20", 0) == 0);
  CHECK(ctx::test::read_file(s + "/updated_at").size() == created.size());
  CHECK(ctx::test::read_file(s + "/cwd") == "/usr\n");
  CHECK(ctx::test::read_file(s + "/state") == "done\n");
  json meta = json::parse(ctx::test::read_file(s + "/meta.json"));
  CHECK(meta["agent"] == "coder");
  CHECK(meta["session"] == "review");
  CHECK(meta["space"] == "shared:proj");
  CHECK(ctx::test::read_file(space + "/agent/coder/session/index/by-cwd/%2Fusr") == "review\n");
  CHECK(ctx::test::read_file(s + "/events.jsonl").find("\"type\":\"agent.start\"") != std::string::npos);
  // None of it in the home, nor the space's home tree (data/, cache/, log/).
  CHECK_FALSE(lexists(home + "/session/review"));
  CHECK_FALSE(lexists(home + "/session/index/by-cwd/%2Fusr"));
  CHECK_FALSE(lexists(space + "/agent/coder/data"));
  // Resuming it is the usual session:review resume; where no bind shows the
  // space, CTX_SESSION_DIR is not set.
  t.agent("coder", {{"cwd", "/usr\n"}, {"policy", "allow coder_t shared:proj write\n"}});
  RunResult again = t.launch({"--session-space", "proj", "--session", "review", "coder", "--", "/bin/sh", "-c",
                              "echo \"$CTX_SESSION_SPACE ${CTX_SESSION_DIR-unset}\""},
                             m.as);
  INFO(again.err);
  CHECK(again.exit_code == 0);
  CHECK(again.out == "proj unset\n");
  CHECK(ctx::test::read_file(s + "/created_at") == created);
  CHECK_FALSE(lexists(home + "/session/review"));
}

TEST_CASE("shared session: --session-space is refused without shared:<space> write or a space, before anything is made",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.mkdir("ctx/shared/proj");
  t.agent("coder");
  const std::string policy = t.root() + "/agent/coder.d/policy";
  RunResult r = t.launch({"--session-space", "proj", "coder", "--", "/bin/sh", "-c", "echo ran"}, m.as);
  CHECK(r.exit_code == 125);
  CHECK(r.out.empty());
  CHECK(r.err == "ctx-agent-run: " + policy +
                     ": EACCES: a session in shared space proj needs 'allow coder_t shared:proj write'; add that "
                     "line to the policy (the agent was not started)\n");
  CHECK_FALSE(lexists(t.root() + "/shared/proj/agent"));
  CHECK_FALSE(lexists(t.root() + "/agent/coder.d/status"));
  // shared:proj read is not enough.
  t.set_policy("coder", "allow coder_t shared:proj read\n");
  CHECK(t.launch({"--session-space", "proj", "coder", "--", "/bin/true"}, m.as).exit_code == 125);
  CHECK_FALSE(lexists(t.root() + "/shared/proj/agent"));
  // A space that does not exist: ENOENT with the fix.
  t.set_policy("coder", "allow coder_t shared:nosuch write\n");
  RunResult missing = t.launch({"--session-space", "nosuch", "coder", "--", "/bin/true"}, m.as);
  CHECK(missing.exit_code == 125);
  CHECK(missing.err == "ctx-agent-run: --session-space nosuch: " + t.root() +
                           "/shared/nosuch: ENOENT: no such shared space; make it with 'ctx init --shared nosuch' "
                           "(the agent was not started)\n");
  CHECK_FALSE(lexists(t.root() + "/shared/nosuch"));
  // Not a space name; not for an owned child.
  RunResult bad = t.launch({"--session-space", "../proj", "coder", "--", "/bin/true"}, m.as);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("--session-space ../proj: ") != std::string::npos);
  RunResult owned = t.launch({"--session-space", "proj", "--owned-by", "1", "coder", "--", "/bin/true"}, m.as);
  CHECK(owned.exit_code == 2);
  CHECK(owned.err.find("ENOTSUP") != std::string::npos);
  CHECK_FALSE(lexists(t.root() + "/agent/coder.d/status"));
  CHECK_FALSE(lexists(t.root() + "/home/" + std::to_string(m.owner.uid) + "/agent/coder/session"));
}

// Attack: whoever can write the space plants a symlink where the agent's
// session tree goes; a root supervisor must not make or write files there.
TEST_CASE("shared session: a symlink planted at shared/<space>/agent/<name> or its session/ is not followed",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.mkdir("ctx/shared/proj/agent");
  t.mkdir("decoy");
  const std::string decoy = t.dir().path() + "/decoy";
  const std::string agent = t.root() + "/shared/proj/agent/coder";
  t.agent("coder", {{"policy", "allow coder_t shared:proj write\n"}});
  for (const std::string& link : {agent, agent + "/session"}) {
    INFO(link);
    if (link != agent) {
      REQUIRE(::unlink(agent.c_str()) == 0);
      t.mkdir("ctx/shared/proj/agent/coder");
    }
    REQUIRE(::symlink(decoy.c_str(), link.c_str()) == 0);
    RunResult r = t.launch({"--session-space", "proj", "coder", "--", "/bin/sh", "-c", "echo ran"}, m.as);
    INFO(r.err);
    CHECK(r.exit_code == 125);
    CHECK(r.out.empty());
    CHECK(r.err.find("the agent was not started") != std::string::npos);
    CHECK(r.err.find(agent) != std::string::npos);
    CHECK_FALSE(lexists(decoy + "/session"));
    CHECK_FALSE(lexists(decoy + "/default"));
    CHECK_FALSE(lexists(decoy + "/index"));
    CHECK_FALSE(lexists(t.root() + "/agent/coder.d/status"));
  }
}
