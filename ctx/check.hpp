// `ctx check`: validates agents' control files and reports every finding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ctx::helper {

/// A probed kernel facility (`ctx check --env`), for --json.
struct FacilityFields {
  std::string facility, state, since, detail, remedy;
};

/// One finding of a check.
struct Finding {
  enum class Level { error, warning, note };
  Level level = Level::error;
  std::string text;  ///< "coder.d/mount:3:2: EINVAL: ...", a warning sentence, or a risk note
  /// For risk notes: the tier ("high", "medium", "low"), the grant and
  /// where it is written; empty otherwise.
  std::string tier = {}, what = {}, where = {};
  /// For a kernel facility of `ctx check --env`; empty otherwise.
  std::optional<FacilityFields> facility = {};
};

/// Every error and warning for one agent in a CTX root.
/// With a uid, the user agent home/<user>/agent/<name>.d (docs/abi.md
/// "User agents").
std::vector<Finding> check_agent(const std::string& ctx_root, const std::string& name,
                                 std::optional<std::uint32_t> user = {});

/// Names of the agents (`<name>.d` directories) under <ctx_root>/agent.
std::vector<std::string> agent_names(const std::string& ctx_root);

/// (uid, name) of the user agents (`<name>.d` directories) under every
/// <ctx_root>/home/<uid>/agent.
std::vector<std::pair<std::uint32_t, std::string>> user_agent_names(const std::string& ctx_root);

}  // namespace ctx::helper
