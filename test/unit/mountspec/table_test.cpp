#include <catch2/catch.hpp>

#include <random>

#include "mountspec/plan.hpp"
#include "mountspec/table.hpp"
#include "test/support/tempdir.hpp"

using namespace ctx::mountspec;

TEST_CASE("mount corpus: every bad table fails with its exact message", "[unit]") {
  std::string dir = ctx::test::data_dir() + "/mountspec/bad/";
  auto cases = ctx::test::names_in(dir, ".mount");
  REQUIRE(cases.size() >= 20);
  for (const auto& c : cases) {
    INFO(c);
    std::string want = ctx::test::read_file(dir + c + ".err");
    want.pop_back();  // the .err file's newline
    auto r = parse("coder.d/mount", ctx::test::read_file(dir + c + ".mount"));
    REQUIRE_FALSE(r);
    CHECK(r.error().code != 0);
    CHECK(r.error().msg == want);
  }
}

TEST_CASE("mount corpus: good tables parse to their normal form", "[unit]") {
  std::string dir = ctx::test::data_dir() + "/mountspec/good/";
  auto cases = ctx::test::names_in(dir, ".mount");
  REQUIRE(cases.size() >= 4);
  for (const auto& c : cases) {
    INFO(c);
    auto r = parse("coder.d/mount", ctx::test::read_file(dir + c + ".mount"));
    REQUIRE(r);
    CHECK(format_table(*r) == ctx::test::read_file(dir + c + ".out"));
  }
}

TEST_CASE("parse reads fields and lines exactly", "[unit]") {
  auto t = parse("m", "# c\n/a\t/b\trw\trbind,noexec\n\n/c\t/d\tro\t-\n");
  REQUIRE(t);
  REQUIRE(t->size() == 2);
  CHECK((*t)[0] == Entry{.source = "/a", .target = "/b", .attrs = {.noexec = true}, .kind = Kind::rbind, .line = 2});
  CHECK((*t)[1] == Entry{.source = "/c", .target = "/d", .attrs = {.rdonly = true}, .kind = Kind::bind, .line = 4});
}

TEST_CASE("parse reports every error when asked", "[unit]") {
  std::vector<ctx::Error> all;
  auto r = parse("coder.d/mount", "a\t/b\tro\t-\n/a\t/b\tzz\t-\n/x\t/y\tro\twat\n", &all);
  REQUIRE_FALSE(r);
  REQUIRE(all.size() == 3);
  CHECK(all[0].msg == "coder.d/mount:1:1: EINVAL: source must be an absolute path");
  CHECK(all[1].msg == "coder.d/mount:2:7: EINVAL: mode must be ro or rw, not 'zz'");
  CHECK(all[2].msg ==
        "coder.d/mount:3:10: EINVAL: unknown option 'wat' (v0 options: bind, rbind, nosuid, nodev, noexec, -)");
  CHECK(r.error() == all[0]);
}

TEST_CASE("order_for_apply puts parents before children, stably", "[unit]") {
  auto t = parse("m", "/s1\t/work/sub\tro\t-\n/s2\t/work\trw\t-\n/s3\t/a\tro\t-\n/s4\t/work-b\tro\t-\n");
  REQUIRE(t);
  std::vector<std::string> targets;
  for (const auto& e : order_for_apply(*t)) targets.push_back(e.target);
  CHECK(targets == std::vector<std::string>{"/a", "/work", "/work/sub", "/work-b"});
}

TEST_CASE("format and parse round-trip (random tables)", "[unit]") {
  std::mt19937 rng(1234);
  const char* comps[] = {"a", "b", "work", ".x", "dir-1", "é"};
  auto path = [&] {
    std::string p;
    int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) p += std::string("/") + comps[rng() % 6];
    return p;
  };
  for (int iter = 0; iter < 500; ++iter) {
    Table t;
    int n = static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      // One draw per statement, in the order the values were always drawn.
      std::string source = path();
      std::string target = path();
      bool rdonly = rng() % 2 != 0;
      Kind kind = rng() % 2 ? Kind::bind : Kind::rbind;
      bool nosuid = rng() % 2 == 0;
      bool nodev = rng() % 2 == 0;
      bool noexec = rng() % 2 == 0;
      Entry e{.source = source,
              .target = target,
              .attrs = {.rdonly = rdonly, .nosuid = nosuid, .nodev = nodev, .noexec = noexec},
              .kind = kind,
              .line = 0};
      bool dup = false;
      for (const auto& x : t) dup = dup || x.target == e.target;
      if (dup) continue;
      e.line = static_cast<int>(t.size()) + 1;
      t.push_back(e);
    }
    auto back = parse("m", format_table(t));
    REQUIRE(back);
    CHECK(*back == t);
  }
}
