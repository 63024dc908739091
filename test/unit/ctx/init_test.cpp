// ctx init and ctx new (issue 13): what they make, what they refuse, and
// that a refusal leaves nothing behind.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

namespace {

ctx::test::RunResult ctx_cmd(const std::vector<std::string>& args) {
  std::vector<std::string> argv{ctx::test::built("ctx/ctx")};
  argv.insert(argv.end(), args.begin(), args.end());
  return ctx::test::run_command(argv);
}

}  // namespace

TEST_CASE("ctx init makes what is missing of a CTX tree and changes nothing that exists", "[fs]") {
  ctx::test::TempDir t;
  const std::string root = t / "ctx";
  const std::string uid = std::to_string(::getuid());
  auto r = ctx_cmd({"init", "--ctx-root", root});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const std::vector<std::string> dirs{"agent",
                                      "tool",
                                      "model",
                                      "shared",
                                      "bin",
                                      "home/" + uid + "/agent",
                                      "home/" + uid + "/tool",
                                      "home/" + uid + "/model"};
  for (const std::string& d : dirs) {
    INFO(d);
    CHECK(std::filesystem::is_directory(root + "/" + d));
    CHECK(r.out.find("created " + root + "/" + d + "\n") != std::string::npos);
  }
  // bin/ctx: the small program of tool and model calls (built beside the
  // helper), with the full helper beside it as bin/ctx-helper.
  for (const auto& [name, built] :
       {std::pair<std::string, std::string>{"ctx", "ctx/ctx-call"}, {"ctx-helper", "ctx/ctx"}}) {
    INFO(name);
    struct stat st {};
    REQUIRE(::stat((root + "/bin/" + name).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0755);
    CHECK(ctx::test::read_file(root + "/bin/" + name) == ctx::test::read_file(ctx::test::built(built)));
    CHECK(r.out.find("created " + root + "/bin/" + name + "\n") != std::string::npos);
  }
  t.write("ctx/tool/mine", "#!/bin/sh\n", 0700);
  auto again = ctx_cmd({"init", "--ctx-root", root});
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("created") == std::string::npos);
  CHECK(again.out.find("(it was already)") != std::string::npos);
  CHECK(t.read("ctx/tool/mine") == "#!/bin/sh\n");
}

TEST_CASE("ctx new writes an agent that ctx check passes, and refuses what it must without leaving anything", "[fs]") {
  ctx::test::TempDir t;
  const std::string root = t / "ctx";
  const std::string uid = std::to_string(::getuid());
  auto no_tree = ctx_cmd({"new", "hello", "--ctx-root", root});
  CHECK(no_tree.exit_code == 1);
  CHECK(no_tree.err ==
        "ctx: " + root + "/agent: ENOENT: not a CTX tree; make one first: ctx init --ctx-root " + root + "\n");
  CHECK_FALSE(std::filesystem::exists(root));
  REQUIRE(ctx_cmd({"init", "--ctx-root", root}).exit_code == 0);
  auto r = ctx_cmd({"new", "hello", "--ctx-root", root});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("hello: ok\n") != std::string::npos);  // ctx check's verdict
  CHECK(t.read("ctx/agent/hello.d/owner") == uid + "\n");
  CHECK(t.read("ctx/agent/hello.d/label") == "hello_t\n");
  CHECK(t.read("ctx/agent/hello.d/root") == root + "/home/" + uid + "/agent/hello/root\n");
  CHECK(t.read("ctx/agent/hello.d/cwd") == "/ctx/home/" + uid + "/agent/hello\n");
  const std::string mount = t.read("ctx/agent/hello.d/mount");
  CHECK(mount.find("/usr\t/usr\tro\trbind,nodev\n") != std::string::npos);
  CHECK(mount.find(root + "\t/ctx\tro\trbind,nosuid,nodev\n") != std::string::npos);
  CHECK(mount.find(root + "/home/" + uid + "/agent/hello\t/ctx/home/" + uid +
                   "/agent/hello\trw\tbind,nosuid,nodev\n") != std::string::npos);
  CHECK(std::filesystem::read_symlink(root + "/home/" + uid + "/agent/hello/root/bin") == "usr/bin");
  for (const char* d : {"data", "cache", "log", "session"})
    CHECK(std::filesystem::is_directory(root + "/home/" + uid + "/agent/hello/" + d));
  struct stat st {};
  REQUIRE(::stat((root + "/agent/hello").c_str(), &st) == 0);
  CHECK((st.st_mode & 0111) != 0);
  // Taken, or not a name: refused, nothing written.
  const std::string before = t.read("ctx/agent/hello.d/policy");
  auto twice = ctx_cmd({"new", "hello", "--ctx-root", root});
  CHECK(twice.exit_code == 1);
  CHECK(twice.err == "ctx: " + root + "/agent/hello: EEXIST: the agent exists; choose another name\n");
  CHECK(t.read("ctx/agent/hello.d/policy") == before);
  CHECK(ctx_cmd({"new", "../x", "--ctx-root", root}).exit_code == 1);
  t.write("ctx/agent/half.d/owner", uid + "\n");  // a .d without its runtime
  CHECK(ctx_cmd({"new", "half", "--ctx-root", root}).exit_code == 1);
  CHECK_FALSE(std::filesystem::exists(root + "/agent/half"));
  for (const auto& e : std::filesystem::directory_iterator(root + "/agent"))
    CHECK(e.path().filename().string().find(".new.") == std::string::npos);  // no temporary left
}

