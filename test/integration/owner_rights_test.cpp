// A root launch writes only where the agent's owner may (docs/security.md,
// "Root writes only where the owner may"): the supervisor makes and writes
// the agent's files with the owner's file-system ids, so a shared space or
// a session of another user stays untouched, and what it makes belongs to
// the owner, never to root.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::lexists;
using ctx::test::RunResult;

namespace {

// Another user, by number only (nothing is added to the machine): nobody.
constexpr uid_t kOther = 65534;
constexpr gid_t kOtherGid = 65534;

// One line for dir and each entry below it, sorted: path, type and mode,
// owner, group, mtime in ns, and the content of a regular file or the
// target of a link.
std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> paths{dir};
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) paths.push_back(e.path().string());
  std::vector<std::string> out;
  for (const std::string& p : paths) {
    struct stat st {};
    REQUIRE(::lstat(p.c_str(), &st) == 0);
    std::string line = p.substr(dir.size()) + " " + std::to_string(st.st_mode) + " " + std::to_string(st.st_uid) + ":" +
                       std::to_string(st.st_gid) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
                       std::to_string(st.st_mtim.tv_nsec);
    if (S_ISREG(st.st_mode)) line += " [" + ctx::test::read_file(p) + "]";
    if (S_ISLNK(st.st_mode)) line += " -> " + std::filesystem::read_symlink(p).string();
    out.push_back(line);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void own(const std::string& path, uid_t uid, gid_t gid, mode_t mode) {
  REQUIRE(::lchown(path.c_str(), uid, gid) == 0);
  REQUIRE(::chmod(path.c_str(), mode) == 0);
}

// Every entry below dir (and dir) belongs to uid:gid.
void all_owned_by(const std::string& dir, uid_t uid, gid_t gid) {
  struct stat top {};
  REQUIRE(::lstat(dir.c_str(), &top) == 0);
  CHECK(top.st_uid == uid);
  CHECK(top.st_gid == gid);
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    struct stat st {};
    REQUIRE(::lstat(e.path().c_str(), &st) == 0);
    INFO(e.path().string());
    CHECK(st.st_uid == uid);
    CHECK(st.st_gid == gid);
  }
}

// The attack's space: shared/wspace of another user, 0700, with a 0600
// file; the agent's owner grants itself shared:wspace write.
struct OtherSpace {
  ctx::test::LaunchMode m = ctx::test::launch_mode();
  CtxTree t{m.owner};
  std::string space = t.root() + "/shared/wspace";

  OtherSpace() {
    t.mkdir("ctx/shared/wspace");
    t.write("ctx/shared/wspace/notes.txt", "private\n", 0600);
    t.agent("coder", {{"policy", "allow coder_t shared:wspace write\n"}});
  }

  std::string refusal() const {
    const std::string uid = std::to_string(m.owner.uid);
    return "ctx-agent-run: --session-space wspace: " + space + ": EACCES: the agent's owner (uid " + uid +
           ") may not write this shared space, and a launch writes only where its owner may; have the space's owner "
           "give uid " +
           uid + " write access (mode or group), or choose another space (the agent was not started)\n";
  }
};

}  // namespace

// Attack: the owner names another user's private space; the root
// supervisor made agent/coder/session/... in it.
TEST_CASE("a launch into a shared space its owner may not write is refused and changes nothing there",
          "[root][userns]") {
  OtherSpace o;
  own(o.space + "/notes.txt", kOther, kOtherGid, 0600);
  own(o.space, kOther, kOtherGid, 0700);
  const std::vector<std::string> before = listing(o.space);
  RunResult r = o.t.launch({"--session-space", "wspace", "coder", "--", "/bin/sh", "-c", "echo ran"}, o.m.as);
  CHECK(r.exit_code == 125);
  CHECK(r.out.empty());
  CHECK(r.err == o.refusal());
  CHECK(listing(o.space) == before);
  CHECK_FALSE(lexists(o.space + "/agent"));
  CHECK_FALSE(lexists(o.t.root() + "/agent/coder.d/status"));
  CHECK_FALSE(lexists(o.t.root() + "/home/" + std::to_string(o.m.owner.uid) + "/agent/coder/session"));
}

// Attack: the other user's session in its space; the root supervisor
// replaced its state, cwd, meta.json and updated_at with root's files and
// appended to its 0600 events.jsonl.
TEST_CASE("another user's session in a shared space stays untouched by a launch of the owner's agent",
          "[root][userns]") {
  OtherSpace o;
  const std::string s = "ctx/shared/wspace/agent/coder/session/default";
  o.t.mkdir(s + "/context");
  o.t.mkdir("ctx/shared/wspace/agent/coder/session/index");
  for (const char* f : {"state", "cwd", "meta.json", "updated_at", "created_at"})
    o.t.write(s + "/" + f, std::string("theirs: ") + f + "\n", 0644);
  o.t.write(s + "/events.jsonl", "{\"type\":\"theirs\"}\n", 0600);
  for (const auto& e : std::filesystem::recursive_directory_iterator(o.space))
    REQUIRE(::lchown(e.path().c_str(), kOther, kOtherGid) == 0);
  // Private, as in the attack: refused before anything is made.
  own(o.space, kOther, kOtherGid, 0700);
  const std::vector<std::string> before = listing(o.space);
  RunResult r = o.t.launch({"--session-space", "wspace", "coder", "--", "/bin/sh", "-c", "echo ran"}, o.m.as);
  CHECK(r.exit_code == 125);
  CHECK(r.out.empty());
  CHECK(r.err == o.refusal());
  CHECK(listing(o.space) == before);

  // A space the owner may write, with the other user's session in it
  // readable but not writable: every directory and file is made as the
  // owner, so the first one is refused and nothing changes.
  own(o.space, kOther, kOtherGid, 0777);
  const std::vector<std::string> open_before = listing(o.space);
  RunResult w = o.t.launch({"--session-space", "wspace", "coder", "--", "/bin/sh", "-c", "echo ran"}, o.m.as);
  CHECK(w.exit_code == 125);
  CHECK(w.out.empty());
  CHECK(w.err == "ctx-agent-run: " + o.space +
                     "/agent/coder/session/index/by-cwd: mkdirat by-cwd: EACCES (the session's files are made with the "
                     "rights of the agent's owner, uid " +
                     std::to_string(o.m.owner.uid) + ", who may not write there; the agent was not started)\n");
  CHECK(listing(o.space) == open_before);
  CHECK_FALSE(lexists(o.t.root() + "/agent/coder.d/status"));
}

