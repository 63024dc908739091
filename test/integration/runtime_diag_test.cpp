// A runtime that does not run, said with its cause (docs/launcher.md,
// "Exit status"): which PATH the sandbox searched, whether the host has
// the program no mount shows, and a `#!/usr/bin/env NAME` whose NAME is
// nowhere, which `ctx check` says before any launch.
#include <catch2/catch.hpp>

#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::test::CtxTree;
using ctx::test::RunResult;

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
  RunResult chk =
      ctx::test::run_command({ctx::test::built("ctx/ctx"), "check", "--ctx-root", t.root(), "coder"}, m.as);
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
