#include <catch2/catch.hpp>

#include "ctx/ps.hpp"
#include "test/support/launch.hpp"
#include "test/support/tempdir.hpp"

using ctx::helper::format_ps;
using ctx::helper::PsRow;

TEST_CASE("ctx ps draws children under their parent", "[unit]") {
  std::vector<PsRow> rows{
      {"rev-1", "coder", "busy", 201, 5, "/cortexfs/user-1000/agent-rev-1/runtime"},
      {"coder", "", "ready", 100, 3725, "/cortexfs/user-1000/agent-coder/runtime"},
      {"lone", "gone", "idle", 300, 61, "-"},
      {"grand", "rev-1", "start", 401, 0, "-"},
  };
  CHECK(format_ps(rows) ==
        "AGENT                    STATUS         PID   UPTIME  CGROUP\n"
        "coder                    ready          100    1h02m  /cortexfs/user-1000/agent-coder/runtime\n"
        "  `-rev-1                busy           201       5s  /cortexfs/user-1000/agent-rev-1/runtime\n"
        "    `-grand              start          401       0s  -\n"
        "lone                     idle           300    1m01s  -\n");
  // A parent cycle is drawn once, not forever.
  std::vector<PsRow> cycle{{"a", "b", "ready", 1, 0, "-"}, {"b", "a", "ready", 2, 0, "-"}};
  CHECK_FALSE(format_ps(cycle).empty());
}

TEST_CASE("ctx status explains a missing status file", "[fs]") {
  ctx::test::TempDir t;
  t.mkdir("ctx");
  auto r = ctx::test::run_command({ctx::test::built("ctx/ctx"), "status", "--ctx-root", t / "ctx"});
  CHECK(r.exit_code == 1);
  CHECK(r.err ==
        "ctx status: " + (t / "ctx") +
            "/status: ENOENT: missing: the CTX root's mount status (seed 001) is written by whatever mounts the "
            "root; a tree made by hand has none (write one line, e.g. \"ok\", or check the --ctx-root)\n");
}
