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

bool same_mode(const termios& a, const termios& b) {
  return a.c_iflag == b.c_iflag && a.c_oflag == b.c_oflag && a.c_cflag == b.c_cflag && a.c_lflag == b.c_lflag;
}

bool raw_mode(const termios& t) { return (t.c_lflag & (ICANON | ECHO | ISIG)) == 0; }

// Until the relay has the terminal raw (after fg: the supervisor runs
// again), at most 10 s.
bool wait_raw(const std::string& tty) {
  for (int i = 0; i < 1000; ++i) {
    if (raw_mode(termios_of(tty))) return true;
    ::usleep(10000);
  }
  return false;
}

std::string hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// The command line that launches cmd from a shell typed at.
std::string typed(const CtxTree& t, const std::vector<std::string>& cmd) {
  std::string line;
  for (const auto& a : launcher(t, cmd)) line += a + " ";
  return line + "\n";
}

// The mouse, its SGR encoding, the alternate screen and bracketed paste
// switched on, and what switches them off again.
const std::string kModesOn = "\x1b[?1000h\x1b[?1006h\x1b[?1049h\x1b[?2004h";
const std::string kModesOff = "\x1b[?1049l\x1b[?1000l\x1b[?1006l\x1b[?2004l";
const std::string kStatusQuery = "\x1b[5n";

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
  // ^C once the relay reads it: typed earlier, the shell's terminal
  // would make it a SIGINT of its own and flush the unread "fg".
  REQUIRE(wait_raw(s.slave()));
  s.type("\x03");
  REQUIRE(s.wait_for("outer> "));
  s.mark();
  s.type("echo rc=$?\n");
  CHECK(s.wait_for("rc=130"));
  s.type("exit\n");
  CHECK(s.wait_exit() == 0);
}

// Before: a runtime asked the terminal something (here the cursor
// position, ESC [ 6 n) and stopped itself at once; the supervisor gave
// the terminal back to the shell before the answer came, and the answer
// was typed into the shell (bash ran an injected answer as a command).
// The terminal here answers as one over a slow link: 200 ms late.
TEST_CASE("a terminal's answer to a runtime that stopped itself never reaches the shell", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  PtySession s({"/bin/sh", "-i"}, m.as, kEnv);
  s.answer("\x1b[6n", "\x1b[24;1R", 200);
  s.answer(kStatusQuery, "\x1b[0n", 200);
  REQUIRE(s.wait_for("outer> "));
  s.mark();
  s.type(typed(t, {"/probe", "out:" + hex("\x1b[6n"), "stop", "exit:0"}));
  {
    bool back = s.wait_for("outer> ");  // the supervisor stopped: the shell has the terminal
    INFO(s.output());
    REQUIRE(back);
    REQUIRE(s.output().find("\x1b[6n") != std::string::npos);
  }
  s.mark();
  s.idle(600);  // every answer has come by now
  s.type("echo $((6*7))\n");
  {
    // With the prompt that follows: the shell writes it apart from "42",
    // and a prompt left unread would pass the wait after fg below at once,
    // so that "echo rc=$?" went to the relay, not to the shell.
    bool shown = s.wait_for("\r\n42\r\nouter> ");
    INFO(s.output());
    CHECK(shown);
    CHECK(s.since_mark().find("24;1R") == std::string::npos);  // neither echoed nor run
  }
  s.mark();
  s.type("fg\n");
  REQUIRE(s.wait_for("outer> "));
  s.mark();
  s.type("echo rc=$?\n");
  bool rc = s.wait_for("rc=0");
  INFO(s.output());
  CHECK(rc);
  s.type("exit\n");
  CHECK(s.wait_exit() == 0);
}

