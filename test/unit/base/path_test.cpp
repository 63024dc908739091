#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "base/path.hpp"

using ctx::abs_path_issue;

TEST_CASE("strict absolute paths", "[unit]") {
  CHECK_FALSE(abs_path_issue("/"));
  CHECK_FALSE(abs_path_issue("/work"));
  CHECK_FALSE(abs_path_issue("/a/b.c/..d/..."));  // dots inside names are names
  struct Bad {
    const char* p;
    std::size_t off;
    const char* what;
  };
  for (const Bad& b : std::vector<Bad>{
           {"", 0, "path is empty"},
           {"work", 0, "path must be absolute (start with '/')"},
           {"/a//b", 3, "empty path component ('//')"},
           {"/a/./b", 3, "'.' component in path"},
           {"/a/../b", 3, "'..' component in path"},
           {"/..", 1, "'..' component in path"},
           {"/a/", 2, "trailing '/' in path"},
           {"/a\tb", 2, "TAB in path"},
           {"/a\nb", 2, "newline in path"},
           {"/a\x01", 2, "control character in path"},
           {"/a\x7f", 2, "control character in path"},
       }) {
    INFO(b.p);
    auto issue = abs_path_issue(b.p);
    REQUIRE(issue);
    CHECK(issue->offset == b.off);
    CHECK(issue->what == b.what);
  }
  CHECK(abs_path_issue("/" + std::string(256, 'x'))->what == "path component longer than 255 bytes");
  CHECK(abs_path_issue(std::string(4096, '/'))->what == "path is longer than 4095 bytes");
}

TEST_CASE("path prefix arithmetic is component-wise", "[unit]") {
  using ctx::path_is_at_or_under;
  CHECK(path_is_at_or_under("/work", "/work"));
  CHECK(path_is_at_or_under("/work/a", "/work"));
  CHECK_FALSE(path_is_at_or_under("/workshop", "/work"));
  CHECK(path_is_at_or_under("/x", "/"));
  CHECK(ctx::path_suffix("/work/a/b", "/work") == "a/b");
  CHECK(ctx::path_suffix("/work", "/work").empty());
  CHECK(ctx::path_suffix("/work", "/") == "work");
  CHECK(ctx::path_join("/h", "a/b") == "/h/a/b");
  CHECK(ctx::path_join("/", "a") == "/a");
  CHECK(ctx::path_join("/h", "") == "/h");
  CHECK(ctx::path_depth("/") == 0);
  CHECK(ctx::path_depth("/a/b") == 2);
}

TEST_CASE("path order puts parents before children", "[unit]") {
  std::vector<std::string> v{"/a-b", "/a/b/c", "/", "/a", "/a/b", "/a.b", "/b"};
  std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return ctx::path_less(x, y); });
  CHECK(v == std::vector<std::string>{"/", "/a", "/a/b", "/a/b/c", "/a-b", "/a.b", "/b"});
}
