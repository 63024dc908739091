// The lines of `ctx check --env` for kernel facilities, and the list of
// probed facilities against docs/launcher.md's minimum-kernel table.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "ctx/kernel_probe.hpp"

using ctx::helper::FacilityResult;
using ctx::helper::Finding;

TEST_CASE("a kernel facility's finding says facility, state, minimum kernel and remedy", "[unit]") {
  FacilityResult ok{{"mount_setattr", "5.12"}};
  Finding f = ctx::helper::facility_finding(ok);
  CHECK(f.level == Finding::Level::note);
  CHECK(f.text == "env ok      mount_setattr (Linux 5.12)");
  REQUIRE(f.facility);
  CHECK(f.facility->facility == "mount_setattr");
  CHECK(f.facility->state == "ok");
  CHECK(f.facility->since == "5.12");
  CHECK(f.facility->detail.empty());
  CHECK(f.facility->remedy.empty());

  ok.detail = "ABI 7";
  CHECK(ctx::helper::facility_finding(ok).text == "env ok      mount_setattr (Linux 5.12; ABI 7)");

  FacilityResult missing{{"/dev/fuse read-write", "2.6.14"}, FacilityResult::State::missing, "open /dev/fuse: EACCES",
                         "chmod 0666 /dev/fuse"};
  f = ctx::helper::facility_finding(missing);
  CHECK(f.level == Finding::Level::warning);
  CHECK(f.text == "env missing /dev/fuse read-write (Linux 2.6.14): open /dev/fuse: EACCES: chmod 0666 /dev/fuse");
  REQUIRE(f.facility);
  CHECK(f.facility->state == "missing");
  CHECK(f.facility->detail == "open /dev/fuse: EACCES");
  CHECK(f.facility->remedy == "chmod 0666 /dev/fuse");
  missing.fatal = true;
  CHECK(ctx::helper::facility_finding(missing).level == Finding::Level::error);

  FacilityResult skipped{{"cgroup.kill", "5.14"}, FacilityResult::State::not_probed, "no writable cgroup2"};
  f = ctx::helper::facility_finding(skipped);
  CHECK(f.level == Finding::Level::note);
  CHECK(f.text == "env skip    cgroup.kill (Linux 5.14): not probed: no writable cgroup2");
  REQUIRE(f.facility);
  CHECK(f.facility->state == "not probed");
}

TEST_CASE("ctx check --env probes the rows of docs/launcher.md's minimum-kernel table", "[unit]") {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  std::ifstream in(std::string(src) + "/docs/launcher.md");
  REQUIRE(in);
  std::vector<std::pair<std::string, std::string>> documented;
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_table = line == "## Minimum kernel";
    if (!in_table || line.rfind("| ", 0) != 0 || line.rfind("| facility ", 0) == 0) continue;
    std::size_t a = line.find(" | ");
    std::size_t b = line.find(" | ", a + 3);
    REQUIRE(b != std::string::npos);
    std::string name, since = line.substr(a + 3, b - a - 3);
    for (char c : line.substr(2, a - 2))
      if (c != '`') name += c;
    documented.emplace_back(name, since.substr(0, since.find(' ')));
  }
  std::vector<std::pair<std::string, std::string>> code;
  for (const auto& f : ctx::helper::kernel_facilities()) code.emplace_back(f.name, f.since);
  CHECK(documented == code);
}
