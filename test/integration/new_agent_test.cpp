// `ctx new`'s options (issue 27): --owner makes a user agent in a system
// tree that its owner and root both launch; --mount, --tool and --model
// write the table line and the rules; a refused option changes nothing.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

namespace {

namespace fs = std::filesystem;

// A root-owned system tree, as `ctx init` run by root makes it, in a
// directory every user may traverse.
struct SystemTree {
  ctx::test::TempDir dir;
  std::string root;
  SystemTree() : root(dir / "ctx") {
    REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
    auto r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "init", "--ctx-root", root});
    INFO(r.out << r.err);
    REQUIRE(r.exit_code == 0);
  }
};

ctx::test::RunResult ctx_new(const std::string& root, std::vector<std::string> args,
                             std::optional<ctx::test::TestUser> as = std::nullopt) {
  std::vector<std::string> argv{ctx::test::built("ctx/ctx"), "new", "--ctx-root", root};
  argv.insert(argv.end(), args.begin(), args.end());
  return ctx::test::run_command(argv, as);
}

// Every path below dir with its owner, mode and content: what a refused
// command must leave as it was.
std::string listing(const std::string& dir) {
  std::string out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    struct stat st {};
    REQUIRE(::lstat(e.path().c_str(), &st) == 0);
    out += e.path().string() + " " + std::to_string(st.st_uid) + " " + std::to_string(st.st_mode) + "\n";
    if (S_ISREG(st.st_mode)) out += ctx::test::read_file(e.path().string());
  }
  return out;
}

uid_t owner_of(const std::string& path) {
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return st.st_uid;
}

}  // namespace

