#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "cgroup/limits.hpp"

using ctx::cgroup::Limits;
using ctx::cgroup::parse_limits;

TEST_CASE("limits: every key, comments and empty lines", "[unit]") {
  auto l = parse_limits("coder.d/limits",
                        "# bounds\nmemory.max=1G\npids.max=max\n\ncpu.max=50000 100000\nshm.max=256M\nnproc.max=500\n");
  REQUIRE(l);
  CHECK(*l == Limits{"1G", "max", "50000 100000", "256M", "500"});
  auto some = parse_limits("coder.d/limits", "cpu.max=max\n");
  REQUIRE(some);
  CHECK(*some == Limits{std::nullopt, std::nullopt, "max", std::nullopt, std::nullopt});
  auto none = parse_limits("coder.d/limits", "");
  REQUIRE(none);
  CHECK(*none == Limits{});
}

TEST_CASE("limits: each rejection, with its position", "[unit]") {
  auto msg = [](const std::string& content) {
    auto l = parse_limits("coder.d/limits", content);
    return l ? std::string("accepted") : l.error().msg;
  };
  CHECK(msg("memory.max\n") == "coder.d/limits:1:1: EINVAL: expected KEY=VALUE");
  CHECK(msg("memory.high=1G\n") ==
        "coder.d/limits:1:1: EINVAL: unknown limit 'memory.high' (limits: memory.max, pids.max, cpu.max, shm.max, "
        "nproc.max)");
  CHECK(msg("memory.max=1Q\n") ==
        "coder.d/limits:1:12: EINVAL: memory.max must be 'max' or bytes, optionally with K, M, G or T");
  CHECK(msg("pids.max=-1\n") == "coder.d/limits:1:10: EINVAL: pids.max must be 'max' or a number");
  CHECK(msg("cpu.max=half\n") == "coder.d/limits:1:9: EINVAL: cpu.max must be 'max|QUOTA [PERIOD]' (microseconds)");
  CHECK(msg("cpu.max=max x\n") == "coder.d/limits:1:9: EINVAL: cpu.max period must be a number (microseconds)");
  CHECK(msg("shm.max=0\n") ==
        "coder.d/limits:1:9: EINVAL: shm.max must be bytes, optionally with K, M, G or T, and not 0");
  CHECK(msg("nproc.max=0\n") == "coder.d/limits:1:11: EINVAL: nproc.max must be a number of processes, not 0");
  // Found by fuzz/limits_fuzz: the kernel's memparse() would wrap these to a small limit.
  CHECK(msg("memory.max=18446744073701G\n") == "coder.d/limits:1:12: EINVAL: memory.max must be below 2^64 bytes");
  CHECK(msg("shm.max=16777216T\n") == "coder.d/limits:1:9: EINVAL: shm.max must be below 2^64 bytes");
  CHECK(msg("memory.max=16777215T\nshm.max=9999999999999999999\n") == "accepted");
  CHECK(msg("pids.max=10\npids.max=20\n") == "coder.d/limits:2:1: EINVAL: pids.max is set twice");
  CHECK(msg("pids.max=10") == "coder.d/limits:1:12: EINVAL: missing newline at end of file");
}

TEST_CASE("limits: every error of the file is collected", "[unit]") {
  std::vector<ctx::Error> all;
  auto l = parse_limits("coder.d/limits", "pids.max=x\nfoo\ncpu.max=max\n", &all);
  REQUIRE_FALSE(l);
  REQUIRE(all.size() == 2);
  CHECK(all[0].msg == "coder.d/limits:1:10: EINVAL: pids.max must be 'max' or a number");
  CHECK(all[1].msg == "coder.d/limits:2:1: EINVAL: expected KEY=VALUE");
  CHECK(l.error().msg == all[0].msg);
}
