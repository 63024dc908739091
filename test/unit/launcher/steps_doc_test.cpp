// docs/launcher.md's table of a launch names the sandbox's setup steps
// (the timings' names); it must name every step the code has, in order.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "launcher/sandbox/channel.hpp"

TEST_CASE("the step table of docs/launcher.md matches the code's steps", "[unit]") {
  const char* src = std::getenv("CTX_SOURCE_ROOT");
  REQUIRE(src != nullptr);
  std::ifstream in(std::string(src) + "/docs/launcher.md");
  REQUIRE(in);
  std::vector<std::string> documented;
  bool in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0) in_table = line == "## Order of a launch";
    auto at = line.find("(steps: ");
    if (!in_table || at == std::string::npos) continue;
    std::string rest = line.substr(at, line.find(')', at) - at);
    for (std::size_t p = rest.find('`'); p != std::string::npos; p = rest.find('`', p + 1)) {
      std::size_t q = rest.find('`', p + 1);
      documented.push_back(rest.substr(p + 1, q - p - 1));
      p = q;
    }
  }
  std::vector<std::string> code;
  using ctx::launcher::Step;
  for (auto i = static_cast<int>(Step::id_maps); i <= static_cast<int>(Step::exec); ++i)
    code.emplace_back(ctx::launcher::to_string(static_cast<Step>(i)));
  CHECK(documented == code);
}