TEST_CASE("ctx new --owner as root makes a user agent that its owner and root both launch", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  SystemTree t;
  const std::string uid = std::to_string(u->uid);
  const std::string data = t.dir / "data";
  REQUIRE(::mkdir(data.c_str(), 0755) == 0);
  REQUIRE(::chown(data.c_str(), u->uid, u->gid) == 0);
  auto r = ctx_new(t.root, {"hello", "--owner", u->name, "--mount", data + ":/data:rw", "--mount", "/usr/share:/share",
                            "--tool", "fs.read", "--model", "echo/m"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.err.empty());
  const std::string tier = t.root + "/home/" + uid + "/agent";
  CHECK(r.out.rfind("created " + t.root + "/home/" + uid + "\ncreated " + tier + "\ncreated " + tier + "/hello\n", 0) ==
        0);
  CHECK(r.out.find("created " + tier + "/hello.d\nlaunch it as " + u->name + ": ctx-agent-run --ctx-root " + t.root +
                   " hello; as root: ctx-agent-run --ctx-root " + t.root + " --user " + uid + " hello\n") !=
        std::string::npos);
  // ctx check's findings for the grants no tier has.
  CHECK(r.out.find("warning: hello.d/policy:18: tool:fs.read: no such tool in the agent's CTX_PATH (the rule is "
                   "inert)\nwarning: hello.d/policy:19: model:echo/m: no such model in " +
                   t.root + "/home/" + uid + "/model or " + t.root + "/model (the rule is inert)\n") !=
        std::string::npos);
  CHECK(r.out.find("hello: ok\n0 errors, 2 warnings\n") != std::string::npos);
  const std::string d = tier + "/hello.d/";
  CHECK(ctx::test::read_file(d + "owner") == uid + "\n");
  CHECK(ctx::test::read_file(d + "gid") == std::to_string(u->gid) + "\n");
  CHECK(ctx::test::read_file(d + "mount")
            .find(data + "\t/data\trw\tbind,nosuid,nodev\n/usr/share\t/share\tro\tbind,"
                         "nosuid,nodev\n") != std::string::npos);
  CHECK(ctx::test::read_file(d + "policy")
            .find("allow hello_t mount:/data read\nallow hello_t mount:/data write\nallow hello_t mount:/share read\n"
                  "# The tools and models ctx new --tool and --model granted:\nallow hello_t tool:fs.read execute\n"
                  "allow hello_t model:echo/m use\n") != std::string::npos);
  for (const std::string& p : {t.root + "/home/" + uid, tier, tier + "/hello", tier + "/hello/root", d, d + "entry",
                               d + "policy", d + "mount"})
    CHECK(owner_of(p) == u->uid);
  CHECK(owner_of(t.root + "/agent") == 0);
  const std::string said = "hello is running in its sandbox: uid " + uid + ", cwd /ctx/home/" + uid + "/agent/hello\n";
  const std::string run = ctx::test::built("launcher/ctx-agent-run");
  // Root, then the owner, then both again: root's launch leaves nothing
  // in the owner's tier that the owner cannot write (it made .d/log
  // root's, which the owner's launches then could not append to).
  for (bool as_root : {true, false, true, false}) {
    auto l = as_root ? ctx::test::run_command({run, "--ctx-root", t.root, "--user", uid, "hello"})
                     : ctx::test::run_command({run, "--ctx-root", t.root, "hello"}, *u);
    INFO((as_root ? "root: " : "owner: ") << l.out << l.err);
    CHECK(l.exit_code == 0);
    CHECK(l.out == said);
    CHECK(l.warnings.find("EACCES") == std::string::npos);
  }
  CHECK(owner_of(d + "log") == u->uid);
}

TEST_CASE("a refused ctx new option changes nothing, with a message that names the option and the fix", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  SystemTree t;
  const std::string before = listing(t.dir.path());
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::string good = "/usr:/host-usr";
  const std::vector<Case> cases{
      {{"--mount", good, "--mount", "/nonexistent:/d"},
       "ctx: --mount /nonexistent:/d: ENOENT: the source /nonexistent cannot be looked up; name an existing path its "
       "owner may reach\n"},
      {{"--mount", good, "--mount", "/usr:/d:rx"},
       "ctx: --mount /usr:/d:rx: EINVAL: the mode is 'rx'; write ro or rw\n"},
      {{"--mount", "usr:/d"},
       "ctx: --mount usr:/d: EINVAL: source 'usr': path must be absolute (start with '/'); name an absolute path\n"},
      {{"--mount", "/usr"},
       "ctx: --mount /usr: EINVAL: expected SRC:DST or SRC:DST:ro|rw (two absolute paths, then the mode)\n"},
      {{"--mount", "/usr/share:/usr"},
       "ctx: --mount /usr/share:/usr: EINVAL: the target /usr is mounted already (by ctx new or an earlier --mount); "
       "choose another\n"},
      {{"--mount", "/usr:/"},
       "ctx: --mount /usr:/: EINVAL: the target is / (a mount over the whole root); choose a directory below it\n"},
      {{"--tool", "../x"}, "ctx: --tool ../x: EINVAL: tool name must begin with a letter or digit\n"},
      {{"--owner", "no-such-user-x"},
       "ctx: --owner no-such-user-x: ENOENT: no such user on this machine; name a user of getent passwd, by name or "
       "uid\n"},
      {{"--owner", "0"}, "ctx: --owner 0: EINVAL: root's agents are system agents; leave --owner out\n"},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args{"hello", "--owner", u->name};
    if (c.args.front() == "--owner") args.resize(1);
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto r = ctx_new(t.root, args);
    INFO(c.args.back());
    CHECK(r.exit_code == 1);
    CHECK(r.err == c.err);
    CHECK(r.out.empty());
    CHECK(listing(t.dir.path()) == before);
  }
  // A user makes no agent for another.
  auto r = ctx_new(t.root, {"hello", "--owner", "0"}, *u);
  CHECK(r.exit_code == 1);
  CHECK(r.err == "ctx: --owner 0: EINVAL: root's agents are system agents; leave --owner out\n");
  r = ctx_new(t.root, {"hello", "--owner", "daemon"}, *u);
  CHECK(r.exit_code == 1);
  CHECK(r.err ==
        "ctx: --owner daemon: EPERM: only root makes an agent for another user; run ctx new as root, or "
        "leave --owner out\n");
  CHECK(listing(t.dir.path()) == before);
}

TEST_CASE("ctx new --owner refuses an owner's tier that belongs to someone else", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  SystemTree t;
  const std::string home = t.root + "/home/" + std::to_string(u->uid);
  REQUIRE(::mkdir(home.c_str(), 0755) == 0);
  REQUIRE(::mkdir((home + "/agent").c_str(), 0755) == 0);
  auto r = ctx_new(t.root, {"hello", "--owner", u->name});
  CHECK(r.exit_code == 1);
  CHECK(r.err == "ctx: " + home + "/agent: EPERM: owned by uid 0, not the agent's owner " + std::to_string(u->uid) +
                     ", whose own launch makes the agent's socket there; chown " + std::to_string(u->uid) + ":" +
                     std::to_string(u->gid) + " " + home + "/agent, or choose another owner\n");
  CHECK(ctx::test::names_in(home + "/agent").empty());
}
