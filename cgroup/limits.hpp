// The optional `limits` control file of an agent (KEY=VALUE): the cgroup
// v2 values written to the agent's subtree and the launcher's own bounds.
// Pure: the caller reads the file.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ctx::cgroup {

/// The `limits` extension, already validated, as the values will be
/// written ("max", "1073741824", "50000 100000").
struct Limits {
  std::optional<std::string> memory_max;
  std::optional<std::string> pids_max;
  std::optional<std::string> cpu_max;
  /// The launcher's own bounds (no cgroup controller needed): the size of
  /// the sandbox's /dev/shm in bytes with an optional K/M/G/T suffix, and
  /// RLIMIT_NPROC of the runtime.
  std::optional<std::string> shm_max;
  std::optional<std::string> nproc_max;
  bool operator==(const Limits&) const = default;
};

/// Parses a `limits` file. `file` names it in messages ("coder.d/limits").
/// On failure returns the first error; when `all` is given, every error of
/// the file is appended to it (for `ctx check`). Errors read
/// "coder.d/limits:1:10: EINVAL: pids.max must be 'max' or a number".
Result<Limits> parse_limits(std::string_view file, std::string_view content, std::vector<Error>* all = nullptr);

}  // namespace ctx::cgroup
