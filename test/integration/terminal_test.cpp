// Interactive launches: the runtime gets a pty of the sandbox's own and
// never holds the caller's terminal; the supervisor relays. Each test
// runs the launcher in a fresh pty, as a person at a terminal would.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <filesystem>

#include "test/support/launch.hpp"
#include "test/support/pty.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::PtySession;

namespace {

std::vector<std::string> launcher(const CtxTree& t, const std::vector<std::string>& cmd) {
  std::vector<std::string> argv{ctx::test::built("launcher/ctx-agent-run"), "--ctx-root", t.root(), "coder", "--"};
  argv.insert(argv.end(), cmd.begin(), cmd.end());
  return argv;
}

const std::vector<std::string> kEnv{"PATH=/usr/bin:/bin", "TERM=dumb", "PS1=outer> "};

termios termios_of(const std::string& tty) {
  termios t{};
  int fd = ::open(tty.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (fd >= 0) {
    ::tcgetattr(fd, &t);
    ::close(fd);
  }
  return t;
}

}  // namespace

TEST_CASE("an interactive shell runs on a pty of the sandbox's own", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  PtySession s(launcher(t, {"/bin/sh", "-i"}), m.as, kEnv, 30, 100);
  REQUIRE(s.wait_for("$ "));
  s.type("tty; stty size; echo X$((1+2))\n");
  REQUIRE(s.wait_for("X3"));
  INFO(s.output());
  CHECK(s.output().find("/dev/pts/0") != std::string::npos);  // the sandbox's devpts, not the caller's
  CHECK(s.output().find("30 100") != std::string::npos);      // the window size went along
  s.type("exit 5\n");
  CHECK(s.wait_exit() == 5);
}

// Before: the sandbox held the caller's terminal and, with the supervisor
// stopped, kept reading what was typed at the shell.
TEST_CASE("nothing typed while the launcher is stopped reaches the sandbox", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.mkdir("rw");
  t.agent("coder", {{"mount", t.base_mounts() + t.dir().path() + "/rw\t/rw\trw\tbind\n"}});
  PtySession s(launcher(t, {"/bin/sh", "-i"}), m.as, kEnv);
  REQUIRE(s.wait_for("$ "));
  REQUIRE(::kill(s.pid(), SIGSTOP) == 0);
  s.type("echo LEAK > /rw/leak\n");
  ::usleep(500000);
  CHECK_FALSE(std::filesystem::exists(t.dir() / "rw/leak"));
  REQUIRE(::kill(s.pid(), SIGKILL) == 0);
  s.wait_exit();
  ::usleep(200000);
  CHECK_FALSE(std::filesystem::exists(t.dir() / "rw/leak"));
}

// Before: `stty raw -echo` inside changed the caller's terminal, and it
// stayed so after the agent ended.
TEST_CASE("the runtime cannot change the caller's terminal", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  PtySession s(launcher(t, {"/bin/sh", "-c", "stty raw -echo; ls -l /proc/self/fd/0; echo done"}), m.as, kEnv);
  termios before = termios_of(s.slave());
  bool done = s.wait_for("done");
  INFO(s.output());
  REQUIRE(done);
  CHECK(s.wait_exit() == 0);
  termios after = termios_of(s.slave());
  CHECK(after.c_lflag == before.c_lflag);
  CHECK(after.c_iflag == before.c_iflag);
  CHECK(after.c_oflag == before.c_oflag);
  CHECK(s.output().find("/dev/pts/0") != std::string::npos);
  // TIOCSTI on the runtime's own terminal is refused too (seccomp).
  PtySession sti(launcher(t, {"/probe", "denied"}), m.as, kEnv);
  REQUIRE(sti.wait_for("\"tiocsti\":\"EPERM\""));
  CHECK(sti.wait_exit() == 0);
}

// ^Z stops the whole agent as it would a foreground program (the shell
// gets the terminal back), fg continues it, ^C interrupts the runtime.
TEST_CASE("^Z, fg and ^C act on the agent like on a foreground program", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  PtySession s({"/bin/sh", "-i"}, m.as, kEnv);
  REQUIRE(s.wait_for("outer> "));
  std::string cmd;
  for (const auto& a : launcher(t, {"/probe", "notify:READY=1", "sleep:30"})) cmd += a + " ";
  s.mark();
  s.type(cmd + "\n");
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/coder.d/status", "ready\n"));
  s.mark();
  s.type("\x1a");
  bool back = s.wait_for("outer> ");  // the outer shell has the terminal again
  INFO(s.output());
  INFO(ctx::test::read_file(t.root() + "/agent/coder.d/status"));
  REQUIRE(back);
  CHECK(s.output().find("Stopped") != std::string::npos);
  s.mark();
  s.type("fg\n");
  ::usleep(300000);
  s.type("\x03");
  REQUIRE(s.wait_for("outer> "));
  s.mark();
  s.type("echo rc=$?\n");
  CHECK(s.wait_for("rc=130"));
  s.type("exit\n");
  CHECK(s.wait_exit() == 0);
}
