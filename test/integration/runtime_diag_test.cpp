// A runtime that does not run, said with its cause (docs/launcher.md,
// "Exit status"): which PATH the sandbox searched, whether the host has
// the program no mount shows, and a `#!/usr/bin/env NAME` whose NAME is
// nowhere, which `ctx check` says before any launch; a control file, an
// interpreter or a loader a launch refuses, named by the launch and by
// `ctx check` with the same sentence.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;

namespace {

using Mode = ctx::test::LaunchMode;
constexpr auto mode = ctx::test::launch_mode;

}  // namespace

// Before: `execve /bin/nosuchcmd: ENOENT`, naming the last PATH entry only,
// and nothing about a program the host has but no mount shows.
TEST_CASE("a runtime the sandbox does not have: the PATH searched, and whether the host has it", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder");
  RunResult bare = t.launch({"coder", "--", "nosuchcmd"}, m.as);
  CHECK(bare.exit_code == 127);
  CHECK(bare.err ==
        "ctx-agent-run: runtime nosuchcmd: execve: ENOENT: in none of the sandbox's PATH directories "
        "(/ctx/bin:/usr/local/bin:/usr/bin:/bin)\n");
  t.write("hostonly/tool", "#!/bin/sh\necho hi\n", 0755);
  const std::string host = t.dir().path() + "/hostonly/tool";
  RunResult hidden = t.launch({"coder", "--", host}, m.as);
  CHECK(hidden.exit_code == 127);
  CHECK(hidden.err == "ctx-agent-run: runtime " + host + ": execve " + host + ": ENOENT; the host has " + host +
                          ", which no line of coder.d/mount shows in the sandbox: add one that shows it (its "
                          "directory, or /usr), or run a program the mounts show\n");
}

// Before: `ctx check` passed such a runtime, and its launch failed.
TEST_CASE("ctx check refuses a runtime whose #!/usr/bin/env names a program that is nowhere", "[root][userns]") {
  auto m = ctx::test::launch_mode();
  CtxTree t(m.owner);
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"}});
  t.write("ctx/agent/coder", "#!/usr/bin/env nosuchinterp\n", 0755);
  RunResult chk = ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"}, m.as);
  INFO(chk.out << chk.err);
  CHECK(chk.exit_code == 1);
  CHECK(chk.out.find("runtime /ctx/agent/coder: #!/usr/bin/env nosuchinterp: nosuchinterp is in none of the sandbox's "
                     "PATH directories (/ctx/bin:/usr/local/bin:/usr/bin:/bin); the host has no nosuchinterp "
                     "either: install it, or change the #! line of " +
                     t.root() + "/agent/coder") != std::string::npos);
  // A launch runs env, which is there; env's own exit (127) and words are
  // the runtime's: ctx check is where the launcher can say it first.
  RunResult run = t.launch({"coder"}, m.as);
  CHECK(run.exit_code == 127);
  CHECK(run.err.find("nosuchinterp") != std::string::npos);
}

// Issue 13: what a launch refuses is said with the file to fix, and
// ctx check (the launcher's own preflight) refuses the same trees first.
TEST_CASE("launch errors name the control file, the missing interpreter or loader; ctx check fails on them",
          "[root][userns]") {
  Mode m = mode();
  CtxTree t(m.owner);
  const std::string uid = std::to_string(m.owner.uid);
  const std::string home_root = t.root() + "/home/" + uid + "/agent/coder/root";
  t.agent("coder", {{"mount", t.base_mounts() + t.root() + "\t/ctx\tro\trbind,nosuid,nodev\n"}});
  t.write("ctx/agent/coder", "#!/bin/sh\necho ran\n", 0755);
  const std::string ctx = ctx::test::built("ctx/ctx");
  auto check = [&] { return ctx::test::run_command({ctx, "check", "--ctx-root", t.root(), "coder"}, m.as); };
  auto launch = [&] { return t.launch({"coder"}, m.as); };
  RunResult ok = launch();
  INFO(ok.out << ok.err);
  REQUIRE(ok.exit_code == 0);
  REQUIRE(ok.out == "ran\n");
  REQUIRE(check().exit_code == 0);

  struct Fault {
    const char* what;
    std::function<void()> make, undo;
    int exit_code;
    std::string message;
  };
  std::vector<Fault> faults{
      {"CRLF", [&] { t.write("ctx/agent/coder", "#!/bin/sh\r\necho ran\r\n", 0755); },
       [&] { t.write("ctx/agent/coder", "#!/bin/sh\necho ran\n", 0755); }, 127,
       "runtime /ctx/agent/coder: its #! line ends in CR (DOS line ends)"},
      {"no /bin link", [&] { REQUIRE(::rename((home_root + "/bin").c_str(), (home_root + "/bin.off").c_str()) == 0); },
       [&] { REQUIRE(::rename((home_root + "/bin.off").c_str(), (home_root + "/bin").c_str()) == 0); }, 127,
       "runtime /ctx/agent/coder: #!/bin/sh: /bin/sh not found in the sandbox; the root " + home_root +
           " needs the merged-/usr links"},
      {"cwd", [&] { t.write("ctx/agent/coder.d/cwd", "/nowhere\n"); },
       [&] { REQUIRE(::unlink((t.root() + "/agent/coder.d/cwd").c_str()) == 0); }, 125,
       "coder.d/cwd: chdir /nowhere: ENOENT: no such directory in the sandbox"},
      {"root", [&] { t.write("ctx/agent/coder.d/root", t.root() + "/home/" + uid + "/agent/coder/nothing\n"); },
       [&] { t.write("ctx/agent/coder.d/root", home_root + "\n"); }, 125,
       "coder.d/root: root " + t.root() + "/home/" + uid + "/agent/coder/nothing: ENOENT: no such directory"},
  };
  for (auto& f : faults) {
    f.make();
    RunResult l = launch();
    RunResult c = check();
    INFO(f.what << "\nlaunch: " << l.out << l.err << "\ncheck: " << c.out << c.err);
    CHECK(l.exit_code == f.exit_code);
    CHECK(l.err.find(f.message) != std::string::npos);
    CHECK(c.exit_code == 1);
    CHECK(c.out.find(f.message) != std::string::npos);  // the same sentence, before any launch
    f.undo();
    CHECK(launch().exit_code == 0);
  }
  // An ELF runtime whose loader the root does not show.
  REQUIRE(::rename((home_root + "/lib64").c_str(), (home_root + "/lib64.off").c_str()) == 0);
  RunResult elf = t.launch({"coder", "--", "/usr/bin/true"}, m.as);
  INFO(elf.err);
  CHECK(elf.exit_code == 127);
  CHECK(elf.err.find("runtime /usr/bin/true: its loader /lib64/") != std::string::npos);
}
