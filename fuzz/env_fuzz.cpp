// libFuzzer target: the agent-directory reader over fuzzed env, label,
// parent, limits, path and groups files (split at 0xff bytes), with a
// fixed owner.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "agentdir/load.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  static const char* kFiles[] = {"env", "label", "parent", "limits", "path", "groups", "meta.json"};
  ctx::agentdir::ControlFiles files{{"owner", "1000\n"}};
  std::size_t start = 0;
  for (const char* name : kFiles) {
    if (start > in.size()) break;
    std::size_t sep = in.find('\xff', start);
    files[name] = std::string(in.substr(start, sep == std::string_view::npos ? std::string_view::npos : sep - start));
    if (sep == std::string_view::npos) break;
    start = sep + 1;
  }
  std::vector<ctx::Error> all;
  auto spec = ctx::agentdir::build_spec(
      "fuzz", "/ctx", files, [](std::uint32_t) { return std::optional<std::uint32_t>(1000); }, &all);
  if (!spec && all.empty()) __builtin_trap();
  if (spec) {
    for (const auto& [k, v] : spec->env)
      if (k.rfind("CTX_", 0) == 0) __builtin_trap();  // reserved keys never pass
  }
  return 0;
}
