// `ctx new`'s options that add to a first agent (issue 27): --mount,
// --tool and --model. Each is checked whole before anything is written.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/result.hpp"

namespace ctx::helper {

/// One `--mount SRC:DST[:ro|rw]`.
struct MountOption {
  std::string spec;  ///< as given, for messages
  std::string source;
  std::string target;
  bool rw = false;
};

/// Parses a --mount value: two strict absolute paths, then ro (the
/// default) or rw. EINVAL naming the option and the fix otherwise.
Result<MountOption> parse_mount_option(std::string_view spec);

/// Its mount table line: bind,nosuid,nodev.
std::string mount_line(const MountOption& m);

/// Refuses a source the launch would refuse: ENOENT for a path that does
/// not exist (for the caller), EINVAL for one that leads through a
/// symbolic link (the launcher opens sources without following any),
/// naming its real path.
Result<void> check_mount_source(const MountOption& m);

/// Refuses a --mount whose target is one of `taken` (the agent's other
/// mounts): EINVAL naming both.
Result<void> check_mount_target(const MountOption& m, const std::vector<std::string>& taken);

/// EINVAL for a --tool or --model value that is no tool or model name.
Result<void> check_grant_names(const std::vector<std::string>& tools, const std::vector<std::string>& models);

/// The policy lines that grant each tool (execute) and model (use) to
/// the label type `type`, each once, with a comment; "" for none.
std::string grant_rules(const std::string& type, const std::vector<std::string>& tools,
                        const std::vector<std::string>& models);

}  // namespace ctx::helper
