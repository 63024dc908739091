// docs/quickstart.md, run as written (issue 13): every ```sh block in
// order, as root and as the unprivileged test user, in an empty home.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "test/support/facility.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

namespace {

// The page's shell blocks, in order.
std::vector<std::string> sh_blocks(const std::string& md) {
  std::vector<std::string> out;
  const std::string open = "```sh\n", close = "\n```";
  for (std::size_t at = md.find(open); at != std::string::npos; at = md.find(open, at)) {
    at += open.size();
    std::size_t end = md.find(close, at);
    REQUIRE(end != std::string::npos);
    out.push_back(md.substr(at, end - at) + "\n");
    at = end;
  }
  return out;
}

}  // namespace

TEST_CASE("docs/quickstart.md works as written: a tree, an agent, a tool call, a child", "[root][userns]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  ctx::test::TestUser as = ctx::test::current_facility() == "root" ? ctx::test::TestUser{0, 0, "root"} : *u;
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  const std::vector<std::string> blocks = sh_blocks(ctx::test::read_file(std::string(src) + "/docs/quickstart.md"));
  REQUIRE(blocks.size() >= 2);
  std::string script;
  for (const auto& b : blocks) script += b;
  REQUIRE(script.find("ctx init") != std::string::npos);
  ctx::test::TempDir home;
  if (::geteuid() == 0) REQUIRE(::chown(home.path().c_str(), as.uid, as.gid) == 0);
  const std::string path = "PATH=" + ctx::test::built("launcher") + ":" + ctx::test::built("ctx") + ":/usr/bin:/bin";
  auto r =
      ctx::test::run_command({"/bin/sh", "-ec", "export " + path + "\n" + script}, as, 120, {"HOME=" + home.path()});
  INFO(script << "\n---\n" << r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("hello: ok\n") != std::string::npos);
  CHECK(r.out.find("hello is running in its sandbox: uid " + std::to_string(as.uid) + ", cwd /ctx/home/" +
                   std::to_string(as.uid) + "/agent/hello\n") != std::string::npos);
  CHECK(r.out.find("hello, world\n") != std::string::npos);
  CHECK(r.out.find("\"context\":\"/ctx/home/" + std::to_string(as.uid) +
                   "/agent/hello/session/default/context/child/helper\"") != std::string::npos);
  CHECK(r.out.find("{\"exit_status\":0,\"name\":\"helper\",\"ok\":true,\"op\":\"wait\"}") != std::string::npos);
  CHECK(r.out.size() >= 11);
  CHECK(r.out.substr(r.out.size() - 11) == "helper ran\n");
  // The child's block again, as a person re-running it would: the same
  // answers, the child made anew.
  auto again = ctx::test::run_command({"/bin/sh", "-ec", "export " + path + "\nexport CTX_ROOT=~/ctx\n" + blocks.back()},
                                      as, 120, {"HOME=" + home.path()});
  INFO(blocks.back() << "\n---\n" << again.out << again.err);
  CHECK(again.exit_code == 0);
  CHECK(again.out.find("{\"exit_status\":0,\"name\":\"helper\",\"ok\":true,\"op\":\"wait\"}") != std::string::npos);
  CHECK(again.out.size() >= 11);
  CHECK(again.out.substr(again.out.size() - 11) == "helper ran\n");
  CHECK(ctx::test::processes_mentioning(home.path()).empty());
}

TEST_CASE("ctx new lists the caller's supplementary groups, so its first launch passes the groups rule", "[root]") {
  auto u = ctx::test::test_user();
  REQUIRE(u);
  ctx::test::TempDir home;
  REQUIRE(::chown(home.path().c_str(), u->uid, u->gid) == 0);
  const std::string ids = "--reuid=" + std::to_string(u->uid) + " --regid=" + std::to_string(u->gid) +
                          " --groups=" + std::to_string(u->gid) + ",4,24";
  const std::string script = "set -e; export PATH=" + ctx::test::built("launcher") + ":" + ctx::test::built("ctx") +
                             ":/usr/bin:/bin HOME=" + home.path() +
                             "; ctx init --ctx-root ~/ctx >/dev/null; ctx new g --ctx-root ~/ctx >/dev/null; "
                             "cat ~/ctx/agent/g.d/groups; ctx-agent-run --ctx-root ~/ctx g";
  auto r = ctx::test::run_command({"/bin/sh", "-c", "exec setpriv " + ids + " /bin/sh -c '" + script + "'"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.rfind("4\n24\ng is running in its sandbox: uid " + std::to_string(u->uid), 0) == 0);
}
