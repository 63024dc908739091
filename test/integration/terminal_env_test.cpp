// The environment of an interactive launch: the caller's terminal type
// and language reach the runtime (docs/launcher.md, "Environment"), and
// nothing else of the caller does; without a terminal none of it passes.
#include <catch2/catch.hpp>

#include "test/support/launch.hpp"
#include "test/support/pty.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::PtySession;

namespace {

const std::vector<std::string> kCallerEnv{"PATH=/usr/bin:/bin", "TERM=xterm-256color", "COLORTERM=truecolor",
                                          "LANG=C.UTF-8", "SSH_AUTH_SOCK=/tmp/agent.sock"};

const std::string kShow =
    "echo \"T=${TERM:-unset} C=${COLORTERM:-unset} L=${LANG:-unset} S=${SSH_AUTH_SOCK:-unset} "
    "colors=$(tput colors 2>&1)\"";

std::vector<std::string> launcher(const CtxTree& t) {
  return {ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder", "--", "/bin/sh", "-c", kShow};
}

}  // namespace

TEST_CASE("an interactive launch gets the caller's TERM, COLORTERM and LANG, and no other variable",
          "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  PtySession s(launcher(t), m.as, kCallerEnv);
  bool shown = s.wait_for("colors=");
  INFO(s.output());
  REQUIRE(shown);
  CHECK(s.wait_exit() == 0);
  CHECK(s.output().find("T=xterm-256color C=truecolor L=C.UTF-8 S=unset colors=256") != std::string::npos);
}

TEST_CASE("a launch without a terminal passes none of the caller's terminal variables", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  auto r = ctx::test::run_command(launcher(t), m.as, 60, kCallerEnv);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("T=unset C=unset L=unset S=unset") != std::string::npos);
}
