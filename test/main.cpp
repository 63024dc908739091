// The one Catch2 runner. meson registers one test per tag; before running a
// tag's cases, this main probes the facility the tag needs and exits 77
// (skip) with the reason when the machine lacks it. CTX_TEST_STRICT turns
// such a skip into a failure: "1" for every facility, or a comma list of
// facility names ("userns,root,cgroup").
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "test/support/facility.hpp"

namespace {

bool strict_for(std::string_view facility) {
  const char* s = std::getenv("CTX_TEST_STRICT");
  if (s == nullptr || *s == '\0' || std::string_view(s) == "0") return false;
  std::string_view list(s);
  if (list == "1") return true;
  while (!list.empty()) {
    auto comma = list.find(',');
    if (list.substr(0, comma) == facility) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  std::string excluded, spec;
  // The first argument that begins with "[tag]" names the facility
  // ("[root]" or, for a few cases by name, "[root]*handoff").
  for (int i = 1; i < argc; ++i) {
    std::string_view a(argv[i]);
    std::size_t close = a.find(']');
    if (a.size() < 3 || a.front() != '[' || close == std::string_view::npos || close < 2) continue;
    std::string facility(a.substr(1, close - 1));
    ctx::test::set_current_facility(facility);
    std::optional<std::string> missing = ctx::test::facility_missing(facility);
    if (missing) {
      if (strict_for(facility)) {
        std::fprintf(stderr, "FAIL: CTX_TEST_STRICT requires [%s], but %s\n", facility.c_str(), missing->c_str());
        return 1;
      }
      std::fprintf(stderr, "SKIP: [%s] %s\n", facility.c_str(), missing->c_str());
      return 77;
    }
    // A case that needs a second facility (tagged [cgroup][fuse]) runs in
    // either tag's run where the other one is there too; where it is not,
    // the case is left out with the reason, the rest of the tag runs.
    for (const char* other : {"cgroup", "fuse"}) {
      if (facility == other || (facility != "cgroup" && facility != "fuse")) continue;
      if (auto why = ctx::test::facility_missing(other)) {
        if (strict_for(other)) {
          std::fprintf(stderr, "FAIL: CTX_TEST_STRICT requires [%s], but %s\n", other, why->c_str());
          return 1;
        }
        std::fprintf(stderr, "SKIP: the cases of [%s] that also need [%s]: %s\n", facility.c_str(), other,
                     why->c_str());
        excluded += std::string("~[") + other + "]";
      }
    }
    if (!excluded.empty()) {
      spec = std::string(a) + excluded;
      argv[i] = spec.data();
    }
    break;
  }
  return Catch::Session().run(argc, argv);
}
