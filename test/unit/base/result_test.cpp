#include <catch2/catch.hpp>

#include <ctime>
#include <regex>

#include "base/result.hpp"
#include "base/timestamp.hpp"

namespace {

ctx::Result<int> half(int v) {
  if (v % 2 != 0) return ctx::fail(EINVAL, std::to_string(v) + " is odd");
  return v / 2;
}

ctx::Result<int> quarter(int v) {
  CTX_TRY_ASSIGN(int h, half(v));
  CTX_TRY_ASSIGN(int q, half(h));
  return q;
}

ctx::Result<void> check_even(int v) {
  CTX_TRY_CTX(half(v), "checking " + std::to_string(v));
  return {};
}

}  // namespace

TEST_CASE("Result carries a value or an error with context", "[unit]") {
  auto ok = quarter(8);
  REQUIRE(ok.has_value());
  CHECK(*ok == 2);
  auto bad = quarter(6);
  REQUIRE_FALSE(bad);
  CHECK(bad.error().code == EINVAL);
  CHECK(bad.error().msg == "3 is odd");
  auto v = check_even(5);
  REQUIRE_FALSE(v);
  CHECK(v.error().msg == "checking 5: 5 is odd");
  CHECK(check_even(4).has_value());
}

TEST_CASE("errno_name names errno values", "[unit]") {
  CHECK(ctx::errno_name(EINVAL) == "EINVAL");
  CHECK(ctx::errno_name(EACCES) == "EACCES");
  CHECK(ctx::errno_name(99999) == "E99999");
}

TEST_CASE("timestamps are RFC 3339 UTC with milliseconds", "[unit]") {
  std::string ts = ctx::timestamp_now();
  CHECK(std::regex_match(ts, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)")));
  // The calendar arithmetic agrees with the C library's UTC (the same
  // second, or the next one when the clock ticked between the two).
  for (int i = 0; i < 3; ++i) {
    std::time_t before = std::time(nullptr);
    std::string now = ctx::timestamp_now();
    std::time_t after = std::time(nullptr);
    std::string seconds = now.substr(0, 19);
    bool matches = false;
    for (std::time_t t = before; t <= after; ++t) {
      std::tm tm{};
      ::gmtime_r(&t, &tm);
      char want[32];
      std::strftime(want, sizeof want, "%Y-%m-%dT%H:%M:%S", &tm);
      matches = matches || seconds == want;
    }
    INFO(now);
    CHECK(matches);
  }
}