TEST_CASE("the caller's terminal mode is restored when the runtime stops itself and when it ends", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  PtySession s({"/bin/sh", "-i"}, m.as, kEnv);
  REQUIRE(s.wait_for("outer> "));
  const termios shell = termios_of(s.slave());
  REQUIRE_FALSE(raw_mode(shell));
  s.mark();
  s.type(typed(t, {"/probe", "notify:READY=1", "sleep:1", "stop", "exit:0"}));
  REQUIRE(ctx::test::wait_for_file(t.root() + "/agent/coder.d/status", "ready\n"));
  CHECK(raw_mode(termios_of(s.slave())));  // relayed: what follows is a restore
  bool stopped = s.wait_for("outer> ");
  INFO(s.output());
  REQUIRE(stopped);
  CHECK(same_mode(termios_of(s.slave()), shell));
  s.mark();
  s.type("fg\n");
  REQUIRE(s.wait_for("outer> "));
  CHECK(same_mode(termios_of(s.slave()), shell));
  s.type("exit\n");
  CHECK(s.wait_exit() == 0);
}

// Before: a runtime that ended (or stopped) with the mouse reported, on
// the alternate screen or with bracketed paste left the shell with a
// terminal that sent mouse reports as input and hid its output.
TEST_CASE("the modes a runtime switched on are switched off before the shell gets the terminal", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  // What follows the runtime's last line (its JSON report) is the
  // supervisor's: the resets, then the query that waits for the answers.
  auto tail = [](const std::string& out) { return out.substr(out.rfind("}\r\n") + 3); };
  SECTION("when it ends") {
    PtySession s(launcher(t, {"/probe", "out:" + hex(kModesOn)}), m.as, kEnv);
    s.answer(kStatusQuery, "\x1b[0n", 0);
    CHECK(s.wait_exit() == 0);
    INFO(s.output());
    CHECK(tail(s.output()) == kModesOff + kStatusQuery);
  }
  SECTION("only those it left on") {
    PtySession s(launcher(t, {"/probe", "out:" + hex(kModesOn + "\x1b[?1000;1006;2004l")}), m.as, kEnv);
    s.answer(kStatusQuery, "\x1b[0n", 0);
    CHECK(s.wait_exit() == 0);
    INFO(s.output());
    CHECK(tail(s.output()) == "\x1b[?1049l" + kStatusQuery);
  }
  SECTION("when it stops itself") {
    PtySession s({"/bin/sh", "-i"}, m.as, kEnv);
    s.answer(kStatusQuery, "\x1b[0n", 0);
    REQUIRE(s.wait_for("outer> "));
    s.mark();
    s.type(typed(t, {"/probe", "out:" + hex(kModesOn), "stop", "exit:0"}));
    bool stopped = s.wait_for("outer> ");
    INFO(s.output());
    REQUIRE(stopped);
    auto on = s.since_mark().find(kModesOn);
    REQUIRE(on != std::string::npos);
    CHECK(s.since_mark().find(kModesOff + kStatusQuery, on) < s.since_mark().find("Stopped"));
    s.mark();
    s.type("fg\n");
    REQUIRE(s.wait_for("outer> "));
    CHECK(s.since_mark().find(kModesOff) == std::string::npos);  // already off: not again
    s.type("exit\n");
    CHECK(s.wait_exit() == 0);
  }
}

// Before: a supervisor killed with SIGKILL during an interactive launch
// left the caller's terminal raw (no echo, no line editing, ^C a byte).
TEST_CASE("the watchdog restores the caller's terminal mode when the supervisor is killed", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  PtySession s({"/bin/sh", "-i"}, m.as, kEnv);
  REQUIRE(s.wait_for("outer> "));
  const termios shell = termios_of(s.slave());
  s.type(typed(t, {"/probe", "notify:READY=1", "sleep:30"}));
  const std::string d = t.root() + "/agent/coder.d/";
  REQUIRE(ctx::test::wait_for_file(d + "status", "ready\n"));
  REQUIRE(raw_mode(termios_of(s.slave())));
  REQUIRE(::kill(std::stoi(ctx::test::read_file(d + "pid")), SIGKILL) == 0);
  bool dead = ctx::test::wait_for_file(d + "status", "dead\n");
  INFO(s.output());
  REQUIRE(dead);
  CHECK(same_mode(termios_of(s.slave()), shell));
  s.type("exit 0\n");
  CHECK(s.wait_exit() == 0);
}