// The decision (docs/launcher.md, "Files a root supervisor makes for the
// agent"): made with the owner's file-system ids, so they belong to the
// owner's uid and primary gid in every iso, never to root nor to an iso
// uid agent's own uid.
TEST_CASE("a root launch into a space its owner may write makes the session there, owned by the owner", "[root]") {
  auto m = ctx::test::launch_mode();
  const std::string policy = "allow coder_t shared:team write\n";
  const std::map<std::string, std::map<std::string, std::optional<std::string>>> isos{
      {"userns", {{"policy", policy}}},
      {"shared", {{"policy", policy}, {"iso", "shared\n"}}},
      // 2000001 lies in the range scripts/setup delegates to the test user.
      {"uid", {{"policy", policy}, {"iso", "uid\n"}, {"uid", "2000001\n"}, {"gid", "2000002\n"}}},
  };
  for (const auto& [iso, files] : isos) {
    INFO("iso " << iso);
    CtxTree t(m.owner);
    t.mkdir("ctx/shared/team");
    const std::string space = t.root() + "/shared/team";
    // Another user's space that the owner's group may write.
    own(space, kOther, m.owner.gid, 0770);
    t.agent("coder", files);
    RunResult r = t.launch({"--session-space", "team", "--session", "review", "coder", "--", "/bin/true"}, m.as);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const std::string s = space + "/agent/coder/session/review";
    CHECK(ctx::test::read_file(s + "/state") == "done\n");
    CHECK(ctx::test::read_file(s + "/events.jsonl").find("\"type\":\"agent.start\"") != std::string::npos);
    all_owned_by(space + "/agent", m.owner.uid, m.owner.gid);
  }
}

TEST_CASE("the home's directories and session files a root launch makes belong to the owner", "[root]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  // iso uid: the agent's own uid is not the owner's; its home stays the owner's.
  t.agent("coder", {{"iso", "uid\n"}, {"uid", "2000001\n"}, {"gid", "2000002\n"}, {"cwd", "/usr\n"}});
  const std::string home = t.root() + "/home/" + std::to_string(m.owner.uid) + "/agent/coder";
  RunResult r = t.launch({"coder", "--", "/bin/true"}, m.as);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (const char* d : {"data", "cache", "log", "session"}) {
    INFO(d);
    all_owned_by(home + "/" + d, m.owner.uid, m.owner.gid);
  }
  for (const char* f : {"created_at", "updated_at", "state", "cwd", "meta.json", "events.jsonl"})
    CHECK(lexists(home + "/session/default/" + f));
  CHECK(lexists(home + "/session/index/by-cwd/%2Fusr"));
  // The supervisor's own records in <name>.d stay root's (docs/launcher.md).
  struct stat st {};
  REQUIRE(::lstat((t.root() + "/agent/coder.d/status").c_str(), &st) == 0);
  CHECK(st.st_uid == 0);
}

// The files `ctx agent create` and `start` make for a child in a root
// launch: its coordination directory in the parent's session, its home,
// root, session and output.log belong to the owner; its .d stays root's.
TEST_CASE("a child's files that a root supervisor makes belong to the owner", "[root]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  t.write("ctx/bin/ctx", ctx::test::read_file(ctx::test::built("ctx/ctx")), 0755);
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"},
                    {"policy", "allow coder_t agent:rev create\nallow coder_t agent:rev start\n"},
                    {"iso", "shared\n"}});
  const std::string request =
      R"({"name":"rev","label":"rev_t","mount":[["/usr","/usr","ro"],["/ctx","/ctx","ro"]],"handoff":"Task\n"})";
  RunResult r = t.launch({"coder", "--", "/bin/sh", "-c",
                          "set -e; /ctx/bin/ctx agent create '" + request +
                              "' >/dev/null; /ctx/bin/ctx agent start rev -- /bin/true >/dev/null; "
                              "/ctx/bin/ctx agent wait rev"},
                         m.as, 90);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out == "{\"exit_status\":0,\"name\":\"rev\",\"ok\":true,\"op\":\"wait\"}\n");
  const std::string home = t.root() + "/home/" + uid + "/agent";
  all_owned_by(home + "/coder/session/default/context", m.owner.uid, m.owner.gid);
  all_owned_by(home + "/rev", m.owner.uid, m.owner.gid);
  CHECK(ctx::test::read_file(home + "/coder/session/default/context/child/rev/status") == "done\n");
  CHECK(lexists(home + "/rev/session/default/output.log"));
  struct stat st {};
  REQUIRE(::lstat((t.root() + "/agent/rev.d/policy").c_str(), &st) == 0);
  CHECK(st.st_uid == 0);
}
