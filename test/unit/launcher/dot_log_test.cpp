// The one writer of a tool's and a model's .d/log
// (launcher/records/dot_log.hpp), as the caller's own ids (an unprivileged
// launch): what each rule makes, rotates and refuses.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

#include "launcher/records/agent_files.hpp"
#include "launcher/records/dot_log.hpp"
#include "test/support/tempdir.hpp"

using ctx::launcher::append_dot_log;
using ctx::launcher::DotLogRule;
using ctx::launcher::kMaxLogBytes;
using ctx::launcher::LaunchPlan;

namespace {

LaunchPlan plan_at(const ctx::test::TempDir& d) {
  LaunchPlan p;
  p.ctx_root = d.path();
  return p;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

}  // namespace

TEST_CASE("dot log: a tool's log is written only when its owner made it, and never rotated", "[fs]") {
  ctx::test::TempDir d;
  LaunchPlan p = plan_at(d);
  d.mkdir("tool");
  d.mkdir("tool/fs.read.d");
  auto r = append_dot_log(p, "tool/fs.read", "one\n", DotLogRule::opt_in);
  REQUIRE_FALSE(r);
  CHECK(r.error().code == ENOENT);
  CHECK_FALSE(exists(d / "tool/fs.read.d/log"));  // never made
  d.write("tool/fs.read.d/log", "");
  REQUIRE(append_dot_log(p, "tool/fs.read", "one\n", DotLogRule::opt_in));
  CHECK(d.read("tool/fs.read.d/log") == "one\n");
  // Past the cap it is emptied in place: nothing renamed in the .d/.
  const std::string big(kMaxLogBytes - 2, 'x');
  REQUIRE(append_dot_log(p, "tool/fs.read", big + "\n", DotLogRule::opt_in));
  CHECK(d.read("tool/fs.read.d/log") == big + "\n");
  REQUIRE(append_dot_log(p, "tool/fs.read", "two\n", DotLogRule::opt_in));
  CHECK(d.read("tool/fs.read.d/log") == "two\n");
  CHECK_FALSE(exists(d / "tool/fs.read.d/log.1"));
}

TEST_CASE("dot log: a model's log is made when missing and rotated to log.1", "[fs]") {
  ctx::test::TempDir d;
  LaunchPlan p = plan_at(d);
  d.mkdir("model");
  d.mkdir("model/debug");
  d.mkdir("model/debug/echo.d");
  REQUIRE(append_dot_log(p, "model/debug/echo", "one\n", DotLogRule::shared));
  CHECK(d.read("model/debug/echo.d/log") == "one\n");
  const std::string big(kMaxLogBytes - 2, 'x');
  REQUIRE(append_dot_log(p, "model/debug/echo", big + "\n", DotLogRule::shared));
  CHECK(d.read("model/debug/echo.d/log") == big + "\n");
  CHECK(d.read("model/debug/echo.d/log.1") == "one\n");
}

TEST_CASE("dot log: no rule follows a symlink, at the .d/ or at the log", "[fs]") {
  for (DotLogRule rule : {DotLogRule::opt_in, DotLogRule::shared}) {
    ctx::test::TempDir d;
    LaunchPlan p = plan_at(d);
    d.write("elsewhere/log", "kept\n");
    d.mkdir("tool");
    d.symlink(d / "elsewhere", "tool/linked.d");
    auto r = append_dot_log(p, "tool/linked", "x\n", rule);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ENOENT);  // a .d/ reached through a link is no .d/
    d.mkdir("tool/t.d");
    d.symlink(d / "elsewhere/log", "tool/t.d/log");
    r = append_dot_log(p, "tool/t", "x\n", rule);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ELOOP);
    d.mkdir("tool/missing");
    r = append_dot_log(p, "tool/missing/none", "x\n", rule);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ENOENT);
    CHECK(d.read("elsewhere/log") == "kept\n");
  }
}
