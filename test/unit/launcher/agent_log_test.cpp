#include <catch2/catch.hpp>
#include <string>

#include "launcher/records/agent_files.hpp"
#include "sys/file.hpp"
#include "test/support/tempdir.hpp"

using ctx::launcher::append_capped_log;
using ctx::launcher::kMaxLogBytes;

TEST_CASE("two instances appending to one log rotate it once: the other's stale count drops no log.1", "[fs]") {
  ctx::test::TempDir t;
  const std::string full(kMaxLogBytes - 10, 'x');
  t.write("log", full);
  auto dir = ctx::sys::open(ctx::sys::at_cwd, t.path(), ctx::sys::Open::directory);
  REQUIRE(dir);
  // Both instances counted the log near its cap.
  std::uint64_t a = full.size(), b = full.size();
  const std::string line(20, 'a');
  REQUIRE(append_capped_log(dir->get(), line, a));  // rotates: log.1 is the full log
  REQUIRE(append_capped_log(dir->get(), std::string(20, 'b'), b));
  CHECK(t.read("log.1") == full);
  CHECK(t.read("log") == line + std::string(20, 'b'));
  CHECK(b == 40);
}