// Before: `ctx new rev-1` wrote the label rev-1_t, which no type may be,
// so the agent it made could never launch.
TEST_CASE("ctx new makes a valid label type of any agent name", "[fs]") {
  ctx::test::TempDir t;
  const std::string root = t / "ctx";
  REQUIRE(ctx_cmd({"init", "--ctx-root", root}).exit_code == 0);
  for (const auto& [name, type] : std::vector<std::pair<std::string, std::string>>{
           {"rev-1", "rev_1_t"}, {"1st", "a_1st_t"}, {std::string(64, 'x'), std::string(62, 'x') + "_t"}}) {
    auto r = ctx_cmd({"new", name, "--ctx-root", root});
    INFO(name << ": " << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find(name + ": ok\n") != std::string::npos);  // ctx check's verdict
    CHECK(t.read("ctx/agent/" + name + ".d/label") == type + "\n");
    CHECK(t.read("ctx/agent/" + name + ".d/policy").find("allow " + type + " session:default write\n") !=
          std::string::npos);
  }
}

TEST_CASE("ctx init writes the root's status when missing and never replaces one", "[fs]") {
  ctx::test::TempDir t;
  const std::string root = t / "ctx";
  auto r = ctx_cmd({"init", "--ctx-root", root});
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(t.read("ctx/status") == "ok\n");
  CHECK(r.out.find("created " + root + "/status\n") != std::string::npos);
  CHECK(!std::filesystem::exists(root + "/.status.new"));
  auto st = ctx_cmd({"status", "--ctx-root", root});
  CHECK(st.exit_code == 0);
  CHECK(st.out.find("ok") != std::string::npos);
  t.write("ctx/status", "maintenance\n");
  auto again = ctx_cmd({"init", "--ctx-root", root});
  CHECK(again.exit_code == 0);
  CHECK(t.read("ctx/status") == "maintenance\n");
  CHECK(again.out.find("created " + root + "/status") == std::string::npos);
}

TEST_CASE("ctx init --shared makes a shared space with agent/, data/ and the queue's states", "[fs]") {
  ctx::test::TempDir t;
  const std::string root = t / "ctx";
  auto r = ctx_cmd({"init", "--ctx-root", root, "--shared", "project-a"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  for (const char* d : {"agent", "data", "queue/inbox", "queue/pending", "queue/lease", "queue/claimed", "queue/done",
                        "queue/failed", "queue/result"}) {
    INFO(d);
    CHECK(std::filesystem::is_directory(root + "/shared/project-a/" + d));
    CHECK(r.out.find("created " + root + "/shared/project-a/" + d + "\n") != std::string::npos);
  }
  auto bad = ctx_cmd({"init", "--ctx-root", root, "--shared", "../x"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("--shared ../x: EINVAL") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t / "x"));
}
